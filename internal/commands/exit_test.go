package commands

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vip/test/labtest"
)

// exitCase is a documented bad input: what to type, the code it exits with
// and a word of its message.
type exitCase struct {
	args []string
	want ExitCode
	text string
	// store runs the case with a context that ends soon, so that a store
	// at a documentation address, where nothing answers, is given up on
	// at once rather than after store.DefaultTimeout.
	store bool
	// socketDenied runs the case against a socket this user may not open:
	// root may open any, so the case skips as root.
	socketDenied bool
}

// unreachableStore is a store where nothing answers (TEST-NET-1).
const unreachableStore = "etcd://192.0.2.1:1"

// exitCases are the bad inputs of each command, one or more for each code
// it returns that a test can make without root or a network.
var exitCases = map[string][]exitCase{
	"vip": {
		{args: []string{"steal"}, want: ExitBadInput, text: `unknown command "steal"`},
		{args: []string{"--nope"}, want: ExitBadInput, text: "vip --help"},
	},
	"vip claim": {
		{args: []string{"claim", "--foreground"}, want: ExitBadInput, text: "needs at least one address"},
		{args: []string{"claim", "192.0.2.300", "--foreground"}, want: ExitBadInput, text: "is not an IP address"},
		{args: []string{"claim", "192.0.2.10", "--nope"}, want: ExitBadInput, text: "vip claim --help"},
		{args: []string{"claim", "192.0.2.10", "--no-autostart", "--socket", "/nonexistent/vip.sock"}, want: ExitUnreachable, text: "no vip agent answers"},
	},
	"vip release": {
		{args: []string{"release"}, want: ExitBadInput, text: "--all"},
		{args: []string{"release", "nope"}, want: ExitBadInput, text: "not an IP address"},
		{args: []string{"release", "192.0.2.10", "--strict", "--socket", "/nonexistent/vip.sock"}, want: ExitFailure, text: "not held"},
		{args: []string{"release", "192.0.2.10"}, want: ExitUnreachable, text: "not open to this user", socketDenied: true},
	},
	"vip refresh": {
		{args: []string{"refresh"}, want: ExitBadInput, text: "--all"},
		{args: []string{"refresh", "nope"}, want: ExitBadInput, text: "not an IP address"},
		{args: []string{"refresh", "192.0.2.10", "--socket", "/nonexistent/vip.sock"}, want: ExitUnreachable, text: "sudo vip agent"},
	},
	"vip status": {
		{args: []string{"status", "extra"}, want: ExitBadInput, text: "vip status --help"},
		{args: []string{"status", "--check", "--socket", "/nonexistent/vip.sock"}, want: ExitUnreachable, text: "sudo vip agent"},
	},
	"vip events": {
		{args: []string{"events", "--nope"}, want: ExitBadInput, text: "vip events --help"},
		{args: []string{"events", "--socket", "/nonexistent/vip.sock"}, want: ExitUnreachable, text: "sudo vip agent"},
		{args: []string{"events", "--since", "-5m"}, want: ExitBadInput, text: "--since -5m0s is negative"},
	},
	"vip agent": {
		{args: []string{"agent", "--metrics", "9469"}, want: ExitBadInput, text: "is not HOST:PORT"},
		{args: []string{"agent", "--store", "etcd://192.0.2.1"}, want: ExitBadInput, text: "etcd://HOST:PORT"},
	},
	"vip watch": {
		{args: []string{"watch", "192.0.2.10"}, want: ExitBadInput, text: "vip watch --help"},
		{args: []string{"watch", "--socket", "/nonexistent/vip.sock"}, want: ExitBadInput, text: "needs a terminal"},
	},
	"vip move": {
		{args: []string{"move", "192.0.2.10"}, want: ExitBadInput, text: "--to NODE"},
		{args: []string{"move", "192.0.2.10", "--to", "b"}, want: ExitBadInput, text: "--store"},
		{args: []string{"move", "192.0.2.10", "--to", "b", "--store", unreachableStore}, want: ExitUnreachable, text: "check --store", store: true},
	},
	"vip fleet": {
		{args: []string{"fleet"}, want: ExitBadInput, text: "--store"},
		{args: []string{"fleet", "--store", "etcds://192.0.2.5:2379", "--store-ca", "/nonexistent/ca.pem"}, want: ExitBadInput, text: "read --store-ca"},
		{args: []string{"fleet", "--store", unreachableStore}, want: ExitUnreachable, text: "check --store", store: true},
	},
	"vip cordon": {
		{args: []string{"cordon"}, want: ExitBadInput, text: "one node"},
		{args: []string{"cordon", "b", "--store", unreachableStore}, want: ExitUnreachable, text: "check --store", store: true},
	},
	"vip uncordon": {
		{args: []string{"uncordon", "b"}, want: ExitBadInput, text: "--store"},
		{args: []string{"uncordon", "b", "--store", unreachableStore}, want: ExitUnreachable, text: "check --store", store: true},
	},
	"vip failsafe": {
		{args: []string{"failsafe", "a"}, want: ExitBadInput, text: "no argument"},
		{args: []string{"failsafe"}, want: ExitBadInput, text: "--store"},
		{args: []string{"failsafe", "--store", unreachableStore}, want: ExitUnreachable, text: "check --store", store: true},
	},
	"vip failsafe clear": {
		{args: []string{"failsafe", "clear"}, want: ExitBadInput, text: "one node"},
		{args: []string{"failsafe", "clear", "a", "--reason", "two\nlines"}, want: ExitBadInput, text: "--reason"},
		{args: []string{"failsafe", "clear", "a", "--store", unreachableStore}, want: ExitUnreachable, text: "check --store", store: true},
	},
	"vip drain": {
		{args: []string{"drain", "b", "--quiet", "10s", "--timeout", "1s"}, want: ExitBadInput, text: "shorter than --quiet"},
		{args: []string{"drain", "b", "--store", unreachableStore}, want: ExitUnreachable, text: "check --store", store: true},
	},
	"vip standby": {
		{args: []string{"standby", "192.0.2.10"}, want: ExitBadInput, text: "--on NODE"},
		{args: []string{"standby", "192.0.2.10", "--on", "b", "--store", unreachableStore}, want: ExitUnreachable, text: "check --store", store: true},
	},
	"vip probe": {
		{args: []string{"probe"}, want: ExitBadInput, text: "at least one address"},
		{args: []string{"probe", "192.0.2.10", "-i", "eth0", "--count", "11"}, want: ExitBadInput, text: "--count"},
		{args: []string{"probe", "192.0.2.10", "-i", "eth0", "--expect", "b", "--store", unreachableStore}, want: ExitUnreachable, text: "check --store", store: true},
	},
	"vip history": {
		{args: []string{"history"}, want: ExitBadInput, text: "--store"},
		{args: []string{"history", "--store", unreachableStore}, want: ExitUnreachable, text: "check --store", store: true},
	},
	"vip version": {
		{args: []string{"version", "extra"}, want: ExitBadInput, text: "vip version --help"},
	},
	"vip lab": {
		{args: []string{"lab", "nope"}, want: ExitBadInput, text: "use up, down, exec or demo"},
	},
	"vip lab up": {
		{args: []string{"lab", "up", "extra"}, want: ExitBadInput, text: "vip lab up --help"},
	},
	"vip lab down": {
		{args: []string{"lab", "down", "--nope"}, want: ExitBadInput, text: "vip lab down --help"},
	},
	"vip lab exec": {
		{args: []string{"lab", "exec"}, want: ExitBadInput, text: "needs a host and a command"},
	},
	"vip lab demo": {
		{args: []string{"lab", "demo", "extra"}, want: ExitBadInput, text: "vip lab demo --help"},
	},
}

