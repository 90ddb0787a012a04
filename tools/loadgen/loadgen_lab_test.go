package loadgen_test

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/labtest"
	"github.com/vipctl/vip/tools/loadgen"
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func netnsPath(h *lab.Host) string { return filepath.Join("/run/netns", h.Netns) }

// TestLabKernelAnswersEveryRequest checks the load generator against the
// one responder nobody here wrote, the kernel: at 1,000 requests/s every
// request gets exactly one reply, from the host that has the address, with
// a latency that is positive and plausible, and the pace is the one asked
// for. An address nobody has gets no reply, and one two hosts have gets
// two: what the generator counts is what is on the wire.
func TestLabKernelAnswersEveryRequest(t *testing.T) {
	l := labtest.New(t,
		lab.HostConfig{Name: "a", IPv4: pfx("192.0.2.1/24"), IPv6: pfx("2001:db8::1/64")},
		lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.2/24")},
		lab.HostConfig{Name: "client", IPv4: pfx("192.0.2.3/24"), IPv6: pfx("2001:db8::3/64")},
	)
	a, b, client := l.Host("a"), l.Host("b"), l.Host("client")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run := uint8(0)
	load := func(t *testing.T, target netip.Addr, count int, wait time.Duration) *loadgen.Result {
		t.Helper()
		run++
		sender := netip.MustParseAddr("192.0.2.3")
		if target.Is6() {
			sender = netip.MustParseAddr("2001:db8::f000:0")
		}
		res, err := loadgen.Run(ctx, loadgen.Config{
			Netns: netnsPath(client), Interface: "eth0",
			Target: target, Sender: sender,
			Rate: 1000, Count: count, Wait: wait,
			Run: run, TxTimestamps: true,
		})
		if err != nil {
			t.Fatalf("load %s: %v", target, err)
		}
		if res.Sent != count || res.SendErrors != 0 || res.RecvDrops != 0 || res.Stray != 0 || res.Disagreeing != 0 || res.Negative != 0 {
			t.Errorf("load %s: got %+v; want %d sent, no send error, drop, stray, disagreeing or negative reply", target, *res, count)
		}
		return res
	}

	for _, tt := range []struct {
		name   string
		target netip.Addr
	}{
		{"ipv4", netip.MustParseAddr("192.0.2.1")},
		{"ipv6", netip.MustParseAddr("2001:db8::1")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := load(t, tt.target, 1000, time.Second)
			if res.Answered != 1000 || res.Lost != 0 || res.Duplicates != 0 {
				t.Errorf("got %d answered, %d lost, %d duplicates; want all 1000 answered once", res.Answered, res.Lost, res.Duplicates)
			}
			if want := a.Links[0].MAC.String(); len(res.Responders) != 1 || res.Responders[want] != 1000 {
				t.Errorf("responders: got %v, want only a (%s)", res.Responders, want)
			}
			// The kernel answers in microseconds on a lab segment; a
			// median of zero or of milliseconds means the clocks are
			// wrong, not the kernel.
			if med, max := res.Median(), res.Max(); med <= 0 || med > 5*time.Millisecond || max > 500*time.Millisecond {
				t.Errorf("latency: median %v, max %v; want a median above 0 and under 5ms", med, max)
			}
			// Within 10%: a loaded CI machine may hold up the last
			// request a little, which shortens the measured rate.
			if got := res.AchievedRate(); got < 900 || got > 1100 {
				t.Errorf("pace: got %.0f requests/s, want 1000 within 10%%", got)
			}
			t.Logf("%s: median %v, p99 %v, max %v, %.0f/s, send times from the %s (%d of %d)",
				tt.name, res.Median(), res.P99(), res.Max(), res.AchievedRate(), res.Clock, res.TxStamped, res.Sent)
		})
	}

	t.Run("nobody has it", func(t *testing.T) {
		res := load(t, netip.MustParseAddr("192.0.2.99"), 100, 200*time.Millisecond)
		if res.Answered != 0 || res.Lost != 100 || len(res.Responders) != 0 {
			t.Errorf("got %d answered, %d lost, responders %v; want all 100 lost", res.Answered, res.Lost, res.Responders)
		}
	})

	t.Run("two hosts have it", func(t *testing.T) {
		dup := "192.0.2.50"
		for _, h := range []*lab.Host{a, b} {
			if _, err := h.Run(ctx, "ip", "addr", "add", dup+"/32", "dev", "eth0"); err != nil {
				t.Fatal(err)
			}
		}
		res := load(t, netip.MustParseAddr(dup), 100, time.Second)
		if res.Answered != 100 || res.Duplicated != 100 || res.Duplicates != 100 || len(res.Responders) != 2 {
			t.Errorf("got %d answered, %d duplicated, %d duplicates, responders %v; want every request answered twice",
				res.Answered, res.Duplicated, res.Duplicates, res.Responders)
		}
	})
}

// TestLabFloorAnswers: the floor responder, sleeping and spinning, answers
// every request for its address once, from its host's MAC, and nothing else.
func TestLabFloorAnswers(t *testing.T) {
	l := labtest.New(t,
		lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.2/24")},
		lab.HostConfig{Name: "client", IPv4: pfx("192.0.2.3/24")},
	)
	b, client := l.Host("b"), l.Host("client")
	for i, spin := range []bool{false, true} {
		f, err := loadgen.StartFloor(loadgen.FloorConfig{Netns: netnsPath(b), Interface: "eth0", Addr: netip.MustParseAddr("192.0.2.20"), Spin: spin})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := loadgen.Run(ctx, loadgen.Config{
			Netns: netnsPath(client), Interface: "eth0",
			Target: netip.MustParseAddr("192.0.2.20"), Sender: netip.MustParseAddr("192.0.2.3"),
			Rate: 1000, Count: 500, Wait: time.Second, Run: uint8(i + 1),
		})
		cancel()
		n, serr := f.Stop()
		if err != nil || serr != nil {
			t.Fatalf("spin=%v: load %v, stop %v", spin, err, serr)
		}
		if want := b.Links[0].MAC.String(); res.Answered != 500 || res.Duplicates != 0 || res.Responders[want] != 500 || n != 500 {
			t.Errorf("spin=%v: %d answered, %d duplicates, responders %v, floor counted %d; want 500 answered once by %s", spin, res.Answered, res.Duplicates, res.Responders, n, want)
		}
		t.Logf("spin=%v: median %v, p99 %v", spin, res.Median(), res.P99())
	}
}
