package packaging

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrermReleasesOnRemoval: before the package is removed, prerm.sh
// releases every claim of the running agent, so that nothing it holds (an
// address it added, a key in the store) outlives the package; an upgrade
// keeps them for the new agent.
func TestPrermReleasesOnRemoval(t *testing.T) {
	for _, tc := range []struct {
		arg         string
		wantRelease bool
	}{
		{"remove", true},      // Debian: prerm remove
		{"0", true},           // RPM: %preun with no package left
		{"upgrade", false},    // Debian: prerm upgrade
		{"1", false},          // RPM: %preun of an upgrade
		{"deconfigure", true}, // Debian: another package takes its place
	} {
		t.Run(tc.arg, func(t *testing.T) {
			dir := t.TempDir()
			calls := filepath.Join(dir, "calls")
			// A vip that records how it was called.
			stub := "#!/bin/sh\necho \"vip $*\" >> " + calls + "\n"
			if err := os.WriteFile(filepath.Join(dir, "vip"), []byte(stub), 0o755); err != nil {
				t.Fatal(err)
			}
			sock := filepath.Join(dir, "vip.sock")
			ln, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			cmd := exec.Command("sh", "prerm.sh", tc.arg)
			cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "VIP_SOCKET="+sock)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("prerm.sh %s: %v\n%s", tc.arg, err, out)
			}
			got, _ := os.ReadFile(calls)
			released := strings.Contains(string(got), "vip release --all --socket "+sock)
			if released != tc.wantRelease {
				t.Errorf("prerm.sh %s ran %q; want a release: %v", tc.arg, got, tc.wantRelease)
			}
		})
	}
}
