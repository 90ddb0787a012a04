package e2e_test

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// vipBin is the vip binary the lab tests run, built once by TestMain; in
// short mode it is not built and stays empty, since every test here that
// runs it skips (labtest.SkipShort).
var vipBin string

// raceBuild is set under -race (race_test.go): vipBin is then built with
// the race detector as well.
var raceBuild bool

// slow stretches a bound on how fast vip does something when vip is built
// with the race detector, which makes it several times slower.
// skipRaced skips, in the race detector's run, a lab test that runs alone
// (not in parallel) to measure timing: the plain run measures it, and its
// minute under -race would add to CI's, which must stay under 30. The
// code it drives runs under the race detector in the other lab tests
// (the failsafe's rounds in TestFleetPartitionFencesBeforeTakeOver, its
// sets in TestFleetFailsafeClear, the restarts in TestFleetRestart*).
func skipRaced(t *testing.T) {
	t.Helper()
	if raceBuild {
		t.Skip("a timing lab test that runs alone: measured in the plain run, not again under -race")
	}
}

func slow(d time.Duration) time.Duration {
	if raceBuild {
		return 4 * d
	}
	return d
}

func TestMain(m *testing.M) {
	flag.Parse() // for testing.Short, before m.Run parses the flags
	if testing.Short() {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "vip-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "make a directory for the vip binary:", err)
		os.Exit(1)
	}
	// World-readable, so tests can run the binary as an unprivileged user.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	vipBin = filepath.Join(dir, "vip")
	args := []string{"build", "-o", vipBin}
	races := filepath.Join(dir, "races")
	if raceBuild {
		args = append(args, "-race")
		// Every vip process the tests start writes its race reports here,
		// and waits 50 ms at exit for goroutines to report, not the race
		// runtime's default second: that second was in every vip command
		// a test ran (vip version took 1.08 s race-built, 0.12 s with
		// this), which made a poll of vip fleet too slow to land in a
		// one-second state.
		os.Setenv("GORACE", "log_path="+filepath.Join(races, "report")+" atexit_sleep_ms=50")
		// Writable by all: some tests run vip as an unprivileged user.
		err := os.Mkdir(races, 0o777)
		if err == nil {
			err = os.Chmod(races, 0o777) // the umask narrowed Mkdir's mode
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "make the race report directory:", err)
			os.Exit(1)
		}
	}
	build := exec.Command("go", append(args, "github.com/vipctl/vip/cmd/vip")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build vip:", err)
		os.Exit(1)
	}
	code := m.Run()
	if reports, _ := filepath.Glob(filepath.Join(races, "report.*")); len(reports) > 0 {
		for _, r := range reports {
			b, _ := os.ReadFile(r)
			fmt.Fprintf(os.Stderr, "race reported by a vip process (%s):\n%s\n", filepath.Base(r), b)
		}
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
