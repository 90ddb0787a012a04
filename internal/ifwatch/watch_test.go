package ifwatch_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/vipctl/vip/internal/ifwatch"
	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/labtest"
)

// waitTimeout bounds each wait for a change; the kernel reports link changes
// within milliseconds.
const waitTimeout = 5 * time.Second

// recorder collects the changes Watch reports, for the test to wait on.
type recorder struct {
	mu      sync.Mutex
	changes []ifwatch.Change
	changed chan struct{} // closed and replaced on every change
	next    int           // the first change waitFor has not consumed; test goroutine only
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) add(c ifwatch.Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, c)
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *recorder) all() []ifwatch.Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ifwatch.Change(nil), r.changes...)
}

// waitFor returns the first change after those already consumed that
// matches, and consumes everything up to it.
func (r *recorder) waitFor(t *testing.T, what string, match func(ifwatch.Change) bool) ifwatch.Change {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for {
		r.mu.Lock()
		for i := r.next; i < len(r.changes); i++ {
			if match(r.changes[i]) {
				r.next = i + 1
				c := r.changes[i]
				r.mu.Unlock()
				return c
			}
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-timer.C:
			t.Fatalf("no change %s within %v; changes so far:\n%s", what, waitTimeout, format(r.all()))
		}
	}
}

func format(cs []ifwatch.Change) string {
	var s strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&s, "  %+v\n", c)
	}
	return s.String()
}

