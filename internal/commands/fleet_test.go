package commands

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/store"
)

func TestMoveFleetFlags(t *testing.T) {
	t.Setenv(storeEnv, "etcd://192.0.2.5:2379")
	def := storeOptions{URL: "etcd://192.0.2.5:2379", Prefix: store.DefaultPrefix}
	for _, tt := range []struct {
		name string
		got  any
		want any
	}{
		{"move", parse(t, newMoveCmd, "192.0.2.10", "2001:db8::10", "--to", "b"), moveOptions{Addrs: []string{"192.0.2.10", "2001:db8::10"}, To: "b", Traffic: time.Second, Store: def}},
		{"move every flag", parse(t, newMoveCmd, "--all", "--from", "a", "--to", "b", "-i", "eth1", "--timeout", "30s", "--traffic-window", "0", "--json",
			"--store", "etcd://198.51.100.5:2379", "--store-prefix", "/lab/"), moveOptions{All: true, From: "a", To: "b", Interface: "eth1",
			Timeout: 30 * time.Second, JSON: true, Store: storeOptions{URL: "etcd://198.51.100.5:2379", Prefix: "/lab/", given: []string{"store-prefix"}}}},
		{"fleet", parse(t, newFleetCmd), fleetOptions{Store: def}},
		{"fleet --json", parse(t, newFleetCmd, "--json", "--store-ca", "ca.pem"), fleetOptions{JSON: true, Store: storeOptions{URL: def.URL, Prefix: def.Prefix, CA: "ca.pem", given: []string{"store-ca"}}}},
		{"claim --take-over", parse(t, newClaimCmd, "192.0.2.10", "--take-over").TakeOver, true},
		{"standby", parse(t, newStandbyCmd, "192.0.2.10", "2001:db8::10", "--on", "b"), standbyOptions{Addrs: []string{"192.0.2.10", "2001:db8::10"}, On: "b", Store: def}},
		{"standby every flag", parse(t, newStandbyCmd, "192.0.2.10", "--on", "b", "-i", "eth1", "--force", "--json"),
			standbyOptions{Addrs: []string{"192.0.2.10"}, On: "b", Interface: "eth1", Force: true, JSON: true, Store: def}},
		{"standby --remove", parse(t, newStandbyCmd, "192.0.2.10", "--on", "b", "--remove").Remove, true},
		{"drain", parse(t, newDrainCmd, "a"), drainOptions{Node: "a", Quiet: DefaultQuiet, Timeout: DefaultDrainTimeout, Store: def}},
		{"drain every flag", parse(t, newDrainCmd, "a", "--to", "b", "--quiet", "3s", "--timeout", "1m", "--reason", "kernel", "--force", "--json"),
			drainOptions{Node: "a", To: "b", Quiet: 3 * time.Second, Timeout: time.Minute, Reason: "kernel", Force: true, JSON: true, Store: def}},
	} {
		if fmt.Sprint(tt.got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: got %+v, want %+v", tt.name, tt.got, tt.want)
		}
	}
}

// TestStoreEnvNotInHelp: $VIP_STORE is --store's default when the command
// runs, but help (and so the man pages and completions made from it) does
// not print whatever value the environment of the one generating them had.
func TestStoreEnvNotInHelp(t *testing.T) {
	t.Setenv(storeEnv, "etcd://203.0.113.77:2379")
	for _, args := range [][]string{{"agent", "--help"}, {"move", "--help"}, {"fleet", "--help"}} {
		var out bytes.Buffer
		if code := Main(args, IO{In: strings.NewReader(""), Out: &out, ErrOut: &out}); code != 0 {
			t.Fatalf("vip %v: exit %d: %s", args, code, out.String())
		}
		if h := out.String(); strings.Contains(h, "203.0.113.77") || !strings.Contains(h, "(default $VIP_STORE)") {
			t.Errorf("vip %v: the help says\n%s\nwant --store's default as $VIP_STORE, not its value", args, h)
		}
	}
}

