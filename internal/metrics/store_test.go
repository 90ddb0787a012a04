package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vipctl/vip/internal/api"
)

type fakeStore struct {
	info api.Store
	kept map[string]int
}

func (f fakeStore) Info() api.Store      { return f.info }
func (f fakeStore) Kept() map[string]int { return f.kept }

func TestStoreCollector(t *testing.T) {
	left := api.Duration(90 * time.Second)
	s := fakeStore{
		info: api.Store{Node: "a", LeaseTTL: api.Duration(6 * time.Second), FenceAfter: api.Duration(4500 * time.Millisecond),
			Renewed: now.Add(-5 * time.Second), Fenced: now.Add(-500 * time.Millisecond),
			Cordon: &api.Cordon{Node: "a", Reason: "kernel upgrade", Since: now.Add(-time.Minute), Until: now.Add(90 * time.Second), Left: &left}},
		kept: map[string]int{"fenced": 2, "lost": 1},
	}
	c := NewStoreCollector(s, func() time.Time { return now })
	want := `
# HELP vip_store_claims Claims the store keeps out of the engine, by state: fenced (waiting for the store), lost (another node took it while this one was fenced), standby.
# TYPE vip_store_claims gauge
vip_store_claims{node="a",state="fenced"} 2
vip_store_claims{node="a",state="lost"} 1
vip_store_claims{node="a",state="standby"} 0
# HELP vip_store_cordon_remaining_seconds Seconds until the node's cordon lifts by itself; absent for a cordon that holds until vip uncordon, or none.
# TYPE vip_store_cordon_remaining_seconds gauge
vip_store_cordon_remaining_seconds{node="a"} 90
# HELP vip_store_cordoned Whether the agent's node is cordoned (1, vip cordon): it takes no address by move, take-over or standby, and keeps what it holds.
# TYPE vip_store_cordoned gauge
vip_store_cordoned{node="a"} 1
# HELP vip_store_failsafe_answering Whether the agent answers on failsafe (1): the store is unreachable past the answer deadline, and every node of its failsafe set said it does not reach it either and promised to take none of its addresses.
# TYPE vip_store_failsafe_answering gauge
vip_store_failsafe_answering{node="a"} 0
# HELP vip_store_failsafe_enabled Whether the agent runs with --failsafe (1): while the store is unreachable, it may answer on the promises of the other nodes.
# TYPE vip_store_failsafe_enabled gauge
vip_store_failsafe_enabled{node="a"} 0
# HELP vip_store_failsafe_promise_remaining_seconds Seconds left of the last promise in force this node made to an owner answering on failsafe (0 when none): it takes nothing through the store until it ends.
# TYPE vip_store_failsafe_promise_remaining_seconds gauge
vip_store_failsafe_promise_remaining_seconds{node="a"} 0
# HELP vip_store_fence_after_seconds How long after the last renewal sent the agent fences: the TTL less the margin.
# TYPE vip_store_fence_after_seconds gauge
vip_store_fence_after_seconds{node="a"} 4.5
# HELP vip_store_fenced Whether the agent is fenced (1): it could not renew its lease in the store and stopped answering for every guarded claim.
# TYPE vip_store_fenced gauge
vip_store_fenced{node="a"} 1
# HELP vip_store_last_renewal_age_seconds Seconds since the agent sent the last renewal of its lease that succeeded; it fences when this reaches vip_store_fence_after_seconds.
# TYPE vip_store_last_renewal_age_seconds gauge
vip_store_last_renewal_age_seconds{node="a"} 5
# HELP vip_store_lease_ttl_seconds The time to live of the agent's lease in the store.
# TYPE vip_store_lease_ttl_seconds gauge
vip_store_lease_ttl_seconds{node="a"} 6
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestStoreCollectorDeadline: a guarded agent's answer deadline is the
// seconds left before it (negative once passed), and the frames withheld
// past it a counter; an agent without a deadline exports neither.
func TestStoreCollectorDeadline(t *testing.T) {
	s := fakeStore{info: api.Store{Node: "a", Deadline: now.Add(-500 * time.Millisecond), DeadlineLeft: api.Duration(-500 * time.Millisecond), Withheld: 12}}
	c := NewStoreCollector(s, func() time.Time { return now })
	want := `
# HELP vip_store_answer_deadline_seconds Seconds left before the answer deadline (negative once it passed): no frame for a guarded claim leaves after it unless a renewal the store acknowledges moves it. It is checked where frames leave, in the kernel too, on CLOCK_BOOTTIME.
# TYPE vip_store_answer_deadline_seconds gauge
vip_store_answer_deadline_seconds{node="a"} -0.5
# HELP vip_store_withheld_frames_total Frames not sent because the answer deadline had passed: answers (the in-kernel responder's requests passed on unanswered included), gratuitous frames and probes.
# TYPE vip_store_withheld_frames_total counter
vip_store_withheld_frames_total{node="a"} 12
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "vip_store_answer_deadline_seconds", "vip_store_withheld_frames_total"); err != nil {
		t.Error(err)
	}
	closed := NewStoreCollector(fakeStore{info: api.Store{Node: "a", DeadlineClosed: true}}, nil)
	if err := testutil.CollectAndCompare(closed, strings.NewReader(`
# HELP vip_store_answer_deadline_seconds Seconds left before the answer deadline (negative once it passed): no frame for a guarded claim leaves after it unless a renewal the store acknowledges moves it. It is checked where frames leave, in the kernel too, on CLOCK_BOOTTIME.
# TYPE vip_store_answer_deadline_seconds gauge
vip_store_answer_deadline_seconds{node="a"} 0
`), "vip_store_answer_deadline_seconds"); err != nil {
		t.Errorf("a closed deadline: %v", err)
	}
	if n := testutil.CollectAndCount(NewStoreCollector(fakeStore{info: api.Store{Node: "a"}}, nil), "vip_store_answer_deadline_seconds", "vip_store_withheld_frames_total"); n != 0 {
		t.Errorf("an agent without a deadline exports %d deadline metrics, want none", n)
	}
}

