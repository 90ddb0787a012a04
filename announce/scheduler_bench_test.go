package announce

import (
	"context"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// benchKeys returns n keys: IPv6 addresses in 2001:db8:1::/112, as the
// lab's 10,000 claims use.
func benchKeys(n int) []Key {
	keys := make([]Key, n)
	base := netip.MustParseAddr("2001:db8:1::").As16()
	for i := range keys {
		a := base
		a[14], a[15] = byte(i>>8), byte(i)
		keys[i] = Key{Ifindex: 7, Addr: netip.AddrFrom16(a)}
	}
	return keys
}

// countingSender is a RoundSender that counts rounds and cancels the run
// once it has seen want of them.
type countingSender struct {
	n    atomic.Int64
	want atomic.Int64
	done chan struct{}
}

func (s *countingSender) SendRound(context.Context, Key) (int, error) {
	if s.n.Add(1) == s.want.Load() {
		s.done <- struct{}{}
	}
	return 2, nil
}

// BenchmarkSchedulerRound measures the single sender with 10,000 keys, on
// the real clock, with a rate cap too high to matter:
//
//   - arm-10000: one op arms 10,000 keys, each for a single round, and
//     waits until every first round is sent: a 10,000-address claim's way
//     through the scheduler.
//   - steady-10000: 10,000 keys stay armed with an interval of a
//     nanosecond, so every key is always due; one op is one round taken
//     off the queue, sent and put back, with 10,000 keys queued.
func BenchmarkSchedulerRound(b *testing.B) {
	const n = 10000
	keys := benchKeys(n)

	b.Run("arm-10000", func(b *testing.B) {
		s := &countingSender{done: make(chan struct{}, 1)}
		sch := NewScheduler(SchedulerConfig{Window: time.Nanosecond, Interval: time.Hour, Rate: 1e9}, s)
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan struct{})
		go func() { sch.Run(ctx); close(stopped) }()
		b.Cleanup(func() { cancel(); <-stopped })
		b.ReportAllocs()
		for b.Loop() {
			s.want.Add(n)
			for _, k := range keys {
				sch.Arm(k, sch.Burst(0, 0, false, 2))
			}
			select {
			case <-s.done:
			case <-time.After(10 * time.Second):
				b.Fatalf("first rounds: %d of %d sent after 10s", s.n.Load(), s.want.Load())
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/key")
	})

	b.Run("steady-10000", func(b *testing.B) {
		s := &countingSender{done: make(chan struct{}, 1)}
		sch := NewScheduler(SchedulerConfig{Window: time.Hour, Interval: time.Nanosecond, Rate: 1e9}, s)
		// Arm all keys before the sender runs, so that the timed part is
		// rounds alone.
		for _, k := range keys {
			sch.Arm(k, sch.Burst(0, 0, false, 2))
		}
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan struct{})
		b.Cleanup(func() {
			// Run looks at ctx only when nothing is due; with every key
			// always due, the queue has to be emptied first.
			cancel()
			for _, k := range keys {
				sch.Cancel(k)
			}
			<-stopped
		})
		b.ReportAllocs()
		b.ResetTimer()
		s.want.Store(int64(b.N))
		go func() { sch.Run(ctx); close(stopped) }()
		select {
		case <-s.done:
		case <-time.After(time.Minute):
			b.Fatalf("rounds: %d of %d sent after a minute", s.n.Load(), b.N)
		}
		b.StopTimer()
	})
}