func TestMoveRequest(t *testing.T) {
	a10, a6 := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")
	tests := []struct {
		name    string
		opts    moveOptions
		want    store.MoveRequest
		wantErr string
	}{
		{"addresses", moveOptions{Addrs: []string{"192.0.2.10", "2001:db8::10"}, To: "b", Interface: "eth1"},
			store.MoveRequest{Addrs: []netip.Addr{a10, a6}, To: "b", Interface: "eth1"}, ""},
		{"a drain", moveOptions{All: true, From: "a", To: "b", Timeout: time.Minute}, store.MoveRequest{All: true, From: "a", To: "b", Timeout: time.Minute}, ""},
		{"mapped IPv4", moveOptions{Addrs: []string{"::ffff:192.0.2.10"}, To: "b"}, store.MoveRequest{Addrs: []netip.Addr{a10}, To: "b"}, ""},
		{"no --to", moveOptions{Addrs: []string{"192.0.2.10"}}, store.MoveRequest{}, "--to NODE"},
		{"nothing to move", moveOptions{To: "b"}, store.MoveRequest{}, "at least one address"},
		{"--all and addresses", moveOptions{Addrs: []string{"192.0.2.10"}, All: true, From: "a", To: "b"}, store.MoveRequest{}, "not both"},
		{"--all without --from", moveOptions{All: true, To: "b"}, store.MoveRequest{}, "--from NODE"},
		{"bad address", moveOptions{Addrs: []string{"192.0.2"}, To: "b"}, store.MoveRequest{}, `"192.0.2" is not an IP address`},
		{"zoned address", moveOptions{Addrs: []string{"fe80::1%eth0"}, To: "b"}, store.MoveRequest{}, "is not an IP address"},
		{"bad node", moveOptions{Addrs: []string{"192.0.2.10"}, To: "b/c"}, store.MoveRequest{}, "may hold only letters"},
		{"negative timeout", moveOptions{Addrs: []string{"192.0.2.10"}, To: "b", Timeout: -time.Second}, store.MoveRequest{}, "--timeout -1s is negative"},
		{"traffic window", moveOptions{Addrs: []string{"192.0.2.10"}, To: "b", Traffic: 2 * time.Second},
			store.MoveRequest{Addrs: []netip.Addr{a10}, To: "b", TrafficWindow: 2 * time.Second}, ""},
		{"negative traffic window", moveOptions{Addrs: []string{"192.0.2.10"}, To: "b", Traffic: -time.Second}, store.MoveRequest{}, "--traffic-window -1s"},
		{"traffic window too long", moveOptions{Addrs: []string{"192.0.2.10"}, To: "b", Traffic: time.Hour}, store.MoveRequest{}, "to 1m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.opts.request()
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
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestStoreFlagsRefused: bad store flags are one sentence and exit 2,
// before anything connects or is claimed.
func TestStoreFlagsRefused(t *testing.T) {
	const st = "etcd://192.0.2.5:2379"
	tests := []struct {
		name     string
		env      string
		args     []string
		wantText string
	}{
		{"not etcd://", "", []string{"agent", "--store", "http://192.0.2.5:2379"}, "is not etcd://HOST:PORT"},
		{"no port", "", []string{"agent", "--store", "etcd://192.0.2.5"}, "is not HOST:PORT"},
		{"bad prefix", "", []string{"agent", "--store", st, "--store-prefix", "vip"}, "must start and end with a slash"},
		{"bad node", "", []string{"agent", "--store", st, "--node", "a b"}, "--node: node name"},
		{"TTL too short", "", []string{"agent", "--store", st, "--lease-ttl", "1s"}, "--lease-ttl 1s must be whole seconds"},
		{"TTL not whole seconds", "", []string{"agent", "--store", st, "--lease-ttl", "2500ms"}, "must be whole seconds"},
		{"cert without key", "", []string{"agent", "--store", st, "--store-cert", "a.pem"}, "go together"},
		{"node without a store", "", []string{"agent", "--node", "a"}, "--node shapes how vip reaches the store"},
		{"TTL without a store", "", []string{"agent", "--lease-ttl", "10s"}, "give --store"},
		{"bad store from the environment", "etcd:/nope", []string{"agent"}, "is not etcd://HOST:PORT"},
		{"standby and take-over", "", []string{"claim", "192.0.2.10", "--standby", "--take-over"}, "give one of them"},
		{"standby in the foreground", "", []string{"claim", "192.0.2.10", "-i", "eth0", "--foreground", "--standby"}, "drop --foreground"},
		{"foreground under a store", st, []string{"claim", "192.0.2.10", "-i", "eth0", "--foreground"}, "unset VIP_STORE"},
		{"move without a store", "", []string{"move", "192.0.2.10", "--to", "b"}, "give --store"},
		{"fleet without a store", "", []string{"fleet"}, "give --store"},
		{"fleet, bad store", "", []string{"fleet", "--store", "etcd://"}, "is not etcd://HOST:PORT"},
		{"move without --to", st, []string{"move", "192.0.2.10"}, "--to NODE"},
		{"fleet with an argument", st, []string{"fleet", "a"}, "unknown command"},
		{"claim --force without --take-over", st, []string{"claim", "192.0.2.10", "--force"}, "--force goes with --take-over"},
		{"agent, a stop that is neither", st, []string{"agent", "--on-stop", "release"}, "--on-stop \"release\": give keep"},
		{"probe expecting a node without a store", "", []string{"probe", "192.0.2.10", "-i", "eth0", "--expect", "b"}, "names a node, which vip looks up in the store"},
		{"probe expecting a long MAC", "", []string{"probe", "192.0.2.10", "-i", "eth0", "--expect", "02:00:5e:10:00:00:00:01"}, "not an Ethernet MAC"},
		{"probe expecting nonsense", "", []string{"probe", "192.0.2.10", "-i", "eth0", "--expect", "a b"}, "neither a MAC nor a node name"},
		{"probe, store flag without a store", "", []string{"probe", "192.0.2.10", "-i", "eth0", "--store-ca", "ca.pem"}, "--store-ca shapes how vip reaches the store"},
		{"probe expecting, bad store", "", []string{"probe", "192.0.2.10", "-i", "eth0", "--expect", "b", "--store", "etcd://"}, "is not etcd://HOST:PORT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(storeEnv, tt.env)
			code, out, errOut := runVip(t, tt.args...)
			if code != ExitBadInput || out != "" || !strings.Contains(errOut, tt.wantText) || strings.Count(strings.TrimSpace(errOut), "\n") > 1 {
				t.Errorf("vip %v: got exit %d, stdout %q, stderr %q; want exit %d and one sentence with %q", tt.args, code, out, errOut, ExitBadInput, tt.wantText)
			}
		})
	}
}

func TestStoreExitCodes(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want ExitCode
	}{
		{"store unreachable", fmt.Errorf("%w at http://192.0.2.5:2379 (context deadline exceeded): check --store and the network to it", store.ErrUnreachable), ExitUnreachable},
		{"move refused", fmt.Errorf("%w: node c is not alive in the store (live nodes: a, b)", store.ErrRefused), ExitFailure},
		{"some moves failed", movesError([]api.MoveResult{{OK: true}, {Error: "late"}}), ExitFailure},
		{"held, from the agent", &api.RemoteError{Status: 409, Code: api.CodeHeld, Message: "192.0.2.10 is held by node b"}, ExitHeld},
		{"no store, from the agent", &api.RemoteError{Status: 409, Code: api.CodeNoStore, Message: "this agent has no store"}, ExitBadInput},
		{"fenced, from the agent", &api.RemoteError{Status: 503, Code: api.CodeFenced, Message: "this agent is fenced"}, ExitFailure},
		{"every refusal held", refusedError(3, []api.Refused{{Code: api.CodeHeld}, {Code: api.CodeHeld}}), ExitHeld},
		{"refusals of both kinds", refusedError(3, []api.Refused{{Code: api.CodeHeld}, {Code: api.CodeOtherInterface}}), ExitFailure},
		{"fenced claim under --check", checkStatus(api.StatusResponse{Claims: []api.Claim{{Addr: "192.0.2.10", State: api.StateFenced}}}), ExitConflict},
		{"lost claim and a rival under --check", checkStatus(api.StatusResponse{Claims: []api.Claim{
			{Addr: "192.0.2.10", State: api.StateLost}, {Addr: "192.0.2.11", State: "conflict"}}}), ExitConflict},
		{"standby under --check", checkStatus(api.StatusResponse{Claims: []api.Claim{{Addr: "192.0.2.10", State: api.StateStandby}}}), ExitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := exitCode(tt.err); got != tt.want {
				t.Errorf("%v: got exit %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

// TestClaimHeld runs vip claim against an agent guarded by a store that
// holds one of two addresses for another node: the request carries
// --standby, each address is reported, and the claim exits 5.
func TestClaimHeld(t *testing.T) {
	since := time.Date(2026, 11, 30, 1, 0, 0, 0, time.Local)
	var got api.ClaimRequest
	sock := serveHandler(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &got)
		json.NewEncoder(w).Encode(api.ClaimResponse{
			Claims: []api.Claim{{Addr: "192.0.2.10", Interface: "eth0", MAC: "02:00:00:00:00:02", State: "standby", Note: "standby for a"}},
			Refused: []api.Refused{{Addr: "192.0.2.11", Code: api.CodeHeld, HeldBy: "b", ClaimedAt: since,
				Error: `192.0.2.11 is held by node b: move it here with "vip move 192.0.2.11 --to a", or take it with "vip claim 192.0.2.11 --take-over"`}},
		})
	})
	for _, asJSON := range []bool{false, true} {
		args := []string{"claim", "192.0.2.10", "192.0.2.11", "--standby", "--no-autostart", "--socket", sock}
		if asJSON {
			args = append(args, "--json")
		}
		code, out, errOut := runVip(t, args...)
		if !got.Standby || got.TakeOver {
			t.Errorf("the agent got %+v, want standby alone", got)
		}
		// --json carries the agent's sentence in the object instead.
		if code != ExitHeld || (!asJSON && !strings.Contains(errOut, "vip move 192.0.2.11 --to a")) || !strings.Contains(errOut, "1 of 2 addresses are held by another node") {
			t.Errorf("%v: got exit %d, stderr %q; want exit %d with the agent's sentence", args, code, errOut, ExitHeld)
		}
		want := []string{"standby  192.0.2.10  on eth0  as 02:00:00:00:00:02  (standby for a)", "held     192.0.2.11  by b", "since " + since.Format(time.DateTime)}
		if asJSON {
			want = []string{`"held_by": "b"`, `"code": "held"`, `"state": "standby"`, "vip move 192.0.2.11 --to a"}
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: stdout %q, want it to hold %q", args, out, w)
			}
		}
	}
}

var (
	fleetNow     = time.Date(2026, 11, 30, 1, 2, 0, 0, time.UTC)
	fleetFixture = api.FleetResponse{
		Revision: 42,
		Nodes: []api.FleetNode{
			{Node: "a", Version: "v1.4.0", Host: "a.example", PID: 101, Started: fleetNow.Add(-time.Hour), LeaseTTL: api.Duration(6 * time.Second),
				Interfaces: []api.FleetInterface{{Name: "eth0", MAC: "02:00:00:00:0a:01", Up: true, Prefixes: []string{"192.0.2.1/24"}}},
				RenewedAgo: ptr(api.Duration(time.Second)), LeaseLeft: ptr(api.Duration(5 * time.Second)), Health: api.HealthLive},
			{Node: "b", Version: "v1.4.0", Host: "b.example", PID: 202, Started: fleetNow.Add(-time.Hour), LeaseTTL: api.Duration(6 * time.Second),
				Interfaces: []api.FleetInterface{{Name: "eth0", MAC: "02:00:00:00:0b:01", Up: true}, {Name: "eth1", MAC: "02:00:00:00:0b:02"}},
				RenewedAgo: ptr(api.Duration(5 * time.Second)), LeaseLeft: ptr(api.Duration(time.Second)), Health: api.HealthFenced},
		},
		Claims: []api.FleetClaim{
			{Addr: "192.0.2.10", Node: "a", Interface: "eth0", MAC: "02:00:00:00:0a:01", ClaimedAt: fleetNow.Add(-90 * time.Second), Since: fleetNow.Add(-90 * time.Second), State: api.FleetHolding, Standbys: []string{"b"}},
			{Addr: "192.0.2.11", Node: "a", Interface: "eth0", MAC: "02:00:00:00:0a:01", ClaimedAt: fleetNow.Add(-time.Second), Since: fleetNow.Add(-time.Second), State: api.FleetMoving, MovingTo: "b", Home: "c"},
			{Addr: "2001:db8::10", State: api.FleetFree, Standbys: []string{"a", "b"}},
		},
		Cordons: []api.Cordon{
			{Node: "b", Reason: "kernel upgrade", By: "ops@c.example", Since: fleetNow.Add(-4 * time.Minute), Until: fleetNow.Add(41 * time.Minute), Left: ptr(api.Duration(41 * time.Minute))},
			{Node: "c", Since: fleetNow.Add(-time.Hour)},
		},
		Skipped: []api.FleetSkipped{{Key: "/vip/claims/nope", Error: `key "/vip/claims/nope" does not end in an IP address`}},
	}
	movesFixture = []api.MoveResult{
		{Addr: "192.0.2.10", From: "a", To: "b", Interface: "eth0", Asked: fleetNow, ReleasedMS: ms(11.6), LiveMS: ms(38.2), OK: true,
			Traffic: &api.MoveTraffic{Counted: true, Packets: 10, Bytes: 980, Window: api.Duration(time.Second)}},
		{Addr: "192.0.2.11", From: "a", To: "b", Interface: "eth0", Asked: fleetNow, ReleasedMS: ms(5912), LiveMS: ms(5950.4), Waited: true, OK: true},
		{Addr: "192.0.2.12", To: "b", Interface: "eth0", Asked: fleetNow, LiveMS: ms(20), Unheld: true, OK: true,
			Traffic: &api.MoveTraffic{Window: api.Duration(time.Second)}},
		{Addr: "192.0.2.13", From: "b", To: "b", Interface: "eth0", Asked: fleetNow, Already: true, OK: true},
		{Addr: "192.0.2.14", From: "c", To: "b", Interface: "eth0", Asked: fleetNow,
			Error: "192.0.2.14 was not live on b in time"},
	}
)

func TestFleetGolden(t *testing.T) {
	var out bytes.Buffer
	if err := printFleet(&out, fleetFixture, fleetNow); err != nil {
		t.Fatal(err)
	}
	golden(t, "fleet.golden", out.Bytes())
	out.Reset()
	if err := printFleet(&out, api.FleetResponse{Nodes: []api.FleetNode{}, Claims: []api.FleetClaim{}}, fleetNow); err != nil {
		t.Fatal(err)
	}
	golden(t, "fleet-empty.golden", out.Bytes())
	out.Reset()
	// Every lease expired while the agents could not reach the store:
	// their standby records name them, and the view says no more than
	// the store knows (issue 31: "no live node", every address free).
	if err := printFleet(&out, api.FleetResponse{Nodes: []api.FleetNode{}, Unregistered: []string{"a", "b"}, Claims: []api.FleetClaim{
		{Addr: "192.0.2.10", State: api.FleetUnknown, Standbys: []string{"b"}},
		{Addr: "192.0.2.20", State: api.FleetUnknown, Standbys: []string{"a"}},
	}}, fleetNow); err != nil {
		t.Fatal(err)
	}
	golden(t, "fleet-unregistered.golden", out.Bytes())
	out.Reset()
	if err := writeJSON(&deps{io: IO{Out: &out}}, fleetFixture); err != nil {
		t.Fatal(err)
	}
	golden(t, "fleet.json.golden", out.Bytes())
}

func TestMovesGolden(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := printMoves(&out, &errOut, movesFixture); err != nil {
		t.Fatal(err)
	}
	golden(t, "move.golden", out.Bytes())
	golden(t, "move.stderr.golden", errOut.Bytes())
	out.Reset()
	if err := writeJSON(&deps{io: IO{Out: &out}}, api.MoveResponse{Moves: movesFixture}); err != nil {
		t.Fatal(err)
	}
	golden(t, "move.json.golden", out.Bytes())
}

func TestStatusStoreGolden(t *testing.T) {
	st := statusFixture
	st.Agent.Store = &api.Store{Endpoints: []string{"http://192.0.2.5:2379"}, Prefix: "/vip/", Node: "a", Lease: "694d7a1c",
		LeaseTTL: api.Duration(6 * time.Second), FenceAfter: api.Duration(4500 * time.Millisecond),
		Renewed: time.Date(2026, 11, 30, 1, 2, 0, 700e6, time.UTC)}
	st.Claims = append([]api.Claim(nil), st.Claims...)
	st.Claims[2].State, st.Claims[2].Note = api.StateLost, "lost to b"
	// A standby: never refreshed, no MAC (issue 24: its age was a zero
	// time's, 2562047h47m16.854775807s ago).
	st.Claims = append(st.Claims, api.Claim{Addr: "192.0.2.40", Interface: "eth0", State: api.StateStandby, Group: "web"})
	var out bytes.Buffer
	if err := printStatus(&deps{io: IO{Out: &out}}, st, time.Date(2026, 11, 30, 1, 2, 2, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	golden(t, "status-store.golden", out.Bytes())
	if strings.Contains(out.String(), "2562047h") {
		t.Errorf("a standby's age is a zero time's:\n%s", out.String())
	}

	// Fenced: the line says so, whatever the zone.
	st.Agent.Store.Fenced = time.Date(2026, 11, 30, 1, 2, 1, 0, time.UTC)
	want := "FENCED since " + st.Agent.Store.Fenced.Local().Format(time.TimeOnly)
	if got := storeLine(*st.Agent.Store, time.Date(2026, 11, 30, 1, 2, 2, 0, time.UTC)); !strings.Contains(got, want) {
		t.Errorf("got %q, want it to say %q", got, want)
	}

	// Cordoned: the reason and the time left.
	cordoned := *st.Agent.Store
	left := api.Duration(41 * time.Minute)
	cordoned.Cordon = &api.Cordon{Node: "a", Reason: "kernel upgrade", By: "ops@c", Since: time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC),
		Until: time.Date(2026, 11, 30, 1, 43, 2, 0, time.UTC), Left: &left}
	want = `CORDONED ("kernel upgrade", 41m0s left, cordoned 2m2s ago by ops@c): it takes no address by move, take-over or standby`
	if got := storeLine(cordoned, time.Date(2026, 11, 30, 1, 2, 2, 0, time.UTC)); !strings.Contains(got, want) {
		t.Errorf("got %q, want it to say %q", got, want)
	}

	// The answer deadline: ahead, then passed with frames withheld.
	for _, tc := range []struct {
		left     time.Duration
		withheld uint64
		want     string
	}{
		{2300 * time.Millisecond, 0, ", answers for 2.3s more without a renewal,"},
		{-1200 * time.Millisecond, 7, ", answer deadline passed 1.2s ago (7 frames withheld),"},
	} {
		s := *st.Agent.Store
		s.Deadline, s.DeadlineLeft, s.Withheld = time.Date(2026, 11, 30, 1, 2, 2, 0, time.UTC).Add(tc.left), api.Duration(tc.left), tc.withheld
		if got := storeLine(s, time.Date(2026, 11, 30, 1, 2, 2, 0, time.UTC)); !strings.Contains(got, tc.want) {
			t.Errorf("got %q, want it to say %q", got, tc.want)
		}
	}
	// Closed by the fence: no time since boot, no "passed ... ago".
	s := *st.Agent.Store
	s.DeadlineClosed, s.Withheld = true, 3
	if got, want := storeLine(s, time.Date(2026, 11, 30, 1, 2, 2, 0, time.UTC)), ", answers nothing until the store acknowledges a renewal (3 frames withheld),"; !strings.Contains(got, want) || strings.Contains(got, "passed") {
		t.Errorf("got %q, want it to say %q and nothing passed", got, want)
	}
	// On failsafe: since when the store is unreachable, who acknowledged.
	s = *st.Agent.Store
	now := time.Date(2026, 11, 30, 1, 2, 2, 0, time.UTC)
	s.Renewed = now.Add(-20 * time.Second)
	s.Failsafe = &api.Failsafe{Since: now.Add(-19 * time.Second), AckedBy: []string{"b", "c"}, AckedAt: now.Add(-400 * time.Millisecond)}
	want = fmt.Sprintf("; store unreachable since %s: ANSWERING ON FAILSAFE since %s, acknowledged by b, c 400ms ago",
		s.Renewed.Local().Format(time.TimeOnly), s.Failsafe.Since.Local().Format(time.TimeOnly))
	if got := storeLine(s, now); !strings.Contains(got, want) {
		t.Errorf("got %q, want it to say %q", got, want)
	}
	// The store unreachable, before the failsafe or the fence: since when.
	s = *st.Agent.Store
	s.Renewed, s.Unreachable, s.Fenced = now.Add(-2100*time.Millisecond), true, time.Time{}
	want = fmt.Sprintf("; STORE UNREACHABLE since %s: no renewal acknowledged for 2.1s", s.Renewed.Local().Format(time.TimeOnly))
	if got := storeLine(s, now); !strings.Contains(got, want) {
		t.Errorf("got %q, want it to say %q", got, want)
	}
	s.Failsafe = &api.Failsafe{Since: now.Add(-time.Second), AckedBy: []string{"b"}, AckedAt: now}
	if got := storeLine(s, now); strings.Contains(got, "STORE UNREACHABLE") {
		t.Errorf("got %q, want the failsafe to say it once", got)
	}
	// The failsafe on but not ready: a store outage now would find none.
	s = *st.Agent.Store
	s.Fenced, s.Failsafe, s.FailsafeEnabled, s.FailsafeUnready = time.Time{}, nil, true, "its failsafe set is not in the store yet"
	if got, want := storeLine(s, now), "; no failsafe through a store outage now: its failsafe set is not in the store yet"; !strings.Contains(got, want) {
		t.Errorf("got %q, want it to say %q", got, want)
	}
	s.FailsafeUnready = ""
	if got := storeLine(s, now); strings.Contains(got, "no failsafe") {
		t.Errorf("got %q, want nothing said of a failsafe that is ready", got)
	}
	// A node that promised an owner on failsafe says to whom, until when.
	s = *st.Agent.Store
	s.Promised = &api.Promise{Owner: "a", Until: now.Add(2500 * time.Millisecond)}
	want = fmt.Sprintf("; PROMISED a to take none of its addresses until %s (2.5s more): takes nothing through the store until then",
		s.Promised.Until.Local().Format(time.TimeOnly))
	if got := storeLine(s, now); !strings.Contains(got, want) {
		t.Errorf("got %q, want it to say %q", got, want)
	}
	// One that ended says nothing of it.
	if got := storeLine(s, now.Add(3*time.Second)); strings.Contains(got, "PROMISED") {
		t.Errorf("got %q, want nothing of a promise that ended", got)
	}
}

// ms is a step of a move's timeline in a fixture.
func ms(v float64) *float64 { return &v }

func ptr[T any](v T) *T { return &v }

// TestDrainCheck refuses bad drain flags with a sentence naming the fix.
func TestDrainCheck(t *testing.T) {
	for _, tt := range []struct {
		o    drainOptions
		want string
	}{
		{drainOptions{Quiet: -time.Second, Timeout: time.Minute}, "--quiet -1s"},
		{drainOptions{Quiet: 2 * time.Hour, Timeout: 3 * time.Hour}, "to 1h"},
		{drainOptions{Quiet: time.Minute, Timeout: time.Second}, "--timeout 1s is shorter than --quiet 1m0s"},
		{drainOptions{To: "b/c", Quiet: time.Second, Timeout: time.Minute}, "--to: node name"},
		{drainOptions{Quiet: time.Second, Timeout: time.Minute, Reason: "a\nb"}, "control character"},
	} {
		err := tt.o.check()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: got %v, want %q", tt.o, err, tt.want)
		}
		if code, _ := exitCode(err); code != ExitBadInput {
			t.Errorf("%+v: exit %d, want 2", tt.o, code)
		}
	}
	if err := (&drainOptions{Timeout: 0}).check(); err != nil {
		t.Errorf("--quiet 0 with no timeout: %v", err)
	}
}

// TestStandbyCheck refuses bad standby requests before anything connects.
func TestStandbyCheck(t *testing.T) {
	for _, tt := range []struct {
		o    standbyOptions
		want string
	}{
		{standbyOptions{Addrs: []string{"192.0.2.10"}}, "--on NODE"},
		{standbyOptions{Addrs: []string{"192.0.2.10"}, On: "b c"}, "--on: node name"},
		{standbyOptions{Addrs: []string{"192.0.2.10"}, On: "b", Interface: "eth0", Remove: true}, "drop one of them"},
		{standbyOptions{Addrs: []string{"192.0.2"}, On: "b"}, "192.0.2"},
	} {
		_, err := tt.o.check()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: got %v, want %q", tt.o, err, tt.want)
		}
		if code, _ := exitCode(err); code != ExitBadInput {
			t.Errorf("%+v: exit %d, want 2", tt.o, code)
		}
	}
}

// TestDrainedSendersAddUp: the line of a drained address lists its senders
// so that they add up to its count: what the senders left out sent, and
// what came from senders the node no longer remembers (it keeps a bounded
// number; the count is exact), are said (issue 31: "3 packets ... from
// 02:00:00:00:00:09 (2001:db8::9, 2)").
func TestDrainedSendersAddUp(t *testing.T) {
	last := time.Date(2026, 11, 30, 1, 2, 0, 0, time.UTC)
	s9 := api.DrainSender{MAC: "02:00:00:00:00:09", From: "2001:db8::9", Packets: 2, Last: last}
	s8 := api.DrainSender{MAC: "02:00:00:00:00:08", From: "2001:db8::8", Packets: 1, Last: last}
	for _, tc := range []struct {
		name string
		a    api.DrainAddr
		want string
	}{
		{"a sender forgotten", api.DrainAddr{Packets: 3, Senders: []api.DrainSender{s9}},
			", from 02:00:00:00:00:09 (2001:db8::9, 2), 1 from senders not remembered"},
		{"every sender remembered", api.DrainAddr{Packets: 3, Senders: []api.DrainSender{s9, s8}},
			", from 02:00:00:00:00:09 (2001:db8::9, 2), 02:00:00:00:00:08 (2001:db8::8, 1)"},
		{"senders left out, and one forgotten", api.DrainAddr{Packets: 10, Senders: []api.DrainSender{s9}, MoreSenders: 2, MorePackets: 7},
			", from 02:00:00:00:00:09 (2001:db8::9, 2), 2 more senders (7), 1 from senders not remembered"},
		{"no sender remembered", api.DrainAddr{Packets: 4},
			", from senders not remembered"},
		// An agent that did not count what the senders it left out
		// sent: nothing is said of the rest.
		{"an older agent's count", api.DrainAddr{Packets: 10, Senders: []api.DrainSender{s9}, MoreSenders: 2},
			", from 02:00:00:00:00:09 (2001:db8::9, 2), 2 more"},
		// A packet counted between the read of the senders and the
		// address's count.
		{"senders read before the count", api.DrainAddr{Packets: 2, Senders: []api.DrainSender{s9, s8}},
			", from 02:00:00:00:00:09 (2001:db8::9, 2), 02:00:00:00:00:08 (2001:db8::8, 1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.a
			a.Addr, a.To, a.Counted, a.Last = "2001:db8::10", "b", true, last
			got := describeDrained(a, "a", time.Second)
			if _, from, _ := strings.Cut(got, " (a's clock)"); from != tc.want {
				t.Errorf("got %q, want it to end %q", got, tc.want)
			}
		})
	}
}