// TestStoreCollectorFailsafe: an owner answering on failsafe says so, with
// the age of its last acknowledgements; a node that promised an owner says
// how long its promise has left, and the series of an ended one is 0.
func TestStoreCollectorFailsafe(t *testing.T) {
	s := fakeStore{info: api.Store{Node: "a", FailsafeEnabled: true,
		Failsafe: &api.Failsafe{Since: now.Add(-10 * time.Second), AckedBy: []string{"b"}, AckedAt: now.Add(-400 * time.Millisecond)},
		Promised: &api.Promise{Owner: "c", Until: now.Add(2500 * time.Millisecond)}}}
	names := []string{"vip_store_failsafe_enabled", "vip_store_failsafe_answering", "vip_store_failsafe_ack_age_seconds", "vip_store_failsafe_promise_remaining_seconds"}
	want := `
# HELP vip_store_failsafe_ack_age_seconds Seconds since the last round of failsafe acknowledgements, while the agent answers on failsafe; absent otherwise.
# TYPE vip_store_failsafe_ack_age_seconds gauge
vip_store_failsafe_ack_age_seconds{node="a"} 0.4
# HELP vip_store_failsafe_answering Whether the agent answers on failsafe (1): the store is unreachable past the answer deadline, and every node of its failsafe set said it does not reach it either and promised to take none of its addresses.
# TYPE vip_store_failsafe_answering gauge
vip_store_failsafe_answering{node="a"} 1
# HELP vip_store_failsafe_enabled Whether the agent runs with --failsafe (1): while the store is unreachable, it may answer on the promises of the other nodes.
# TYPE vip_store_failsafe_enabled gauge
vip_store_failsafe_enabled{node="a"} 1
# HELP vip_store_failsafe_promise_remaining_seconds Seconds left of the last promise in force this node made to an owner answering on failsafe (0 when none): it takes nothing through the store until it ends.
# TYPE vip_store_failsafe_promise_remaining_seconds gauge
vip_store_failsafe_promise_remaining_seconds{node="a"} 2.5
`
	if err := testutil.CollectAndCompare(NewStoreCollector(s, func() time.Time { return now }), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	ended := `
# HELP vip_store_failsafe_promise_remaining_seconds Seconds left of the last promise in force this node made to an owner answering on failsafe (0 when none): it takes nothing through the store until it ends.
# TYPE vip_store_failsafe_promise_remaining_seconds gauge
vip_store_failsafe_promise_remaining_seconds{node="a"} 0
`
	later := func() time.Time { return now.Add(3 * time.Second) }
	if err := testutil.CollectAndCompare(NewStoreCollector(s, later), strings.NewReader(ended), "vip_store_failsafe_promise_remaining_seconds"); err != nil {
		t.Error(err)
	}
}
