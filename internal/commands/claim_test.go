package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/agent"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/metrics"
	"github.com/vipctl/vip/internal/netcheck"
)

// fakeSys is a host with eth0 (192.0.2.2/24, 2001:db8::2/64) and eth1
// (198.51.100.2/24, IPv6 off).
type fakeSys struct{}

var fakeLinks = []netcheck.Interface{
	{Name: "eth0", Index: 2, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, Up: true, Carrier: true,
		Prefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.2/24"), netip.MustParsePrefix("2001:db8::2/64")}},
	{Name: "eth1", Index: 3, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 3}, Up: true, Carrier: true, IPv6Disabled: true,
		Prefixes: []netip.Prefix{netip.MustParsePrefix("198.51.100.2/24")}},
}

func (fakeSys) Interface(name string) (netcheck.Interface, error) {
	for _, l := range fakeLinks {
		if l.Name == name {
			return l, nil
		}
	}
	return netcheck.Interface{}, fmt.Errorf("%s: %w", name, netcheck.ErrNoInterface)
}

func (fakeSys) InterfaceByIndex(i int) (netcheck.Interface, error) {
	for _, l := range fakeLinks {
		if l.Index == i {
			return l, nil
		}
	}
	return netcheck.Interface{}, errors.New("no such index")
}

func (fakeSys) ConnectedRoutes() ([]netcheck.Route, error) {
	return []netcheck.Route{
		{Dst: netip.MustParsePrefix("192.0.2.0/24"), LinkIndex: 2},
		{Dst: netip.MustParsePrefix("2001:db8::/64"), LinkIndex: 2},
		{Dst: netip.MustParsePrefix("198.51.100.0/24"), LinkIndex: 3},
	}, nil
}

// runVip runs vip with args against the fake host and returns the exit code
// and both streams.
func runVip(t *testing.T, args ...string) (ExitCode, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, IO{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, fakeSys{})
	return code, out.String(), errOut.String()
}

func TestClaimFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want claimOptions
	}{
		{"defaults", []string{"192.0.2.10"}, claimOptions{
			Addrs: []string{"192.0.2.10"}, Window: announce.DefaultWindow, Interval: announce.DefaultInterval,
			Frames: "arp-request,arp-reply,na", Rate: announce.DefaultRate, OnConflict: "defend", ProbeEvery: announce.DefaultProbeEvery,
			Responder: responderOptions{Mode: "auto", Hook: "tcx"}, Metrics: metricsOptions{MaxAddrs: metrics.DefaultMaxAddrs}}},
		{"every flag", []string{"192.0.2.10", "2001:db8::10", "-i", "eth0", "--foreground", "--window", "2s",
			"--interval", "500ms", "--frames", "arp-reply,na-routers", "--rate", "100", "--refresh-every", "30s",
			"--assign", "--json", "--no-autostart", "-f", "vips.txt", "--on-conflict", "yield", "--probe-every", "0", "--filter", "vlan", "--watch-all",
			"--metrics", "127.0.0.1:9469", "--metrics-max-addrs", "8", "--standby", "--responder", "socket"}, claimOptions{Standby: true,
			Responder: responderOptions{Mode: "socket", Hook: "tcx", given: true},
			Addrs:     []string{"192.0.2.10", "2001:db8::10"}, File: "vips.txt", Interface: "eth0", Foreground: true, NoAutostart: true,
			JSON: true, Window: 2 * time.Second, Interval: 500 * time.Millisecond, Frames: "arp-reply,na-routers", Rate: 100,
			RefreshEvery: 30 * time.Second, Assign: true, OnConflict: "yield", Capture: captureOptions{Filter: "vlan", WatchAll: true}, given: allShapeFlags(),
			Metrics: metricsOptions{Addr: "127.0.0.1:9469", MaxAddrs: 8, given: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parse(t, newClaimCmd, tt.args...); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestClaimValidate(t *testing.T) {
	base := func(addrs ...string) claimOptions {
		return claimOptions{Addrs: addrs, Window: announce.DefaultWindow, Interval: announce.DefaultInterval,
			Frames: announce.DefaultFrameKinds.String(), Rate: announce.DefaultRate, given: allShapeFlags()}
	}
	with := func(o claimOptions, f func(*claimOptions)) claimOptions { f(&o); return o }
	tests := []struct {
		name    string
		opts    claimOptions
		want    []announce.Request
		wantErr string
	}{
		{"picks the on-link interface per address", base("192.0.2.10", "198.51.100.10", "2001:db8::10"), []announce.Request{
			{Addr: netip.MustParseAddr("192.0.2.10"), Interface: "eth0"},
			{Addr: netip.MustParseAddr("198.51.100.10"), Interface: "eth1"},
			{Addr: netip.MustParseAddr("2001:db8::10"), Interface: "eth0"}}, ""},
		{"-i overrides the route", with(base("203.0.113.10"), func(o *claimOptions) { o.Interface = "eth1" }),
			[]announce.Request{{Addr: netip.MustParseAddr("203.0.113.10"), Interface: "eth1"}}, ""},
		{"no route and no -i", base("203.0.113.10"), nil, "pass -i"},
		{"IPv6 where it is off", with(base("2001:db8::10"), func(o *claimOptions) { o.Interface = "eth1" }), nil, "IPv6 is turned off on eth1"},
		{"negative window", with(base("192.0.2.10"), func(o *claimOptions) { o.Window = -time.Second }), nil, "window -1s is negative"},
		{"interval too short", with(base("192.0.2.10"), func(o *claimOptions) { o.Interval = time.Millisecond }), nil, "interval 1ms is too short"},
		{"rate zero", with(base("192.0.2.10"), func(o *claimOptions) { o.Rate = 0 }), nil, "--rate 0 must be positive"},
		{"refresh too often", with(base("192.0.2.10"), func(o *claimOptions) { o.RefreshEvery = time.Millisecond }), nil, "refresh-every 1ms is too short"},
		{"no NA kind for IPv6", with(base("2001:db8::10"), func(o *claimOptions) { o.Frames = "arp-request" }), nil, "add na or na-routers"},
		{"bad frame kind", with(base("192.0.2.10"), func(o *claimOptions) { o.Frames = "arp" }), nil, `unknown frame kind "arp"`},
		{"bad conflict policy", with(base("192.0.2.10"), func(o *claimOptions) { o.OnConflict = "fight" }), nil, `unknown conflict policy "fight"`},
		{"probing too often", with(base("192.0.2.10"), func(o *claimOptions) { o.ProbeEvery = time.Millisecond }), nil, "probe-every 1ms is too short"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := tt.opts.request(strings.NewReader(""))
			var p agent.Plan
			if err == nil {
				p, err = agent.PlanClaim(req, fakeSys{})
			}
			if tt.wantErr != "" {
				code, _ := exitCode(err)
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || code != ExitBadInput {
					t.Fatalf("got %v (exit %d), want a bad-input error containing %q", err, code, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(p.Requests) != fmt.Sprint(tt.want) {
				t.Errorf("got requests %v, want %v", p.Requests, tt.want)
			}
		})
	}
}

func TestClaimWindowZeroIsOneRound(t *testing.T) {
	o := claimOptions{Addrs: []string{"192.0.2.10"}, Interval: time.Second, Frames: "arp-request", Rate: 1, given: allShapeFlags()}
	req, err := o.request(strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	p, err := agent.PlanClaim(req, fakeSys{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Options.SingleRound || p.Options.Window != 0 {
		t.Errorf("got options %+v, want a single round said as such, not a window", p.Options)
	}
}

// allShapeFlags is a user who gave every flag whose default the agent
// decides.
func allShapeFlags() map[string]bool {
	m := map[string]bool{}
	for _, name := range shapeFlags {
		m[name] = true
	}
	return m
}

// TestClaimSendsOnlyWhatWasGiven: the defaults of the burst and the probes
// are the agent's to decide, so a claim without those flags sends none of
// them (their flag defaults only document the agent's), and the plan of
// such a request leaves each to the engine. A given value means itself,
// zero included.
func TestClaimSendsOnlyWhatWasGiven(t *testing.T) {
	o := parse(t, newClaimCmd, "192.0.2.10")
	req, err := o.request(strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	if req.Window != nil || req.Interval != nil || req.RefreshEvery != nil || req.ProbeEvery != nil || req.Frames != "" {
		t.Errorf("a claim without burst flags sent %+v: want none of window, interval, refresh-every, probe-every, frames", req)
	}
	p, err := agent.PlanClaim(req, fakeSys{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (announce.ClaimOptions{OnConflict: announce.PolicyDefend}); p.Options != want {
		t.Errorf("its plan's options: got %+v, want %+v (every default the engine's)", p.Options, want)
	}

	o = parse(t, newClaimCmd, "192.0.2.10", "--interval", "0")
	req, err = o.request(strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agent.PlanClaim(req, fakeSys{}); err == nil || !strings.Contains(err.Error(), "interval 0s is too short") {
		t.Errorf("--interval 0: got %v, want it refused as too short, not taken as the default", err)
	}
}

func TestClaimReadsAddressFile(t *testing.T) {
	o := claimOptions{Addrs: []string{"192.0.2.10"}, File: "-", Rate: 1}
	req, err := o.request(strings.NewReader("# maintenance VIPs\n192.0.2.11 192.0.2.12\n\n2001:db8::10  # v6\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"192.0.2.10", "192.0.2.11", "192.0.2.12", "2001:db8::10"}; fmt.Sprint(req.Addrs) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", req.Addrs, want)
	}
	o.File = "-"
	if _, err := o.request(strings.NewReader("# nothing\n")); err == nil {
		t.Error("an empty file: want an error")
	}
}

// TestClaimReadsGroupSections: [NAME] lines in an address file start the
// addresses of group NAME, each group a request of its own; a bad section
// is refused with its line.
func TestClaimReadsGroupSections(t *testing.T) {
	o := claimOptions{File: "-", Rate: 1}
	reqs, err := o.requests(strings.NewReader("192.0.2.9  # alone\n[web]\n192.0.2.10 2001:db8::10\n192.0.2.11\n\n[ db ]  # spaces are fine\n192.0.2.20\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range reqs {
		got = append(got, fmt.Sprintf("%s:%v", r.Group, r.Addrs))
	}
	if want := []string{":[192.0.2.9]", "web:[192.0.2.10 2001:db8::10 192.0.2.11]", "db:[192.0.2.20]"}; !slices.Equal(got, want) {
		t.Errorf("requests %v, want %v", got, want)
	}
	for _, tc := range []struct{ file, flagGroup, want string }{
		{"[web\n192.0.2.10\n", "", "line 1: \"[web\" opens a section without closing it"},
		{"[we b]\n192.0.2.10\n", "", "line 1: group \"we b\" is not a group name"},
		{"[web]\n", "", "section [web] holds no address"},
		{"[web]\n192.0.2.10\n[web]\n192.0.2.11\n", "", "line 3: group web has a section already"},
		{"[web]\n192.0.2.10\n", "db", "give --group NAME or [NAME] sections"},
	} {
		o := claimOptions{File: "-", Rate: 1, Group: tc.flagGroup}
		_, err := o.requests(strings.NewReader(tc.file))
		var in *inputError
		if !errors.As(err, &in) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("file %q: %v, want bad input saying %q", tc.file, err, tc.want)
		}
	}
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		want     ExitCode
		wantText string
	}{
		{"no address", []string{"claim", "--foreground"}, ExitBadInput, "needs at least one address"},
		{"bad address", []string{"claim", "192.0.2.300", "--foreground"}, ExitBadInput, "is not an IP address"},
		{"no agent and no autostart", []string{"claim", "192.0.2.10", "--no-autostart", "--socket", "/nonexistent/vip.sock"}, ExitUnreachable, "no vip agent answers"},
		{"status without an agent", []string{"status", "--socket", "/nonexistent/vip.sock"}, ExitUnreachable, "sudo vip agent"},
		{"release without an agent is idempotent", []string{"release", "192.0.2.10", "--socket", "/nonexistent/vip.sock"}, ExitOK, "nothing is held"},
		{"release --strict without an agent", []string{"release", "192.0.2.10", "--strict", "--socket", "/nonexistent/vip.sock"}, ExitFailure, "not held"},
		{"release needs an address", []string{"release"}, ExitBadInput, "--all"},
		{"release garbage", []string{"release", "nope"}, ExitBadInput, "not an IP address"},
		{"unknown flag", []string{"claim", "192.0.2.10", "--nope"}, ExitBadInput, "vip claim --help"},
		{"unknown command", []string{"steal"}, ExitBadInput, `unknown command "steal"`},
		{"bad log level", []string{"claim", "192.0.2.10", "--foreground", "--log-level", "loud"}, ExitBadInput, "--log-level"},
		{"bad log format", []string{"claim", "192.0.2.10", "--foreground", "--log-format", "xml"}, ExitBadInput, "--log-format"},
		{"metrics not HOST:PORT", []string{"agent", "--metrics", "9469"}, ExitBadInput, "--metrics \"9469\" is not HOST:PORT"},
		{"metrics on a name", []string{"agent", "--metrics", "metrics.example:9469"}, ExitBadInput, "not a name"},
		{"metrics bound negative", []string{"agent", "--metrics", ":9469", "--metrics-max-addrs", "-1"}, ExitBadInput, "--metrics-max-addrs -1 is negative"},
		{"metrics bound alone", []string{"agent", "--metrics-max-addrs", "5"}, ExitBadInput, "give --metrics too"},
		{"foreground metrics not HOST:PORT", []string{"claim", "192.0.2.10", "-i", "eth0", "--foreground", "--metrics", "localhost"}, ExitBadInput, "is not HOST:PORT"},
		{"agent filter that does not compile", []string{"agent", "--filter", "arp and ("}, ExitBadInput, "--filter"},
		{"foreground filter that does not compile", []string{"claim", "192.0.2.10", "-i", "eth0", "--foreground", "--filter", "no such (("}, ExitBadInput, "--filter"},
		{"agent responder unknown", []string{"agent", "--responder", "xdp"}, ExitBadInput, "--responder: unknown responder"},
		{"foreground responder hook unknown", []string{"claim", "192.0.2.10", "-i", "eth0", "--foreground", "--responder-hook", "tc"}, ExitBadInput, "--responder-hook: unknown eBPF hook"},
		// Issue 24: the store's settings are bad input, and etcd:// is
		// never switched to TLS behind the operator's back.
		{"store CA missing", []string{"fleet", "--store", "etcds://192.0.2.5:2379", "--store-ca", "/nonexistent/ca.pem"}, ExitBadInput, "read --store-ca"},
		{"store CA garbage", []string{"fleet", "--store", "etcds://192.0.2.5:2379", "--store-ca", "/etc/hostname"}, ExitBadInput, "holds no PEM certificate"},
		{"store CA with a plain URL", []string{"fleet", "--store", "etcd://192.0.2.5:2379", "--store-ca", "/etc/hostname"}, ExitBadInput, "give the store as etcds://192.0.2.5:2379"},
		{"help", []string{"claim", "--help"}, ExitOK, ""},
		{"version", []string{"--version"}, ExitOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runVip(t, tt.args...)
			if code != tt.want || !strings.Contains(errOut, tt.wantText) {
				t.Errorf("vip %v: got exit %d, stderr %q; want exit %d and %q", tt.args, code, errOut, tt.want, tt.wantText)
			}
			if tt.want != ExitOK && !strings.HasPrefix(errOut, "vip: ") {
				t.Errorf("stderr %q: want it to start with \"vip: \"", errOut)
			}
		})
	}
}

func TestPermissionErrorNamesTheFix(t *testing.T) {
	err := fmt.Errorf("claim 192.0.2.10 on eth0: open ARP socket on eth0: %w", os.NewSyscallError("socket", syscall.EPERM))
	code, shown := exitCode(err)
	if code != ExitFailure {
		t.Errorf("got exit %d, want %d", code, ExitFailure)
	}
	for _, want := range []string{"open ARP socket on eth0", "root", "CAP_NET_RAW", "setcap cap_net_raw+ep"} {
		if !strings.Contains(shown.Error(), want) {
			t.Errorf("got %q, want it to contain %q", shown, want)
		}
	}
}

// TestClaimCaptureFlagsNeedForeground: the agent's capture and metrics are
// set where the agent starts, so --filter, --watch-all and --metrics on an
// agent claim are refused before any agent is asked or started, instead of
// being ignored.
func TestClaimCaptureFlagsNeedForeground(t *testing.T) {
	for _, flag := range [][]string{{"--filter", "vlan"}, {"--watch-all"}, {"--metrics", ":9469"}, {"--metrics-max-addrs", "3"}} {
		args := append([]string{"claim", "192.0.2.10", "-i", "eth0", "--no-autostart", "--socket", t.TempDir() + "/none.sock"}, flag...)
		code, out, errOut := runVip(t, args...)
		if code != ExitBadInput || out != "" || !strings.Contains(errOut, "vip agent") {
			t.Errorf("vip %v: exit %d, stdout %q, stderr %q; want exit %d naming vip agent", args, code, out, errOut, ExitBadInput)
		}
	}
}

// TestClaimResponderNeedsForeground: the responder of claims the agent
// holds is the agent's to choose, so a claim through it refuses the flags
// (exit 2) before it reaches any agent.
func TestClaimResponderNeedsForeground(t *testing.T) {
	for _, args := range [][]string{{"--responder", "ebpf"}, {"--responder-hook", "xdp-generic"}} {
		code, _, errOut := runVip(t, append([]string{"claim", "192.0.2.10", "-i", "eth0", "--socket", filepath.Join(t.TempDir(), "none.sock")}, args...)...)
		if code != ExitBadInput || !strings.Contains(errOut, "give them to vip agent") {
			t.Errorf("claim %v without --foreground: got exit %d, %q; want exit 2 pointing at vip agent", args, code, errOut)
		}
	}
}

// TestExitCodeEBPFUnavailable: --responder ebpf refused by the machine is
// exit 1 with bpfresp's sentence, not the CAP_NET_RAW advice that other
// permission errors get.
func TestExitCodeEBPFUnavailable(t *testing.T) {
	err := fmt.Errorf("claim 192.0.2.10 on eth0: %w", &fakeUnavailable{})
	code, shown := exitCode(err)
	if code != ExitFailure || strings.Contains(shown.Error(), "CAP_NET_RAW") {
		t.Errorf("got exit %d, %q; want exit 1 with the eBPF sentence alone", code, shown)
	}
}

// fakeUnavailable is a refusal as bpfresp makes them: ErrUnavailable and
// the permission error under it.
type fakeUnavailable struct{}

func (*fakeUnavailable) Error() string {
	return "loading an eBPF program on eth0 needs CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN"
}
func (*fakeUnavailable) Unwrap() []error {
	return []error{announce.ErrKernelUnavailable, os.ErrPermission}
}

// TestPrintStandbyWithoutMAC: a standby answers nothing yet; its line
// names no MAC rather than ending with "as " (issue 24).
func TestPrintStandbyWithoutMAC(t *testing.T) {
	var out bytes.Buffer
	if err := printClaims(&deps{io: IO{Out: &out, ErrOut: io.Discard}}, false, api.ClaimResponse{Claims: []api.Claim{{Addr: "192.0.2.10", Interface: "eth0", State: api.StateStandby}}}); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); got != "standby  192.0.2.10  on eth0  until its owner's lease expires" {
		t.Errorf("got %q", got)
	}
}

// TestClaimAssignNote: vip claim --assign says an address was already on
// its interface (so vip will not remove it) only of a claim made now that
// vip did not add: not of a standby, which adds nothing until it takes the
// address (issue 31: "192.0.2.10 was already on eth0" of one that was
// not), nor of a refresh, and once per address when an address file's
// groups are claimed one request each.
func TestClaimAssignNote(t *testing.T) {
	now := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	claimed := func(state string, assigned bool) api.Claim {
		return api.Claim{Interface: "eth0", MAC: "02:00:00:00:00:02", State: state, ClaimedAt: now, RefreshedAt: now, Assigned: assigned}
	}
	refreshed := claimed(api.StateAnnouncing, false)
	refreshed.ClaimedAt = now.Add(-time.Hour)
	file := filepath.Join(t.TempDir(), "vips")
	if err := os.WriteFile(file, []byte("[web]\n192.0.2.10\n[db]\n192.0.2.20\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		// agent is the agent's claim of each address.
		agent map[string]api.Claim
		want  []string
	}{
		{"already on the interface", []string{"192.0.2.10"},
			map[string]api.Claim{"192.0.2.10": claimed(api.StateAnnouncing, false)}, []string{"192.0.2.10"}},
		{"added by vip", []string{"192.0.2.10"},
			map[string]api.Claim{"192.0.2.10": claimed(api.StateAnnouncing, true)}, nil},
		{"standby", []string{"192.0.2.10", "--standby"},
			map[string]api.Claim{"192.0.2.10": claimed(api.StateStandby, false)}, nil},
		{"refresh", []string{"192.0.2.10"},
			map[string]api.Claim{"192.0.2.10": refreshed}, nil},
		{"groups of a file", []string{"-f", file},
			map[string]api.Claim{"192.0.2.10": claimed(api.StateAnnouncing, false), "192.0.2.20": claimed(api.StateAnnouncing, true)}, []string{"192.0.2.10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := serveHandler(t, func(w http.ResponseWriter, r *http.Request) {
				var req api.ClaimRequest
				_ = json.NewDecoder(r.Body).Decode(&req)
				var resp api.ClaimResponse
				for _, a := range req.Addrs {
					c := tc.agent[a]
					c.Addr = a
					resp.Claims = append(resp.Claims, c)
				}
				_ = json.NewEncoder(w).Encode(resp)
			})
			args := append([]string{"claim", "--assign", "-i", "eth0", "--no-autostart", "--socket", sock}, tc.args...)
			code, _, errOut := runVip(t, args...)
			if code != ExitOK {
				t.Fatalf("vip %v: exit %d, stderr %q", args, code, errOut)
			}
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(errOut), "\n") {
				if a, ok := strings.CutSuffix(line, " was already on eth0, so vip did not add it and will not remove it"); ok {
					got = append(got, strings.TrimPrefix(a, "vip: "))
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("vip %v noted %v as already on eth0, want %v; stderr:\n%s", args, got, tc.want, errOut)
			}
		})
	}
}

// request builds the API request the flags describe, reading -f if given;
// a file with [NAME] sections is requests (one a group).
func (o *claimOptions) request(stdin io.Reader) (api.ClaimRequest, error) {
	reqs, err := o.requests(stdin)
	if err != nil {
		return api.ClaimRequest{}, err
	}
	if len(reqs) > 1 {
		return reqs[0], badInput("%s has [group] sections: each is claimed in a request of its own", o.File)
	}
	return reqs[0], nil
}
