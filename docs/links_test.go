// The tests here check the documentation itself: every relative link in
// the README and the guides points to a file that exists, and a link to a
// section of a Markdown file to a heading it has. The directory holds no
// Go code but these tests and the command reference's generator (cli/).
package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

var (
	linkRe   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeRe   = regexp.MustCompile("`[^`]*`")
	headerRe = regexp.MustCompile(`^#{1,6} (.+)$`)
)

// files are the documents whose links are checked, relative to docs/.
func files(t *testing.T) []string {
	t.Helper()
	fs := []string{"../README.md", "../BENCHMARKS.md", "../RELIABILITY.md"}
	for _, pattern := range []string{"*.md", "cli/*.md"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, m...)
	}
	return fs
}

// lines are a Markdown file's lines, those of fenced code blocks blank.
func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fenced := false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			l = ""
		}
		if fenced {
			l = ""
		}
		out = append(out, l)
	}
	return out
}

// anchor is the id GitHub gives a heading: lower case, punctuation but
// hyphens and underscores dropped, spaces made hyphens.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the ids of a Markdown file's headings.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	seen := map[string]int{}
	for _, l := range lines(t, path) {
		m := headerRe.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		id := anchor(m[1])
		if n := seen[id]; n > 0 {
			ids[id+"-"+string(rune('0'+n))] = true
		} else {
			ids[id] = true
		}
		seen[id]++
	}
	return ids
}

func TestLinksResolve(t *testing.T) {
	checked := 0
	for _, f := range files(t) {
		for n, l := range lines(t, f) {
			for _, m := range linkRe.FindAllStringSubmatch(codeRe.ReplaceAllString(l, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				file, frag, _ := strings.Cut(target, "#")
				path := f
				if file != "" {
					path = filepath.Join(filepath.Dir(f), file)
					if _, err := os.Stat(path); err != nil {
						t.Errorf("%s:%d: link %s: no file %s", f, n+1, target, path)
						continue
					}
				}
				if frag != "" && strings.HasSuffix(path, ".md") && !anchors(t, path)[frag] {
					t.Errorf("%s:%d: link %s: %s has no heading #%s", f, n+1, target, path, frag)
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked %d links, want the README's and the guides' (20 or more)", checked)
	}
}

func TestAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"Who answers: in the kernel or on sockets":          "who-answers-in-the-kernel-or-on-sockets",
		"Reading the code: `vip claim` to the first answer": "reading-the-code-vip-claim-to-the-first-answer",
		"Why 6 s":              "why-6-s",
		"A host's own address": "a-hosts-own-address",
	} {
		if got := anchor(heading); got != want {
			t.Errorf("anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}
