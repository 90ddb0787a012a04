package main

import (
	"io"
	"testing"
	"time"

	"github.com/vipctl/vip/test/labtest"
)

// TestFailoverStep runs the failover step once, small: keepalived's backup
// takes over from its killed master, vip's standby from its killed owner,
// and from the standby's first answer on nothing of the old owner's host
// says it has the address. How fast is the benchmark's to say, not this
// test's.
func TestFailoverStep(t *testing.T) {
	labtest.RequireRoot(t, "the failover step's lab")
	// The step's own checks would fail it rather than skip it.
	for _, tool := range []string{"keepalived", "etcd", "tcpdump", "go"} {
		labtest.RequireTool(t, tool)
	}
	b := newBench(&options{goTool: "go"}, io.Discard)
	b.dir = t.TempDir()
	if err := b.buildVip(t.Context()); err != nil {
		t.Fatalf("build vip: %v", err)
	}
	cfg := failoverConfig{Rounds: 1, TTL: 3 * time.Second, Rate: 50, After: time.Second}
	res, err := runFailover(t.Context(), cfg, b.vipBin, t.Logf)
	if err != nil {
		t.Fatalf("failover step: %v", err)
	}
	if len(res.KA) != 1 || len(res.Vip) != 1 {
		t.Fatalf("rounds measured: got %d of keepalived's and %d of vip's, want 1 each", len(res.KA), len(res.Vip))
	}
	// takeoverOf insists on the new owner's answer after the kill.
	ka, v := res.KA[0], res.Vip[0]
	t.Logf("%s: backup's first answer %v after the kill, %d frames from the dead master's host in the %v after",
		res.Keepalived, ka.took().Round(time.Millisecond), ka.Late, ka.After)
	t.Logf("vip (%s, TTL %v): standby's first answer %v after the kill, %v after the old owner's last frame",
		res.Responder, cfg.TTL, v.took().Round(time.Millisecond), v.slack().Round(time.Millisecond))
	if v.Late != 0 || !v.LastOld.Before(v.First) {
		t.Errorf("vip: got %d frames from the old owner's host in the %v after the standby's first answer at %s, the last at %s; want none",
			v.Late, v.After, v.First.Format("15:04:05.000"), v.LastOld.Format("15:04:05.000"))
	}
	if v.Answered == 0 || ka.Answered == 0 {
		t.Errorf("the new owners' answers after the takeovers: got %d (keepalived) and %d (vip), want some", ka.Answered, v.Answered)
	}
}