// namespace opens a handle to the host's namespace, closed when the test
// ends.
func namespace(t *testing.T, h *lab.Host) netns.NsHandle {
	t.Helper()
	ns, err := netns.GetFromName(h.Netns)
	if err != nil {
		t.Fatalf("open namespace of %s: %v", h.Name, err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}

// watch runs Watch on the host's namespace until the test ends, or until
// the returned stop is called; stop returns what Watch returned.
func watch(t *testing.T, h *lab.Host, fn func(ifwatch.Change)) (stop func() error) {
	t.Helper()
	ns := namespace(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- ifwatch.Watch(ctx, ifwatch.Options{Namespace: &ns}, fn) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-errc:
			case <-time.After(waitTimeout):
				t.Errorf("Watch still running %v after its context was cancelled", waitTimeout)
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

func run(t *testing.T, h *lab.Host, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := h.Run(ctx, args[0], args[1:]...); err != nil {
		t.Fatal(err)
	}
}

func named(name string, match func(ifwatch.Change) bool) func(ifwatch.Change) bool {
	return func(c ifwatch.Change) bool { return c.Name == name && match(c) }
}

func TestWatch(t *testing.T) {
	t.Parallel()
	b := labtest.New(t, lab.HostConfig{Name: "b"}).Host("b")
	eth0 := labtest.Link(b, "eth0")
	rec := newRecorder()
	stop := watch(t, b, rec.add)

	// The current state comes first.
	got := rec.waitFor(t, "for eth0's current state", named("eth0", func(ifwatch.Change) bool { return true }))
	if want := (ifwatch.Change{Name: "eth0", Index: eth0.Index, MAC: eth0.MAC, Up: true}); !same(got, want) {
		t.Errorf("current state of eth0: got %+v, want %+v", got, want)
	}
	rec.next = 0 // lo may come before eth0 or after it
	if lo := rec.waitFor(t, "for lo's current state", named("lo", func(ifwatch.Change) bool { return true })); !lo.Up {
		t.Errorf("current state of lo: got %+v, want up", lo)
	}

	run(t, b, "ip", "link", "set", "eth0", "down")
	got = rec.waitFor(t, "eth0 down", named("eth0", func(c ifwatch.Change) bool { return !c.Up }))
	if want := (ifwatch.Change{Name: "eth0", Index: eth0.Index, MAC: eth0.MAC}); !same(got, want) {
		t.Errorf("eth0 down: got %+v, want %+v", got, want)
	}

	run(t, b, "ip", "link", "set", "eth0", "up")
	rec.waitFor(t, "eth0 up", named("eth0", func(c ifwatch.Change) bool { return c.Up }))

	newMAC := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x99}
	run(t, b, "ip", "link", "set", "eth0", "address", newMAC.String())
	got = rec.waitFor(t, "eth0 with MAC "+newMAC.String(), named("eth0", func(c ifwatch.Change) bool { return bytes.Equal(c.MAC, newMAC) }))
	if want := (ifwatch.Change{Name: "eth0", Index: eth0.Index, MAC: newMAC, Up: true}); !same(got, want) {
		t.Errorf("eth0's new MAC: got %+v, want %+v", got, want)
	}

	run(t, b, "ip", "link", "del", "eth0")
	got = rec.waitFor(t, "eth0 deleted", named("eth0", func(c ifwatch.Change) bool { return c.Deleted }))
	if got.Index != eth0.Index || got.Up {
		t.Errorf("eth0 deleted: got %+v, want index %d and not up", got, eth0.Index)
	}

	// An interface of the same name returns: a veth pair inside b (this
	// kernel may have no dummy driver), up once both ends are.
	run(t, b, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0peer")
	again := rec.waitFor(t, "eth0 created again", named("eth0", func(c ifwatch.Change) bool { return !c.Deleted }))
	if again.Index == eth0.Index || again.Index == 0 || again.Up {
		t.Errorf("eth0 created again: got %+v, want a new index (not %d), down", again, eth0.Index)
	}
	run(t, b, "ip", "link", "set", "eth0peer", "up")
	run(t, b, "ip", "link", "set", "eth0", "up")
	got = rec.waitFor(t, "the new eth0 up", named("eth0", func(c ifwatch.Change) bool { return c.Up }))
	if got.Index != again.Index {
		t.Errorf("the new eth0 up: got %+v, want index %d", got, again.Index)
	}

	// A port leaving a bridge gets an RTM_DELLINK of family AF_BRIDGE; the
	// interface itself stays. A rename, by contrast, ends the old name.
	run(t, b, "ip", "link", "add", "br9", "type", "bridge")
	run(t, b, "ip", "link", "set", "eth0peer", "master", "br9")
	br9 := rec.waitFor(t, "br9 appearing", named("br9", func(ifwatch.Change) bool { return true }))
	rec.waitFor(t, "eth0peer made a port of br9", named("eth0peer", func(c ifwatch.Change) bool { return c.MasterIndex == br9.Index }))
	run(t, b, "ip", "link", "set", "eth0peer", "nomaster")
	rec.waitFor(t, "eth0peer freed from br9", named("eth0peer", func(c ifwatch.Change) bool { return c.MasterIndex == 0 && c.Up }))
	run(t, b, "ip", "link", "set", "eth0peer", "down")
	run(t, b, "ip", "link", "set", "eth0peer", "name", "p9")
	deleted := rec.waitFor(t, "eth0peer renamed away", named("eth0peer", func(c ifwatch.Change) bool { return c.Deleted }))
	renamed := rec.waitFor(t, "p9 appearing", named("p9", func(ifwatch.Change) bool { return true }))
	if renamed.Index != deleted.Index || renamed.Deleted {
		t.Errorf("rename of eth0peer to p9: got %+v then %+v, want the same index", deleted, renamed)
	}

	if err := stop(); err != nil {
		t.Errorf("Watch after cancel: got %v, want nil", err)
	}

	// Changes are passed on only when something visible changed, and the
	// only deletion of eth0peer is its rename (not its leaving br9).
	all := rec.all()
	last := map[string]ifwatch.Change{}
	for _, c := range all {
		if p, ok := last[c.Name]; ok && same(p, c) {
			t.Errorf("change reported twice in a row: %+v", c)
		}
		last[c.Name] = c
	}
	n := 0
	for _, c := range all {
		if c.Name == "eth0peer" && c.Deleted {
			n++
		}
	}
	if n != 1 {
		t.Errorf("eth0peer: got %d deletions, want 1 (the rename):\n%s", n, format(all))
	}
	t.Logf("changes:\n%s", format(all))
}

func same(a, b ifwatch.Change) bool {
	return a.Name == b.Name && a.Index == b.Index && a.Up == b.Up && a.Deleted == b.Deleted && bytes.Equal(a.MAC, b.MAC) &&
		a.MasterIndex == b.MasterIndex
}

// TestWatchBreaks checks that Watch reports a subscription that lost
// messages: fn blocks while a flood of link messages overflows the socket.
func TestWatchBreaks(t *testing.T) {
	t.Parallel()
	b := labtest.New(t, lab.HostConfig{Name: "b"}).Host("b")
	ns := namespace(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	errc := make(chan error, 1)
	go func() {
		errc <- ifwatch.Watch(ctx, ifwatch.Options{Namespace: &ns}, func(ifwatch.Change) {
			once.Do(func() { close(started) })
			<-release
		})
	}()
	select {
	case <-started:
	case err := <-errc:
		t.Fatalf("Watch: %v", err)
	case <-time.After(waitTimeout):
		t.Fatal("no first change")
	}

	// Each alias change is an RTM_NEWLINK of over a kilobyte; 3,000 of
	// them are far more than the socket's buffer and Watch's queue hold.
	var batch strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&batch, "link set dev lo alias flood%d\n", i)
	}
	cmd := b.Command(ctx, "ip", "-batch", "-")
	cmd.Stdin = strings.NewReader(batch.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ip -batch: %v: %s", err, out)
	}
	close(release)

	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "no buffer space") {
			t.Errorf("Watch after an overflow: got %v, want an error saying messages were lost (no buffer space)", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Watch did not return after its socket overflowed")
	}
}

// TestWatchSubscribeError checks that Watch fails at once when it cannot
// subscribe, here because the namespace handle is not a namespace. No socket
// is opened anywhere.
func TestWatchSubscribeError(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ns := netns.NsHandle(f.Fd())
	err = ifwatch.Watch(context.Background(), ifwatch.Options{Namespace: &ns}, func(c ifwatch.Change) {
		t.Errorf("got a change %+v from a watch that cannot subscribe", c)
	})
	if err == nil || !strings.Contains(err.Error(), "subscribe") {
		t.Errorf("Watch with a bad namespace: got %v, want a subscribe error", err)
	}
}

// TestWatchAddrs checks that Watch with Options.Addrs reports the addresses
// there are, then each one added or removed, once each: b's own address
// first, then an IPv4 and an IPv6 address added and removed, and the
// addresses of an interface deleted.
func TestWatchAddrs(t *testing.T) {
	t.Parallel()
	b := labtest.New(t, lab.HostConfig{Name: "b", IPv4: netip.MustParsePrefix("192.0.2.2/24")}).Host("b")
	eth0 := labtest.Link(b, "eth0")
	ns := namespace(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes := make(chan ifwatch.AddrChange, 1024)
	errc := make(chan error, 1)
	go func() {
		errc <- ifwatch.Watch(ctx, ifwatch.Options{Namespace: &ns, Addrs: func(c ifwatch.AddrChange) { changes <- c }}, func(ifwatch.Change) {})
	}()
	var seen []ifwatch.AddrChange
	waitFor := func(want ifwatch.AddrChange) {
		t.Helper()
		timer := time.NewTimer(waitTimeout)
		defer timer.Stop()
		for {
			select {
			case c := <-changes:
				seen = append(seen, c)
				if want.Index == 0 {
					want.Index = c.Index // an interface the test made
				}
				if c == want {
					return
				}
			case err := <-errc:
				t.Fatalf("Watch returned %v waiting for %+v", err, want)
			case <-timer.C:
				t.Fatalf("no address change %+v within %v; changes so far: %+v", want, waitTimeout, seen)
			}
		}
	}
	waitFor(ifwatch.AddrChange{Index: eth0.Index, Prefix: b.IPv4})
	for _, p := range []string{"198.51.100.7/24", "2001:db8:7::7/64"} {
		added := ifwatch.AddrChange{Index: eth0.Index, Prefix: netip.MustParsePrefix(p)}
		run(t, b, "ip", "addr", "add", p, "dev", "eth0")
		waitFor(added)
		// New lifetimes are an RTM_NEWADDR of an address there is (as
		// are the end of duplicate address detection, and a router's
		// advertisement): not a change.
		run(t, b, "ip", "addr", "change", p, "dev", "eth0", "valid_lft", "300", "preferred_lft", "200")
		run(t, b, "ip", "addr", "del", p, "dev", "eth0")
		added.Deleted = true
		waitFor(added)
	}
	// The kernel tells of the addresses of an interface it deletes.
	run(t, b, "ip", "link", "add", "v9", "type", "veth", "peer", "name", "v9peer")
	v9 := netip.MustParsePrefix("203.0.113.9/24")
	run(t, b, "ip", "addr", "add", v9.String(), "dev", "v9")
	waitFor(ifwatch.AddrChange{Prefix: v9})
	v9Index := seen[len(seen)-1].Index
	run(t, b, "ip", "link", "del", "v9")
	waitFor(ifwatch.AddrChange{Index: v9Index, Prefix: v9, Deleted: true})
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("Watch after cancel: got %v, want nil", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Watch still running after its context was cancelled")
	}
	for len(changes) > 0 {
		seen = append(seen, <-changes)
	}
	counts := map[ifwatch.AddrChange]int{}
	for _, c := range seen {
		if counts[c]++; counts[c] > 1 {
			t.Errorf("address change %+v reported %d times, want once: %+v", c, counts[c], seen)
		}
	}
}
