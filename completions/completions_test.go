package completions_test

import (
	"bytes"
	"os"
	"os/exec"
	"testing"

	"github.com/vipctl/vip/completions"
	"github.com/vipctl/vip/internal/commands"
)

func TestCompletionsAreFresh(t *testing.T) {
	for name, render := range completions.Files(commands.Command()) {
		want, err := render()
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("%s: %v; run go generate ./completions", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate ./completions", name)
		}
	}
}

func TestBashCompletionLoads(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("needs bash")
	}
	out, err := exec.Command("bash", "-c", "source ./vip.bash && complete -p vip").CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("vip")) {
		t.Errorf("source vip.bash: got %v, %q; want the vip completion registered", err, out)
	}
}
