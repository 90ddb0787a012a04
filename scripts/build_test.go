// The tests here check the set-up path that the README's first commands
// take, by running the real Makefile (make build, which runs
// test-deps.sh build) where it can go wrong: on a machine without a C
// compiler, Go would quietly build vip without cgo, and so without its
// capture. The directory holds no Go code but these tests.
package scripts_test

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/test/labtest"
)

// sentence starts what make build says when vip's capture cannot be built.
const sentence = "vip is built with cgo and libpcap (for --filter capture expressions): "

// nobody is the unprivileged user the build runs as.
const nobody = 65534

// tools are what make build may run, linked into a PATH that holds no C
// compiler (cc, gcc, c99 and the like are not among them).
var tools = []string{"go", "make", "git", "bash", "sh", "env", "id", "sort"}

// buildTimeout bounds one make build: it stops before compiling, in about
// a second.
const buildTimeout = 2 * time.Minute

// TestBuildWithoutCompiler runs make build on a copy of the module, with a
// PATH of its own that holds no C compiler and a stub apt-get that records
// its arguments and installs nothing. Built without cgo, vip would lack its
// capture and fail only once run, so the build must stop with one sentence
// and write no binary: as an unprivileged user at once, and as root after
// asking apt-get for the compiler.
func TestBuildWithoutCompiler(t *testing.T) {
	labtest.RequireRoot(t, "running make build both as root and as an unprivileged user")
	setpriv := labtest.RequireTool(t, "setpriv")
	paths := map[string]string{}
	for _, tool := range tools {
		paths[tool] = labtest.RequireTool(t, tool)
	}
	module, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name        string
		root        bool
		wantInstall []string // packages make build asks apt-get to install
	}{
		{name: "unprivileged"},
		{name: "root", root: true, wantInstall: []string{"gcc", "libc6-dev"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBox(t, module, paths)
			if !tt.root {
				b.chown(t, nobody)
			}
			ctx, cancel := context.WithTimeout(t.Context(), buildTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, paths["make"], "build")
			if !tt.root {
				cmd = exec.CommandContext(ctx, setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--", "make", "build")
			}
			cmd.Dir, cmd.Env = b.src, b.env
			out, err := cmd.CombinedOutput()

			if err == nil {
				t.Errorf("make build succeeded without a C compiler, want it to stop; output:\n%s", out)
			}
			if !strings.Contains(string(out), sentence) {
				t.Errorf("make build said:\n%s\nwant a line starting %q", out, sentence)
			}
			if _, err := os.Stat(filepath.Join(b.src, "vip")); !os.IsNotExist(err) {
				t.Errorf("make build wrote %s without a C compiler (stat: %v), want no binary", filepath.Join(b.src, "vip"), err)
			}
			calls := b.aptCalls(t)
			if tt.wantInstall == nil && len(calls) > 0 {
				t.Errorf("got apt-get calls %q as an unprivileged user, want none", calls)
			}
			if tt.wantInstall != nil && !asked(calls, tt.wantInstall) {
				t.Errorf("got apt-get calls %q, want an install of %q", calls, tt.wantInstall)
			}
		})
	}
}

// asked reports whether one of the apt-get calls installs every package.
func asked(calls []string, pkgs []string) bool {
	for _, c := range calls {
		args := strings.Fields(c)
		if !slices.Contains(args, "install") {
			continue
		}
		if !slices.ContainsFunc(pkgs, func(p string) bool { return !slices.Contains(args, p) }) {
			return true
		}
	}
	return false
}

// box is a copy of the module to build in, with the environment make runs
// in: PATH holds the tools and a stub apt-get alone, and the Go caches are
// the box's own.
type box struct {
	dir, src string
	aptLog   string
	env      []string
}

// newBox copies module into a new box and links each tool into its PATH.
// Its modules are vendored, so that a build as any user works offline
// without reading root's module cache.
func newBox(t *testing.T, module string, paths map[string]string) *box {
	t.Helper()
	dir := t.TempDir()
	// t.TempDir's directories are root's alone; the build user must reach in.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b := &box{dir: dir, src: filepath.Join(dir, "src"), aptLog: filepath.Join(dir, "apt-get.log")}
	bin := filepath.Join(dir, "bin")
	for _, d := range []string{bin, filepath.Join(dir, "home"), filepath.Join(dir, "gocache")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for tool, path := range paths {
		if err := os.Symlink(path, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	stub := "#!/bin/sh\n# Records its arguments and installs nothing.\necho \"$*\" >> '" + b.aptLog + "'\n"
	if err := os.WriteFile(filepath.Join(bin, "apt-get"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b.aptLog, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	copyModule(t, module, b.src)
	vendor := exec.Command(paths["go"], "mod", "vendor")
	vendor.Dir, vendor.Env = b.src, append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := vendor.CombinedOutput(); err != nil {
		t.Fatalf("go mod vendor: %v\n%s", err, out)
	}
	b.env = []string{
		"PATH=" + bin,
		"HOME=" + filepath.Join(dir, "home"),
		"GOCACHE=" + filepath.Join(dir, "gocache"),
		"GOMODCACHE=" + filepath.Join(dir, "home", "gomod"),
		"GOENV=off",
		"GOTOOLCHAIN=local",
		"GOPROXY=off",
		"GOFLAGS=-mod=vendor",
		"LC_ALL=C",
	}
	return b
}

// chown hands what the build writes to uid: the source's top directory
// (where vip would go), the home, the build cache and the apt-get log.
func (b *box) chown(t *testing.T, uid int) {
	t.Helper()
	for _, p := range []string{b.src, filepath.Join(b.dir, "home"), filepath.Join(b.dir, "gocache"), b.aptLog} {
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
}

// aptCalls returns the arguments of each apt-get call, one string a call.
func (b *box) aptCalls(t *testing.T) []string {
	t.Helper()
	log, err := os.ReadFile(b.aptLog)
	if err != nil {
		t.Fatal(err)
	}
	return strings.FieldsFunc(string(log), func(r rune) bool { return r == '\n' })
}

// copyModule copies the module's files from module to dir, leaving out git's
// and what builds and tests leave behind (.gitignore's entries).
func copyModule(t *testing.T, module, dir string) {
	t.Helper()
	err := filepath.WalkDir(module, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(module, path)
		if err != nil {
			return err
		}
		switch {
		case rel == ".git" || rel == "dist" || rel == "vip" || rel == "vendor":
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		case d.IsDir():
			return os.Mkdir(filepath.Join(dir, rel), 0o755)
		case !d.Type().IsRegular() || slices.Contains([]string{".test", ".out", ".pcap"}, filepath.Ext(rel)):
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), data, info.Mode().Perm())
	})
	if err != nil {
		t.Fatalf("copy the module: %v", err)
	}
}
