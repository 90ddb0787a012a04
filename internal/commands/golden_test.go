package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vip/internal/api"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run go test ./internal/commands -run %s -update", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update if the change is intended):\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

func TestHelpGolden(t *testing.T) {
	root := Command()
	var walk func(c *cobra.Command)
	var cmds []*cobra.Command
	walk = func(c *cobra.Command) {
		cmds = append(cmds, c)
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() {
				walk(s)
			}
		}
	}
	walk(root)
	for _, c := range cmds {
		path := strings.Fields(c.CommandPath())[1:]
		name := strings.Join(append([]string{"vip"}, path...), "-")
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			// The default socket comes from the environment: keep it out.
			t.Setenv(api.SocketEnv, "")
			t.Setenv(storeEnv, "")
			code := run(context.Background(), append(path, "--help"), IO{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, fakeSys{})
			if code != ExitOK || errOut.Len() > 0 {
				t.Fatalf("--help: exit %d, stderr %q", code, errOut.String())
			}
			golden(t, filepath.Join("help", name+".golden"), out.Bytes())
		})
	}
}

var statusFixture = api.StatusResponse{
	Agent: api.Agent{PID: 4242, Version: "dev", Started: time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC), Socket: "/run/vip/vip.sock", StateFile: "/run/vip/vip.state"},
	Claims: []api.Claim{
		{Addr: "192.0.2.10", Interface: "eth0", MAC: "02:00:00:00:00:02", State: "announcing",
			ClaimedAt: time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC), RefreshedAt: time.Date(2026, 11, 30, 1, 2, 0, 0, time.UTC),
			WindowEnd: time.Date(2026, 11, 30, 1, 2, 5, 0, time.UTC), WindowRemaining: api.Duration(3200 * time.Millisecond),
			Answered: 12, GratuitousFrames: 6, Window: api.Duration(5 * time.Second), Interval: api.Duration(1100 * time.Millisecond), Frames: "arp-request,arp-reply,na", OnConflict: "defend",
			Responder: "ebpf (tcx)", Traffic: &api.ClaimTraffic{Packets: 1204, Bytes: 1_100_000, PacketsPerSecond: 12, BytesPerSecond: 9400}},
		{Addr: "2001:db8::10", Interface: "eth0", MAC: "02:00:00:00:00:02", State: "conflict",
			ClaimedAt: time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC), RefreshedAt: time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC),
			Answered: 3, GratuitousFrames: 5, Assigned: true, Window: api.Duration(5 * time.Second), Interval: api.Duration(1100 * time.Millisecond), Frames: "arp-request,arp-reply,na", OnConflict: "warn", Responder: "kernel",
			Claimers: []api.Claimer{{MAC: "02:00:00:00:ee:01", Kind: "advertisement", FirstSeen: time.Date(2026, 11, 30, 1, 1, 0, 0, time.UTC), LastSeen: time.Date(2026, 11, 30, 1, 2, 1, 0, time.UTC), Count: 4}}},
		{Addr: "198.51.100.7", Interface: "eth1", State: "waiting",
			ClaimedAt: time.Date(2026, 11, 30, 0, 30, 0, 0, time.UTC), RefreshedAt: time.Date(2026, 11, 30, 0, 30, 0, 0, time.UTC),
			Window: api.Duration(5 * time.Second), Interval: api.Duration(1100 * time.Millisecond), Frames: "arp-request,arp-reply,na", OnConflict: "defend"},
	},
	Captures: []api.CaptureStat{{Interface: "eth0", Received: 1234, Undecodable: 2}},
}

func TestStatusGolden(t *testing.T) {
	var out bytes.Buffer
	d := &deps{io: IO{Out: &out}}
	if err := printStatus(d, statusFixture, time.Date(2026, 11, 30, 1, 2, 2, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	golden(t, "status.golden", out.Bytes())
	out.Reset()
	if err := writeJSON(d, statusFixture); err != nil {
		t.Fatal(err)
	}
	golden(t, "status.json.golden", out.Bytes())
}

// serveStatus answers /v1/status with st on a socket in a temporary
// directory, for the completions that ask the agent.
func serveStatus(t *testing.T, st api.StatusResponse) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "vip.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { json.NewEncoder(w).Encode(st) })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

func TestHeldCompletion(t *testing.T) {
	d := &deps{socket: serveStatus(t, statusFixture)}
	c := &cobra.Command{}
	c.SetContext(context.Background())
	got, dir := heldCompletion(d)(c, nil, "")
	want := []string{"192.0.2.10\teth0", "2001:db8::10\teth0", "198.51.100.7\teth1"}
	if strings.Join(got, "|") != strings.Join(want, "|") || dir != cobra.ShellCompDirectiveNoFileComp {
		t.Errorf("got %q (%v), want %q without file completion", got, dir, want)
	}
	d.socket = filepath.Join(t.TempDir(), "none.sock")
	if got, dir := heldCompletion(d)(c, nil, ""); len(got) != 0 || dir != cobra.ShellCompDirectiveNoFileComp {
		t.Errorf("without an agent: got %q (%v), want nothing and no file completion", got, dir)
	}
}

func TestInterfaceCompletion(t *testing.T) {
	list := func() ([]net.Interface, error) {
		return []net.Interface{
			{Name: "lo", Flags: net.FlagUp | net.FlagLoopback},
			{Name: "eth1", Flags: net.FlagUp, HardwareAddr: net.HardwareAddr{2, 0, 0, 0, 0, 3}},
			{Name: "eth0", Flags: net.FlagUp, HardwareAddr: net.HardwareAddr{2, 0, 0, 0, 0, 2}},
			{Name: "eth9", Flags: 0, HardwareAddr: net.HardwareAddr{2, 0, 0, 0, 0, 9}},
			{Name: "wg0", Flags: net.FlagUp},
		}, nil
	}
	got, dir := interfaceCompletion(list)(nil, nil, "")
	want := []string{"eth0\t02:00:00:00:00:02", "eth1\t02:00:00:00:00:03"}
	if strings.Join(got, "|") != strings.Join(want, "|") || dir != cobra.ShellCompDirectiveNoFileComp {
		t.Errorf("got %q (%v), want %q: up, not loopback, with a MAC", got, dir, want)
	}
}

func TestFlagCompletions(t *testing.T) {
	var out bytes.Buffer
	code := run(context.Background(), []string{"__complete", "claim", "--on-conflict", ""}, IO{In: strings.NewReader(""), Out: &out, ErrOut: &bytes.Buffer{}}, fakeSys{})
	if code != ExitOK || !strings.Contains(out.String(), "defend\nwarn\nyield\n") {
		t.Errorf("--on-conflict completion: got exit %d, %q", code, out.String())
	}
	out.Reset()
	run(context.Background(), []string{"__complete", "claim", "--frames", ""}, IO{In: strings.NewReader(""), Out: &out, ErrOut: &bytes.Buffer{}}, fakeSys{})
	if !strings.Contains(out.String(), "arp-request\narp-reply\nna\nna-routers\n") {
		t.Errorf("--frames completion: got %q", out.String())
	}
}
