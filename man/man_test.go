package man_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/vipctl/vip/internal/commands"
	"github.com/vipctl/vip/man"
)

func TestManPagesAreFresh(t *testing.T) {
	pages, err := man.Pages(commands.Command())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"vip.1", "vip-claim.1", "vip-release.1", "vip-status.1", "vip-agent.1", "vip-probe.1"} {
		if _, ok := pages[want]; !ok {
			t.Errorf("no man page %s", want)
		}
	}
	for name, want := range pages {
		got, err := os.ReadFile(name)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is stale or missing: run go generate ./man", name)
		}
	}
	files, _ := filepath.Glob("*.1")
	for _, f := range files {
		if _, ok := pages[f]; !ok {
			t.Errorf("%s belongs to no command: run go generate ./man", f)
		}
	}
}
