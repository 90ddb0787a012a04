package hook

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/event"
)

var (
	addrA = netip.MustParseAddr("192.0.2.10")
	addrB = netip.MustParseAddr("2001:db8::10")
	t0    = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
)

// ev is an event about addrA at t0 plus ms milliseconds.
func ev(kind event.Kind, ms int, msg string) event.Event {
	return event.Event{Time: t0.Add(time.Duration(ms) * time.Millisecond), Kind: kind, Addr: addrA, Interface: "eth0", Message: msg}
}

// changeEv is ev of a change of this node's place, to to with peer: what the
// fleet's events say beside their words, which the tracker does not read.
func changeEv(kind event.Kind, ms int, to event.State, peer, msg string) event.Event {
	e := ev(kind, ms, msg)
	e.To, e.Peer = to, peer
	return e
}

// line says a change as the tests compare it.
func line(c Change) string {
	return fmt.Sprintf("%s %s %s>%s peer=%s", c.Event, c.Addr, c.Old, c.New, c.Peer)
}

func TestTracker(t *testing.T) {
	a := addrA.String()
	tests := []struct {
		name   string
		settle time.Duration
		events []event.Event
		// due, if set, is when Due is asked after the events.
		due  time.Duration
		want []string
	}{
		{
			name:   "claim, refresh and release without a store",
			events: []event.Event{ev(event.Claim, 0, "claimed"), ev(event.Refresh, 1, ""), ev(event.BurstEnd, 2, ""), ev(event.Release, 3, "answered 0 requests")},
			want:   []string{"claim " + a + " none>owner peer=", "release " + a + " owner>none peer="},
		},
		{
			name:   "a claim of an address held is no change",
			events: []event.Event{ev(event.Claim, 0, "claimed"), ev(event.Claim, 1, "claimed")},
			want:   []string{"claim " + a + " none>owner peer="},
		},
		{
			name:   "standby takes over: the claim waits for its explanation",
			settle: time.Second,
			events: []event.Event{
				changeEv(event.Standby, 0, Standby, "", "registered as a standby: takes the address if its owner's lease expires"),
				ev(event.Claim, 10, "claimed"), ev(event.BurstStart, 11, ""),
				changeEv(event.Standby, 12, Owner, "a", "took the address as a standby: the lease of its owner a expired"),
			},
			want: []string{"standby " + a + " none>standby peer=", "standby " + a + " standby>owner peer=a"},
		},
		{
			name:   "moved away: the release becomes a standby for the target",
			settle: time.Second,
			events: []event.Event{ev(event.Claim, 0, "claimed"), ev(event.Release, 2000, "answered 3 requests"), changeEv(event.Move, 2005, Standby, "b", "released for a move to b; this node stands by for it")},
			due:    time.Second,
			want:   []string{"claim " + a + " none>owner peer=", "move " + a + " owner>standby peer=b"},
		},
		{
			name:   "moved here",
			settle: time.Second,
			events: []event.Event{ev(event.Claim, 0, "claimed"), changeEv(event.Move, 30, Owner, "b", "moved here from b (its mover had given up: taken all the same, as asked)")},
			want:   []string{"move " + a + " none>owner peer=b"},
		},
		{
			name:   "a claim with no explanation runs once Settle passed",
			settle: time.Second,
			events: []event.Event{ev(event.Claim, 0, "claimed")},
			due:    time.Second,
			want:   []string{"claim " + a + " none>owner peer="},
		},
		{
			name:   "before Settle passed a claim waits",
			settle: time.Second,
			events: []event.Event{ev(event.Claim, 0, "claimed")},
			due:    999 * time.Millisecond,
		},
		{
			name:   "a late explanation changes nothing",
			settle: time.Second,
			events: []event.Event{ev(event.Claim, 0, "claimed"), ev(event.Release, 5, "released"), ev(event.Claim, 6, "claimed"), changeEv(event.Move, 2000, Owner, "b", "moved here from b")},
			due:    time.Second,
			want:   []string{"claim " + a + " none>owner peer=", "release " + a + " owner>none peer=", "claim " + a + " none>owner peer="},
		},
		{
			name:   "fenced, then resumed",
			settle: time.Second,
			events: []event.Event{ev(event.Claim, 0, "claimed"), ev(event.Suspend, 5000, "fenced: answered 1 requests"),
				{Kind: event.Fence, State: "fenced"}, ev(event.Resume, 9000, "resumed after the fence: the store answers again"), {Kind: event.Resume}},
			want: []string{"claim " + a + " none>owner peer=", "fence " + a + " owner>fenced peer=", "resume " + a + " fenced>owner peer="},
		},
		{
			// A new agent's tracker knows nothing of the earlier one:
			// a claim it takes back is this host's all along.
			name:   "the agent restarted: resumed, owner to owner",
			settle: time.Second,
			events: []event.Event{ev(event.Resume, 0, "adopted from an earlier run"), ev(event.BurstEnd, 2, "")},
			want:   []string{"resume " + a + " owner>owner peer="},
		},
		{
			name:   "fenced, then lost",
			events: []event.Event{ev(event.Claim, 0, "claimed"), ev(event.Suspend, 1, "fenced"), changeEv(event.Taken, 2, Lost, "b", "lost to b while this node was fenced: it stays silent")},
			want:   []string{"claim " + a + " none>owner peer=", "fence " + a + " owner>fenced peer=", "taken " + a + " fenced>lost peer=b"},
		},
		{
			name:   "yielded to a competing claimer",
			settle: time.Second,
			events: []event.Event{ev(event.Claim, 0, "claimed"), ev(event.Release, 2000, "answered"), changeEv(event.Conflict, 2001, None, "02:00:00:00:00:09", "yielded: released to 02:00:00:00:00:09")},
			due:    time.Second,
			want:   []string{"claim " + a + " none>owner peer=", "conflict " + a + " owner>none peer=02:00:00:00:00:09"},
		},
		{
			name: "standby set, removed, and a standby not taken",
			events: []event.Event{changeEv(event.Standby, 0, Standby, "", "made a standby in the store (vip standby): takes the address"),
				ev(event.Standby, 1, "not taken: the lease of its owner a expired, but cordoned"),
				changeEv(event.Standby, 2, None, "", "removed from the address's standbys in the store (vip standby --remove)")},
			want: []string{"standby " + a + " none>standby peer=", "standby " + a + " standby>none peer="},
		},
		{
			// Each address owned runs the hook as it comes to rest on
			// the other nodes' promises, and as the store is back; a
			// standby's address, and one released, do not.
			name: "answering on failsafe, and the store back",
			events: []event.Event{ev(event.Claim, 0, "claimed"), {Time: t0, Kind: event.Claim, Addr: addrB, Interface: "eth1", Message: "claimed"},
				{Time: t0, Kind: event.Claim, Addr: netip.MustParseAddr("192.0.2.11"), Interface: "eth0", Message: "claimed"},
				{Time: t0, Kind: event.Release, Addr: netip.MustParseAddr("192.0.2.11"), Interface: "eth0", Message: "released"},
				{Time: t0, Kind: event.Standby, Addr: netip.MustParseAddr("192.0.2.12"), To: Standby, Message: "made a standby"},
				{Time: t0.Add(5 * time.Second), Kind: event.Failsafe, State: "failsafe", Message: "the store is unreachable: answering on failsafe, acknowledged by b"},
				{Time: t0.Add(9 * time.Second), Kind: event.Failsafe, State: "store", Message: "the store is back: answered on failsafe for 4s"}},
			want: []string{"claim " + a + " none>owner peer=", "claim " + addrB.String() + " none>owner peer=",
				"claim 192.0.2.11 none>owner peer=", "release 192.0.2.11 owner>none peer=", "standby 192.0.2.12 none>standby peer=",
				"failsafe " + a + " owner>owner peer=", "failsafe " + addrB.String() + " owner>owner peer=",
				"failsafe-end " + a + " owner>owner peer=", "failsafe-end " + addrB.String() + " owner>owner peer="},
		},
		{
			name:   "events without an address are none",
			events: []event.Event{{Kind: event.Fence}, {Kind: event.Stall, Count: 2}, {Kind: event.Interface, Interface: "eth0"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker("here", tt.settle)
			var got []string
			for i, e := range tt.events {
				if tt.due > 0 && i > 0 && e.Time.Sub(tt.events[i-1].Time) >= tt.due {
					// Time passed between the two: what was due ran.
					for _, c := range tr.Due(tt.events[i-1].Time.Add(tt.due)) {
						got = append(got, line(c))
					}
				}
				for _, c := range tr.Event(e) {
					got = append(got, line(c))
				}
			}
			if tt.due > 0 {
				for _, c := range tr.Due(tt.events[len(tt.events)-1].Time.Add(tt.due)) {
					got = append(got, line(c))
				}
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestTrackerFillsChange checks the fields a hook reads besides the states.
func TestTrackerFillsChange(t *testing.T) {
	tr := NewTracker("node-1", 0)
	got := tr.Event(event.Event{Time: t0, Kind: event.Claim, Addr: addrB, Interface: "eth1", Message: "claimed"})
	want := Change{Event: "claim", Addr: addrB, Interface: "eth1", Old: None, New: Owner, Node: "node-1", Reason: "claimed", Time: t0}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("got %+v, want [%+v]", got, want)
	}
	if at, ok := tr.Next(); ok {
		t.Errorf("Next with nothing held: got %v, want none", at)
	}
	// A failsafe's change says the interface the address was claimed on.
	got = tr.Event(event.Event{Time: t0.Add(time.Second), Kind: event.Failsafe, State: "failsafe", Message: "the store is unreachable"})
	want = Change{Event: "failsafe", Addr: addrB, Interface: "eth1", Old: Owner, New: Owner, Node: "node-1", Reason: "the store is unreachable", Time: t0.Add(time.Second)}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("failsafe: got %+v, want [%+v]", got, want)
	}
}

// TestTrackerCarriesReasonCode: a change gets its event's reason code,
// from the explanation when one explains a held claim (a standby's take),
// and a hook tells a standby removed from one added by it alone
// (VIP_REASON_CODE), with no word of the message read.
func TestTrackerCarriesReasonCode(t *testing.T) {
	tr := NewTracker("here", time.Second)
	withReason := func(e event.Event, r event.Reason) event.Event { e.Reason = r; return e }
	var got []Change
	for _, e := range []event.Event{
		withReason(changeEv(event.Standby, 0, event.StateStandby, "", "x"), event.ReasonStandbyAdded),
		withReason(changeEv(event.Standby, 10, event.StateNone, "", "x"), event.ReasonStandbyRemoved),
		ev(event.Claim, 20, "x"),
		withReason(changeEv(event.Standby, 30, event.StateOwner, "a", "x"), event.ReasonOwnerExpired),
	} {
		got = append(got, tr.Event(e)...)
	}
	var codes []string
	for _, c := range got {
		codes = append(codes, c.Code)
	}
	want := []string{"standby-added", "standby-removed", "owner-expired"}
	if !slices.Equal(codes, want) {
		t.Fatalf("codes %q, want %q (changes %v)", codes, want, got)
	}
	if env := got[2].Env(); !slices.Contains(env, "VIP_REASON_CODE=owner-expired") {
		t.Fatalf("the hook's environment has no VIP_REASON_CODE: %q", env)
	}
}
