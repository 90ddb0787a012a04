package commands

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestWatchFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want watchOptions
	}{
		{"defaults", nil, watchOptions{}},
		{"every flag", []string{"-i", "eth0", "--no-autostart"}, watchOptions{Interface: "eth0", NoAutostart: true}},
		{"long interface", []string{"--interface", "eth1"}, watchOptions{Interface: "eth1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parse(t, newWatchCmd, tt.args...); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestWatchRefuses(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    ExitCode
		wantErr []string
	}{
		{"no terminal", []string{"watch"}, ExitBadInput, []string{"vip watch needs a terminal", `use "vip events"`}},
		{"unknown interface", []string{"watch", "-i", "eth9"}, ExitBadInput, []string{`interface "eth9" does not exist`}},
		{"an argument", []string{"watch", "192.0.2.10"}, ExitBadInput, []string{"unknown command", "vip watch --help"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runVip(t, tt.args...)
			if code != tt.want {
				t.Errorf("got exit %d, want %d; stderr %q", code, tt.want, errOut)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q does not say %q", errOut, w)
				}
			}
			if out != "" {
				t.Errorf("wrote %q to standard output, want nothing", out)
			}
		})
	}
}

// openPTY returns a pseudo-terminal's two ends.
func openPTY(t *testing.T) (ptmx, tty *os.File) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	ptmx = os.NewFile(uintptr(fd), "/dev/ptmx")
	t.Cleanup(func() { ptmx.Close() })
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock the pty: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open the pty: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	return ptmx, tty
}

// TestWatchNoAgent: on a terminal, with no agent and --no-autostart, watch
// exits 4 before it draws anything.
func TestWatchNoAgent(t *testing.T) {
	_, tty := openPTY(t)
	if !isTerminal(tty) {
		t.Fatal("isTerminal: a pty is not seen as a terminal")
	}
	var errOut bytes.Buffer
	sock := filepath.Join(t.TempDir(), "none.sock")
	code := run(context.Background(), []string{"watch", "--no-autostart", "--socket", sock}, IO{In: tty, Out: tty, ErrOut: &errOut}, fakeSys{})
	if code != ExitUnreachable || !strings.Contains(errOut.String(), "no vip agent answers on "+sock) {
		t.Errorf("got exit %d, %q; want 4 saying no agent answers on %s", code, errOut.String(), sock)
	}
}