// uncovered says why a code has no case here, and which lab test (in
// test/e2e, as root) makes it and checks its message by the same rule
// (labtest.CheckMessage).
var uncovered = map[ExitCode]string{
	ExitOK:       "success is no bad input",
	ExitFailure:  "the operation itself failing (privileges, the kernel, a lab): it needs root or a network; TestClaimWithoutPrivileges",
	ExitConflict: "a competing claimer on a segment, a fenced claim or a drained node's traffic: it needs an agent, a store and a segment; TestSplitBrainIsSeenAndDefenceIsBounded (status --check), TestProbe (probe --expect), TestDrain",
	ExitHeld:     "another node's claim in a store; TestFleetCommands",
	ExitDenied:   "a store with authentication and roles; TestStoreAuthentication (vip move, vip agent)",
}

// uncoveredOf is the same, for one command's code.
var uncoveredOf = map[string]map[ExitCode]string{
	// The agent reaches its store only after it has taken its socket.
	"vip agent": {ExitUnreachable: "an agent started as root, and its socket; TestExitUnreachableInTheLab"},
	// Watch asks its agent only once it has a terminal.
	"vip watch": {ExitUnreachable: "a terminal; TestExitUnreachableInTheLab"},
}

// TestExitCasesCoverEveryCode: every code a command documents has a bad
// input below, or a reason why a test cannot make it; every case is of a
// command that documents its code.
func TestExitCasesCoverEveryCode(t *testing.T) {
	for path, codes := range commandExits {
		have := map[ExitCode]bool{}
		for _, c := range exitCases[path] {
			have[c.want] = true
		}
		for _, code := range codes {
			if !have[code] && uncovered[code] == "" && uncoveredOf[path][code] == "" {
				t.Errorf("%s returns %d and no case makes it: add one to exitCases, or say why none can in uncoveredOf", path, code)
			}
		}
	}
	for path, cases := range exitCases {
		for _, c := range cases {
			if !containsCode(commandExits[path], c.want) {
				t.Errorf("%s %v: exits %d, which commandExits does not list for %s", path, c.args, c.want, path)
			}
		}
	}
}

