package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vipctl/vip/test/labtest"
)

// TestLogsToTheJournal runs vip as a unit would run it, its standard error
// a stream named by $JOURNAL_STREAM: each line then starts with the
// priority that journald keeps, and has no time of its own. The stream is
// a file here (no journald is needed): what counts is that its device and
// inode are the ones in the variable. vip agent --clean on a damaged state
// file logs one warning and one info line, and needs no privilege.
func TestLogsToTheJournal(t *testing.T) {
	labtest.SkipShort(t) // runs the vip binary, which short mode does not build
	t.Parallel()
	tests := []struct {
		name string
		// named is the file whose device and inode the variable holds.
		named   string
		json    bool
		logFile bool
		want    [2]string // how the warning and the info line start
	}{
		{name: "text to the journal", named: "stderr",
			want: [2]string{`<4>level=WARN msg="state file damaged`, `<6>level=INFO msg="clean finished"`}},
		{name: "json to the journal", named: "stderr", json: true,
			want: [2]string{`<4>{"level":"WARN","msg":"state file damaged`, `<6>{"level":"INFO","msg":"clean finished"`}},
		{name: "the variable names another file", named: "other", want: [2]string{`time=`, `time=`}},
		{name: "a --log-file", named: "stderr", logFile: true, want: [2]string{`time=`, `time=`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := func(name string) string { return filepath.Join(dir, name) }
			for _, f := range []string{"other", "stderr"} {
				if err := os.WriteFile(path(f), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(path("vip.state"), []byte("not a state file\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			stderr, err := os.OpenFile(path("stderr"), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer stderr.Close()
			fi, err := os.Stat(path(tt.named))
			if err != nil {
				t.Fatal(err)
			}
			st := fi.Sys().(*syscall.Stat_t)

			args, logs := []string{"agent", "--clean", "--socket", path("vip.sock")}, path("stderr")
			if tt.json {
				args = append(args, "--log-format", "json")
			}
			if tt.logFile {
				logs = path("vip.log")
				args = append(args, "--log-file", logs)
			}
			cmd := exec.Command(vipBin, args...)
			for _, e := range os.Environ() {
				if !strings.HasPrefix(e, "JOURNAL_STREAM=") {
					cmd.Env = append(cmd.Env, e)
				}
			}
			cmd.Env = append(cmd.Env, fmt.Sprintf("JOURNAL_STREAM=%d:%d", st.Dev, st.Ino))
			cmd.Stderr = stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("vip %s: %v", strings.Join(args, " "), err)
			}
			out, err := os.ReadFile(logs)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
			if len(lines) != 2 {
				t.Fatalf("vip %s logged %d lines, want 2 (a warning, an info line):\n%s", strings.Join(args, " "), len(lines), out)
			}
			for i, want := range tt.want {
				if !strings.HasPrefix(lines[i], want) {
					t.Errorf("line %d: got %q, want it to start with %q", i+1, lines[i], want)
				}
				journal := strings.HasPrefix(want, "<")
				if hasTime := strings.Contains(lines[i], "time=") || strings.Contains(lines[i], `"time":`); hasTime == journal {
					t.Errorf("line %d: got %q: has a time %v, want %v", i+1, lines[i], hasTime, !journal)
				}
			}
		})
	}
}
