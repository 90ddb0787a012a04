package probe

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/wire"
	"github.com/vipctl/vip/sniff"
)

var (
	a4 = netip.MustParseAddr("192.0.2.10")
	a6 = netip.MustParseAddr("2001:db8::10")
	b4 = netip.MustParseAddr("192.0.2.20")

	ourMAC   = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
	rivalMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x99}
)

// lab is a set of fake interfaces: a link and a listener each, and what
// they did.
type lab struct {
	mu             sync.Mutex
	probes         map[string][]netip.Addr // sent, per interface
	opened, closed map[string]int          // links opened and closed, per interface

	// running counts the listeners' Run calls under way; listened those
	// started, heard those closed after Run.
	running, listened, heard atomic.Int32

	// answers are what each interface's listener hears at once.
	answers map[string][]sniff.Observation
	// failOpen, failListen and failProbe name an interface whose link
	// cannot be opened, whose capture cannot be, or whose probe cannot be
	// sent; failRun one whose capture stops at once with errRun.
	failOpen, failListen, failProbe, failRun string
}

var errOpen, errListen, errProbe, errRun = errors.New("open"), errors.New("listen"), errors.New("probe"), errors.New("run")

func newLab() *lab {
	return &lab{probes: map[string][]netip.Addr{}, opened: map[string]int{}, closed: map[string]int{}, answers: map[string][]sniff.Observation{}}
}

func (l *lab) config(fc clockwork.Clock) Config {
	return Config{Count: 2, Wait: time.Second, Clock: fc,
		Open: func(name string) (Link, error) {
			if name == l.failOpen {
				return nil, errOpen
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			l.opened[name]++
			return &fakeLink{lab: l, name: name}, nil
		},
		Listen: func(name string) (Listener, error) {
			if name == l.failListen {
				return nil, errListen
			}
			l.listened.Add(1)
			return &fakeListener{lab: l, name: name}, nil
		},
	}
}

type fakeLink struct {
	lab  *lab
	name string
}

func (f *fakeLink) Name() string          { return f.name }
func (f *fakeLink) MAC() net.HardwareAddr { return ourMAC }
func (f *fakeLink) Probe(a netip.Addr) (int, error) {
	if f.name == f.lab.failProbe {
		return 0, errProbe
	}
	f.lab.mu.Lock()
	defer f.lab.mu.Unlock()
	f.lab.probes[f.name] = append(f.lab.probes[f.name], a)
	return 1, nil
}
func (f *fakeLink) Close() error {
	f.lab.mu.Lock()
	defer f.lab.mu.Unlock()
	f.lab.closed[f.name]++
	return nil
}

type fakeListener struct {
	lab  *lab
	name string
}

// Run hands its observers the interface's answers, waits for ctx, and then
// takes a while to return, as a capture finishing its read does: a Run
// that does not wait for it returns first.
func (f *fakeListener) Run(ctx context.Context, observers ...sniff.Observer) error {
	f.lab.running.Add(1)
	defer f.lab.running.Add(-1)
	for _, o := range f.lab.answers[f.name] {
		for _, obs := range observers {
			obs.Observe(o)
		}
	}
	if f.name == f.lab.failRun {
		return errRun
	}
	<-ctx.Done()
	time.Sleep(20 * time.Millisecond)
	return ctx.Err()
}

func (f *fakeListener) Close() error { f.lab.heard.Add(1); return nil }

func reply(addr netip.Addr, mac net.HardwareAddr) sniff.Observation {
	m, _ := wire.MACFrom(mac)
	return sniff.Observation{Time: time.Unix(1, 0), Kind: sniff.KindReply, EthSrc: m, Sender: addr, SenderMAC: m}
}

// drive advances fc by each of steps once Run waits on it, until done.
func drive(t *testing.T, fc *clockwork.FakeClock, done <-chan struct{}, steps ...time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-done
		cancel()
	}()
	for _, d := range steps {
		if err := fc.BlockUntilContext(ctx, 1); err != nil {
			return
		}
		fc.Advance(d)
	}
}