// TestUncoveredNameLabTests: each lab test named above as making a code
// exists in test/e2e, so that a renamed test does not leave a code unchecked.
func TestUncoveredNameLabTests(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "test", "e2e", "*_test.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the lab tests in test/e2e: %v (%d files)", err, len(files))
	}
	var src strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	why := slices.Collect(maps.Values(uncovered))
	for _, m := range uncoveredOf {
		why = slices.AppendSeq(why, maps.Values(m))
	}
	named := 0
	for _, w := range why {
		for _, name := range regexp.MustCompile(`\bTest[A-Za-z]+`).FindAllString(w, -1) {
			named++
			if !strings.Contains(src.String(), "func "+name+"(t *testing.T)") {
				t.Errorf("%q names %s, which test/e2e does not have", w, name)
			}
		}
	}
	if named < 6 {
		t.Errorf("only %d lab tests named: each code a bad input here cannot make names the test that does", named)
	}
}

func containsCode(codes []ExitCode, code ExitCode) bool {
	for _, c := range codes {
		if c == code {
			return true
		}
	}
	return false
}

// TestExitCases runs each documented bad input: it exits its code, and its
// message is one line that says what to do.
func TestExitCases(t *testing.T) {
	for path, cases := range exitCases {
		for _, tt := range cases {
			t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
				args := tt.args
				ctx := context.Background()
				if tt.store {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
					defer cancel()
				}
				if tt.socketDenied {
					if os.Geteuid() == 0 {
						t.Skip("root may open any socket: run as a user to check a socket not open to it")
					}
					args = append(args, "--socket", deniedSocket(t))
				}
				var out, errOut bytes.Buffer
				start := time.Now()
				code := run(ctx, args, IO{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, fakeSys{})
				if code != tt.want || !strings.Contains(errOut.String(), tt.text) {
					t.Errorf("%s: vip %v: got exit %d, stderr %q; want exit %d and %q", path, args, code, errOut.String(), tt.want, tt.text)
				}
				if why := labtest.CheckMessage(errOut.String()); why != "" {
					t.Errorf("vip %v: stderr %q %s", args, errOut.String(), why)
				}
				if d := time.Since(start); d > 3*time.Second {
					t.Errorf("vip %v took %v: a bad input is refused at once", args, d)
				}
			})
		}
	}
}

