package bpfresp

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipctl/vip/test/labtest"
)

// generateArgs returns the arguments of gen.go's go:generate line after
// "go", quotes removed as go generate removes them.
func generateArgs(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("gen.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(src), "\n") {
		rest, ok := strings.CutPrefix(line, "//go:generate go ")
		if !ok {
			continue
		}
		var args []string
		for i, part := range strings.Split(rest, `"`) {
			if i%2 == 1 {
				args = append(args, part) // quoted: one argument
				continue
			}
			args = append(args, strings.Fields(part)...)
		}
		return args
	}
	t.Fatal("gen.go has no go:generate line")
	return nil
}

// TestGeneratedFresh: the committed object and its Go file are what
// go generate makes of the C sources now. It regenerates them into a
// temporary directory with the same command and compares the bytes (clang
// writes the same object for the same sources; bpf2go keeps the source
// directory out of it). A failure means responder.c or vipbpf.h changed
// without `go generate ./announce/bpfresp`.
func TestGeneratedFresh(t *testing.T) {
	labtest.RequireTool(t, "go")
	labtest.RequireTool(t, "clang")
	labtest.RequireTool(t, "llvm-strip")
	dir := t.TempDir()
	args := generateArgs(t) // run, bpf2go's package, its flags, ...
	if len(args) < 2 || args[0] != "run" {
		t.Fatalf("gen.go's go:generate line is not go run: %q", args)
	}
	args = append(args[:2:2], append([]string{"-output-dir", dir}, args[2:]...)...)
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "GOPACKAGE=bpfresp", "GOFILE=gen.go")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("regenerate: %v\n%s", err, out)
	}
	for _, name := range []string{"responder_bpfel.o", "responder_bpfel.go"} {
		want, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate ./announce/bpfresp and commit the result", name)
		}
	}
}
