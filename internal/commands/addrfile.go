package commands

import (
	"bufio"
	"io"
	"os"
	"strings"

	"github.com/vipctl/vip/internal/api"
)

// addrSection is a [NAME] section of an address file: a group's addresses.
type addrSection struct {
	group string
	addrs []string
}

// readAddrFile reads whitespace-separated addresses, ignoring # comments;
// a line [NAME] starts the section of group NAME, which runs to the next
// such line or the end. It returns the addresses before any section, and
// the sections.
func readAddrFile(name string, stdin io.Reader) ([]string, []addrSection, error) {
	var r io.Reader = stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, nil, badInput("read addresses: %v", err)
		}
		defer f.Close()
		r = f
	}
	var (
		out      []string
		sections []addrSection
		seen     = map[string]bool{}
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		if g, ok := strings.CutPrefix(line, "["); ok {
			g, ok = strings.CutSuffix(g, "]")
			if !ok {
				return nil, nil, badInput("%s line %d: %q opens a section without closing it: write [NAME]", name, n, line)
			}
			g = strings.TrimSpace(g)
			if err := api.CheckGroup(g); err != nil {
				return nil, nil, badInput("%s line %d: %v", name, n, err)
			}
			if seen[g] {
				return nil, nil, badInput("%s line %d: group %s has a section already: list its addresses in one", name, n, g)
			}
			seen[g] = true
			sections = append(sections, addrSection{group: g})
			continue
		}
		if len(sections) > 0 {
			last := &sections[len(sections)-1]
			last.addrs = append(last.addrs, strings.Fields(line)...)
			continue
		}
		out = append(out, strings.Fields(line)...)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, badInput("read addresses from %s: %v", name, err)
	}
	for _, sec := range sections {
		if len(sec.addrs) == 0 {
			return nil, nil, badInput("%s: section [%s] holds no address: list the group's addresses under it", name, sec.group)
		}
	}
	if len(out) == 0 && len(sections) == 0 {
		return nil, nil, badInput("%s holds no address: write one or more a line", name)
	}
	return out, sections, nil
}
