package announce

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/internal/wire"
)

// TestLinkPollReader answers through the reader that waits in poll(2) on a
// descriptor of its own (a socket pair stands for the packet socket): each
// request gets its reply through real system calls, Close ends a reader
// that sits in poll at once, and the reader's duplicate descriptor is
// closed with it.
func TestLinkPollReader(t *testing.T) {
	fdsBefore := openFDs(t)
	arpReq, ns := benchRequests(t)
	arpPeer, arpEnd := benchSocketPair(t)
	ip6Peer, ip6End := benchSocketPair(t)
	l := NewLink(benchInterface(), LinkConfig{ARP: arpEnd, IPv6: ip6End, Groups: (&fakeGroups{joiner: &fakeJoiner{}}).open})
	if l.resp.(*socketResponder).wake < 0 {
		t.Fatal("the Link has no eventfd: its readers wait in the runtime's poller")
	}
	if err := l.Hold(benchVIP4, benchVIP6); err != nil {
		t.Fatal(err)
	}
	reply := make([]byte, 1500)
	for _, tt := range []struct {
		name  string
		peer  int
		frame []byte
		want  int
	}{{"arp", arpPeer, arpReq, wire.ARPLen}, {"ns", ip6Peer, ns, naFrameLen}} {
		for i := range 3 {
			if _, err := unix.Write(tt.peer, tt.frame); err != nil {
				t.Fatal(err)
			}
			if err := unix.SetsockoptTimeval(tt.peer, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 2}); err != nil {
				t.Fatal(err)
			}
			n, err := unix.Read(tt.peer, reply)
			if err != nil || n != tt.want {
				t.Fatalf("%s request %d: reply of %d bytes (%v), want %d", tt.name, i, n, err, tt.want)
			}
		}
	}
	// The Link counts an answer after writing it: the last may lag the
	// reply read here.
	for deadline := time.Now().Add(2 * time.Second); l.Stats().Answered != 6; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("answered %d, want 6", l.Stats().Answered)
		}
	}
	// Both readers now wait in poll.
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not return within 2s: a reader is still in poll")
	}
	t.Logf("Close returned in %v", time.Since(start))
	// The peers' ends (closed by the test's cleanup) stay; the Link's
	// conns, their duplicates and the eventfd are gone.
	if after := openFDs(t); after != fdsBefore+2 {
		t.Errorf("open descriptors: %d before, %d after Close; want only the 2 peer ends more", fdsBefore, after)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("count descriptors: %v", err)
	}
	return len(ents)
}

// TestPollIOBatches reads more frames than one batch holds in two
// batches, in order, and sends a batch of replies in one go.
func TestPollIOBatches(t *testing.T) {
	peer, end := benchSocketPair(t)
	rc, err := end.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(wake)
	p, err := newPollIO(rc, wake)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	const n = batchSize + batchSize/2
	for i := range n {
		if _, err := unix.Write(peer, []byte{byte(i), 1, 2, 3}); err != nil {
			t.Fatal(err)
		}
	}
	next := 0
	for _, want := range []int{batchSize, n - batchSize} {
		got, err := p.ReadBatch()
		if err != nil || got != want {
			t.Fatalf("ReadBatch: %d frames (%v), want %d", got, err, want)
		}
		for i := range got {
			if f := p.Frame(i); len(f) != 4 || f[0] != byte(next) {
				t.Fatalf("frame %d: %x, want %02x010203", next, f, next)
			}
			next++
		}
	}
	for i := range 3 {
		b := p.Slot()
		b[0] = byte(10 + i)
		p.Queue(1 + i)
	}
	if sent, err := p.Flush(); sent != 3 || err != nil {
		t.Fatalf("Flush: %d sent (%v), want 3", sent, err)
	}
	buf := make([]byte, 64)
	for i := range 3 {
		m, err := unix.Read(peer, buf)
		if err != nil || m != 1+i || buf[0] != byte(10+i) {
			t.Fatalf("reply %d: %x (%v), want %d bytes starting %02x", i, buf[:max(m, 0)], err, 1+i, 10+i)
		}
	}
}

// TestLinkAnswersInBatches sends more requests than one batch holds at
// once: every one is answered, once, and counted.
func TestLinkAnswersInBatches(t *testing.T) {
	arpReq, _ := benchRequests(t)
	peer, arpEnd := benchSocketPair(t)
	l := benchLink(t, arpEnd, newFakeConn())
	const n = batchSize*2 + 1
	for range n {
		if _, err := unix.Write(peer, arpReq); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.SetsockoptTimeval(peer, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 2}); err != nil {
		t.Fatal(err)
	}
	reply := make([]byte, 1500)
	for i := range n {
		m, err := unix.Read(peer, reply)
		if err != nil || m != wire.ARPLen {
			t.Fatalf("reply %d of %d: %d bytes (%v), want %d", i+1, n, m, err, wire.ARPLen)
		}
	}
	if err := unix.SetsockoptTimeval(peer, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100_000}); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Read(peer, reply); err == nil {
		t.Errorf("a reply more than the %d requests", n)
	}
	for deadline := time.Now().Add(2 * time.Second); l.Stats().Answered != n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v: want %d answers", l.Stats(), n)
		}
	}
}