// deniedSocket is a listening socket this user may not connect to.
func deniedSocket(t *testing.T) string {
	dir := t.TempDir()
	path := filepath.Join(dir, "vip.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := os.Chmod(path, 0); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCommandExitsNameEveryCommand: commandExits has every command and
// nothing else, and lists only codes exitCodes describes.
func TestCommandExitsNameEveryCommand(t *testing.T) {
	seen := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !c.IsAvailableCommand() && c.HasParent() {
			return
		}
		seen[c.CommandPath()] = true
		if _, ok := commandExits[c.CommandPath()]; !ok {
			t.Errorf("%s is not in commandExits: list the codes it returns", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(Command())
	for path, codes := range commandExits {
		if !seen[path] {
			t.Errorf("commandExits lists %s, which is no command", path)
		}
		for _, code := range codes {
			if _, ok := exitInfoOf(code); !ok {
				t.Errorf("%s returns %d, which exitCodes does not describe", path, code)
			}
		}
	}
}

// TestExitCodesDescribeEveryCode: every code exitCode can return is in
// exitCodes, once, and each is one a command returns.
func TestExitCodesDescribeEveryCode(t *testing.T) {
	all := []ExitCode{ExitOK, ExitFailure, ExitBadInput, ExitConflict, ExitUnreachable, ExitHeld, ExitDenied}
	if len(exitCodes) != len(all) {
		t.Errorf("exitCodes has %d codes, want %d", len(exitCodes), len(all))
	}
	for _, code := range all {
		if _, ok := exitInfoOf(code); !ok {
			t.Errorf("exit code %d is not in exitCodes", code)
		}
		returned := false
		for _, codes := range commandExits {
			returned = returned || containsCode(codes, code)
		}
		if !returned {
			t.Errorf("no command returns %d in commandExits", code)
		}
	}
}

// TestREADMEExitCodes: the README's table of exit codes is the one
// exitTable makes; -update rewrites it.
func TestREADMEExitCodes(t *testing.T) {
	const begin, end = "<!-- exit-codes:begin -->\n", "<!-- exit-codes:end -->"
	path := filepath.Join("..", "..", "README.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("README.md has no %q ... %q section", strings.TrimSpace(begin), end)
	}
	got, want := s[i+len(begin):j], exitTable()
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(s[:i+len(begin)]+want+s[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md's exit codes are stale: run go test ./internal/commands -run %s -update\ngot:\n%s\nwant:\n%s", t.Name(), got, want)
}

// exitTable is the README's table of exit codes: each code, and the
// commands that return it.
func exitTable() string {
	var paths []string
	for p := range commandExits {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b strings.Builder
	b.WriteString("| code | name | meaning | returned by |\n|---|---|---|---|\n")
	for _, e := range exitCodes {
		var by []string
		for _, p := range paths {
			if slices.Contains(commandExits[p], e.Code) {
				by = append(by, "`"+p+"`")
			}
		}
		who := strings.Join(by, ", ")
		if len(by) == len(paths) {
			who = "every command"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s |\n", e.Code, e.Name, e.Meaning, who)
	}
	for _, p := range paths {
		if passesExit[p] {
			fmt.Fprintf(&b, "\n`%s` also exits with the exit status of the command it ran.\n", p)
		}
	}
	return b.String()
}
