package sniff_test

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/vipctl/vip/sniff"
)

// fakeSource hands out frames from a channel. With the channel empty it
// says no frame came in time, as a capture does; closed, it ends.
type fakeSource struct {
	frames  chan []byte
	err     error // returned once the frames are read, if set
	dropped uint64
	mu      sync.Mutex
	closed  bool
}

func newFakeSource(frames ...[]byte) *fakeSource {
	s := &fakeSource{frames: make(chan []byte, len(frames)+16)}
	for _, f := range frames {
		s.frames <- f
	}
	return s
}

func (s *fakeSource) ReadFrame() ([]byte, time.Time, error) {
	select {
	case f, ok := <-s.frames:
		if !ok {
			return nil, time.Time{}, io.EOF
		}
		return f, ts0, nil
	case <-time.After(5 * time.Millisecond):
		if s.err != nil {
			return nil, time.Time{}, s.err
		}
		return nil, time.Time{}, os.ErrDeadlineExceeded
	}
}

func (s *fakeSource) Dropped() (uint64, error) { return s.dropped, nil }

func (s *fakeSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.frames)
	}
	return nil
}

// collect is an Observer that keeps what it sees.
type collect struct {
	mu  sync.Mutex
	obs []sniff.Observation
}

func (c *collect) Observe(o sniff.Observation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.obs = append(c.obs, o)
}

func (c *collect) kinds() []sniff.Kind {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ks []sniff.Kind
	for _, o := range c.obs {
		ks = append(ks, o.Kind)
	}
	return ks
}

func frameNamed(t testing.TB, name string) []byte {
	t.Helper()
	for _, c := range validCases(t) {
		if c.name == name {
			return c.frame
		}
	}
	for _, c := range badCases(t) {
		if c.name == name {
			return c.frame
		}
	}
	t.Fatalf("no frame %q", name)
	return nil
}

func TestCaptureRun(t *testing.T) {
	src := newFakeSource(
		frameNamed(t, "arp-who-has"),
		frameNamed(t, "ipv4"),            // ignored
		frameNamed(t, "ns-bad-checksum"), // undecodable
		frameNamed(t, "na-unsolicited"),
		frameNamed(t, "ns-option-past-end"), // undecodable
	)
	src.dropped = 7
	src.Close() // the source ends after these frames
	c := sniff.NewCapture("fake", src)
	var first, second collect
	if err := c.Run(context.Background(), &first, &second); err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []sniff.Kind{sniff.KindWhoHas, sniff.KindAdvertisement}
	for _, got := range [][]sniff.Kind{first.kinds(), second.kinds()} {
		if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("observer got %v, want %v", got, want)
		}
	}
	if got, want := c.Stats(), (sniff.Stats{Received: 5, Dropped: 7, Ignored: 1, Undecodable: 2}); got != want {
		t.Errorf("Stats: got %+v, want %+v", got, want)
	}
}

func TestCaptureStopsOnCancel(t *testing.T) {
	src := newFakeSource()
	c := sniff.NewCapture("fake", src)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var seen collect
	go func() { done <- c.Run(ctx, &seen) }()
	src.frames <- frameNamed(t, "arp-who-has")
	deadline := time.Now().Add(5 * time.Second)
	for len(seen.kinds()) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	// A second Run while the first runs is refused.
	if err := c.Run(ctx); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second Run: got %v, want already running", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after cancel: got %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
	if got := seen.kinds(); len(got) != 1 {
		t.Errorf("got observations %v, want the one who-has", got)
	}
}

func TestCaptureStopsOnClose(t *testing.T) {
	src := newFakeSource()
	c := sniff.NewCapture("fake", src)
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after Close: got %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after Close")
	}
}

func TestCaptureReadError(t *testing.T) {
	src := newFakeSource()
	src.err = errors.New("interface went away")
	c := sniff.NewCapture("eth9", src)
	err := c.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "eth9") || !errors.Is(err, src.err) {
		t.Errorf("Run: got %v, want the read error, naming the source", err)
	}
}

// loopSource hands out the same frames over and over, n in all, without
// waiting, to measure the capture loop itself.
type loopSource struct {
	frames [][]byte
	n, i   int
}

func (s *loopSource) ReadFrame() ([]byte, time.Time, error) {
	if s.i == s.n {
		return nil, time.Time{}, io.EOF
	}
	f := s.frames[s.i%len(s.frames)]
	s.i++
	return f, ts0.Add(time.Duration(s.i) * time.Microsecond), nil
}

func (s *loopSource) Dropped() (uint64, error) { return 0, nil }
func (s *loopSource) Close() error             { return nil }

// BenchmarkCapture runs the whole path a frame takes after the kernel:
// the capture loop, Decode, a Table and a Detector holding an address.
func BenchmarkCapture(b *testing.B) {
	var frames [][]byte
	for _, name := range []string{"arp-who-has", "arp-reply", "ns", "na-solicited", "ns-unreachability", "arp-announcement"} {
		frames = append(frames, frameNamed(b, name))
	}
	table, err := sniff.NewTable(sniff.TableConfig{Clock: clockwork.NewFakeClockAt(ts0)})
	if err != nil {
		b.Fatal(err)
	}
	det, err := sniff.NewDetector(sniff.DetectorConfig{OnEvent: func(sniff.Event) {}})
	if err != nil {
		b.Fatal(err)
	}
	if err := det.Hold(vip4, hw(ourMAC)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	c := sniff.NewCapture("loop", &loopSource{frames: frames, n: b.N})
	b.ResetTimer()
	if err := c.Run(context.Background(), table, det); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
}