// run runs Run in the lab with fc, advancing it by steps.
func run(t *testing.T, ctx context.Context, l *lab, fc *clockwork.FakeClock, reqs []announce.Request, steps ...time.Duration) (got []resultOf, err error) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, rerr := Run(ctx, reqs, l.config(fc))
		for _, r := range res {
			var macs []string
			for _, c := range r.Claimers {
				macs = append(macs, c.MAC)
			}
			got = append(got, resultOf{r.Addr, r.Interface, macs, r.Claimers != nil})
		}
		err = rerr
	}()
	drive(t, fc, done, steps...)
	<-done
	return got, err
}

type resultOf struct {
	addr, iface string
	macs        []string
	nonNil      bool
}

func TestRunFindsWhoAnswers(t *testing.T) {
	l := newLab()
	l.answers["eth0"] = []sniff.Observation{reply(a4, rivalMAC), reply(a4, ourMAC)}
	reqs := []announce.Request{{Addr: a4, Interface: "eth0"}, {Addr: b4, Interface: "eth1"}, {Addr: a6, Interface: "eth0"}}
	fc := clockwork.NewFakeClock()
	got, err := run(t, context.Background(), l, fc, reqs, Spacing, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := []resultOf{
		{a4.String(), "eth0", []string{rivalMAC.String()}, true},
		{b4.String(), "eth1", nil, true},
		{a6.String(), "eth0", nil, true},
	}
	if !slices.EqualFunc(got, want, func(x, y resultOf) bool {
		return x.addr == y.addr && x.iface == y.iface && slices.Equal(x.macs, y.macs) && x.nonNil == y.nonNil
	}) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if p := l.probes["eth0"]; !slices.Equal(p, []netip.Addr{a4, a6, a4, a6}) {
		t.Errorf("eth0 sent probes for %v, want a4 and a6 twice", p)
	}
	if p := l.probes["eth1"]; !slices.Equal(p, []netip.Addr{b4, b4}) {
		t.Errorf("eth1 sent probes for %v, want b4 twice", p)
	}
	checkStopped(t, l, 2)
}

// TestRunWaitsOnEveryReturn: whatever Run returns, every capture it
// started has stopped (Run returned, the capture closed) and every link it
// opened is closed by then.
func TestRunWaitsOnEveryReturn(t *testing.T) {
	reqs := []announce.Request{{Addr: a4, Interface: "eth0"}, {Addr: b4, Interface: "eth1"}}
	for _, tc := range []struct {
		name    string
		set     func(*lab)
		cancel  bool // cancel the context once Run waits on its clock
		want    error
		started int32 // captures started
	}{
		{"an interface cannot be opened", func(l *lab) { l.failOpen = "eth1" }, false, errOpen, 1},
		{"a capture cannot be opened", func(l *lab) { l.failListen = "eth1" }, false, errListen, 1},
		{"a probe cannot be sent", func(l *lab) { l.failProbe = "eth1" }, false, errProbe, 2},
		{"the context is cancelled", func(*lab) {}, true, context.Canceled, 2},
		{"a capture fails", func(l *lab) { l.failRun = "eth0" }, false, errRun, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLab()
			tc.set(l)
			fc := clockwork.NewFakeClock()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			steps := []time.Duration{Spacing, time.Second}
			if tc.cancel {
				go func() {
					if fc.BlockUntilContext(ctx, 1) == nil {
						cancel()
					}
				}()
				steps = nil
			}
			_, err := run(t, ctx, l, fc, reqs, steps...)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			checkStopped(t, l, tc.started)
		})
	}
}

// checkStopped fails the test unless, now, started captures ran and all
// have stopped and been closed, and each link was opened and closed once.
func checkStopped(t *testing.T, l *lab, started int32) {
	t.Helper()
	if n := l.running.Load(); n != 0 {
		t.Errorf("%d captures still running after Run returned, want none", n)
	}
	if n, h := l.listened.Load(), l.heard.Load(); n != started || h != started {
		t.Errorf("%d captures started and %d closed, want %d of each", n, h, started)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, n := range l.opened {
		if c := l.closed[name]; n != 1 || c != 1 {
			t.Errorf("link %s opened %d times and closed %d, want once each", name, n, c)
		}
	}
}
