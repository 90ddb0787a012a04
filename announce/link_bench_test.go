package announce

import (
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ndp"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/internal/wire"
	"github.com/vipctl/vip/test/wiretest"
)

// The benchmarks here answer a request through a whole Link: its reader
// goroutine takes the frame from a conn, answers, and writes the reply back,
// and the benchmark waits for the reply before it sends the next request.
// Documentation addresses only.
var (
	benchLinkMAC  = net.HardwareAddr{0x00, 0x00, 0x5e, 0x00, 0x53, 0x11}
	benchAskerMAC = net.HardwareAddr{0x00, 0x00, 0x5e, 0x00, 0x53, 0x12}
	benchVIP4     = netip.MustParseAddr("192.0.2.10")
	benchVIP6     = netip.MustParseAddr("2001:db8::10")
)

// benchRequests returns a who-has for benchVIP4 and a solicitation for
// benchVIP6, as a peer's kernel sends them.
func benchRequests(b testing.TB) (arpReq, ns []byte) {
	b.Helper()
	arpReq, err := wiretest.ARPFrame(wire.Broadcast, benchAskerMAC, arp.OperationRequest, benchAskerMAC,
		netip.MustParseAddr("192.0.2.3"), net.HardwareAddr{0, 0, 0, 0, 0, 0}, benchVIP4)
	if err != nil {
		b.Fatal(err)
	}
	g, err := ndp.SolicitedNodeMulticast(benchVIP6)
	if err != nil {
		b.Fatal(err)
	}
	ns, err = wiretest.NDPFrame(wiretest.MulticastMAC(g), benchAskerMAC, netip.MustParseAddr("2001:db8::3"), g,
		&ndp.NeighborSolicitation{
			TargetAddress: benchVIP6,
			Options:       []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: benchAskerMAC}},
		})
	if err != nil {
		b.Fatal(err)
	}
	return arpReq, ns
}

// benchInterface is the interface of the benchmarks' Links.
func benchInterface() *net.Interface {
	return &net.Interface{Index: 7, Name: "bench0", MTU: 1500, HardwareAddr: benchLinkMAC}
}

// benchLink returns a Link on the given conns holding both VIPs.
func benchLink(b testing.TB, arpc, ip6c FrameConn) *Link {
	b.Helper()
	l := NewLink(benchInterface(), LinkConfig{
		ARP:    arpc,
		IPv6:   ip6c,
		Groups: (&fakeGroups{joiner: &fakeJoiner{}}).open,
	})
	b.Cleanup(func() { l.Close() })
	if err := l.Hold(benchVIP4, benchVIP6); err != nil {
		b.Fatal(err)
	}
	return l
}

// BenchmarkLinkAnswer answers one request per op through a Link.
//
// fakeconn uses the tests' in-memory fakeConn: a request goes to the reader
// over a channel and the reply comes back over another. The fakeConn copies
// every frame and address it handles, and those copies are counted too;
// fakeconn-alone is the same round trip with a bare echo goroutine in the
// Link's place, so what the Link adds is the difference.
//
// socketpair gives the Link one end of a SOCK_DGRAM socket pair, so the
// reader waits in poll(2) and wakes to a real read, as on a packet socket; the benchmark writes and reads the other end with plain
// system calls, which allocate nothing, so allocs/op is the Link's own.
func BenchmarkLinkAnswer(b *testing.B) {
	arpReq, ns := benchRequests(b)
	for _, tt := range []struct {
		name  string
		frame []byte
		ip6   bool
	}{{"arp", arpReq, false}, {"ns", ns, true}} {
		b.Run(tt.name+"/fakeconn", func(b *testing.B) {
			arpc, ip6c := newFakeConn(), newFakeConn()
			c := arpc
			if tt.ip6 {
				c = ip6c
			}
			l := benchLink(b, arpc, ip6c)
			b.ReportAllocs()
			for b.Loop() {
				c.in <- fakeRead{frame: tt.frame}
				<-c.out
			}
			b.StopTimer()
			benchWaitAnswered(b, l, b.N)
		})
		b.Run(tt.name+"/fakeconn-alone", func(b *testing.B) {
			c := newFakeConn()
			done := make(chan struct{})
			go func() {
				defer close(done)
				buf := make([]byte, 1<<16)
				for {
					n, from, err := c.ReadFrom(buf)
					if err != nil {
						return
					}
					if _, err := c.WriteTo(buf[:n], from); err != nil {
						return
					}
				}
			}()
			b.Cleanup(func() { c.Close(); <-done })
			b.ReportAllocs()
			for b.Loop() {
				c.in <- fakeRead{frame: tt.frame}
				<-c.out
			}
		})
		b.Run(tt.name+"/socketpair", func(b *testing.B) {
			peer, linkEnd := benchSocketPair(b)
			quiet := newFakeConn()
			arpc, ip6c := FrameConn(linkEnd), FrameConn(quiet)
			if tt.ip6 {
				arpc, ip6c = quiet, linkEnd
			}
			l := benchLink(b, arpc, ip6c)
			reply := make([]byte, 1500)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := unix.Write(peer, tt.frame); err != nil {
					b.Fatal(err)
				}
				if _, err := unix.Read(peer, reply); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			benchWaitAnswered(b, l, b.N)
		})
	}
}

// benchWaitAnswered fails the benchmark unless l has counted n answers
// within a second: it counts each after writing it, so the last may lag
// the reply the benchmark read.
func benchWaitAnswered(b *testing.B, l *Link, n int) {
	b.Helper()
	deadline := time.Now().Add(time.Second)
	for l.Stats().Answered < uint64(n) {
		if time.Now().After(deadline) {
			b.Fatalf("answered %d of %d requests", l.Stats().Answered, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// pairConn is one end of a datagram socket pair dressed as a packet socket:
// reads and writes carry whole frames, the address is ignored (the pair has
// one peer), and SyscallConn gives the raw descriptor to whoever wants it.
type pairConn struct {
	c interface {
		Read([]byte) (int, error)
		Write([]byte) (int, error)
		Close() error
		SyscallConn() (syscall.RawConn, error)
	}
}

func (p *pairConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, err := p.c.Read(b)
	return n, nil, err
}

func (p *pairConn) WriteTo(b []byte, _ net.Addr) (int, error) { return p.c.Write(b) }
func (p *pairConn) Close() error                              { return p.c.Close() }
func (p *pairConn) SyscallConn() (syscall.RawConn, error)     { return p.c.SyscallConn() }

// benchSocketPair returns the benchmark's end of a SOCK_DGRAM socket pair,
// a blocking descriptor, and the Link's end as a conn in the runtime's
// poller.
func benchSocketPair(b testing.TB) (int, *pairConn) {
	b.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[1]), "link-end")
	c, err := net.FileConn(f)
	f.Close() // FileConn made its own descriptor
	if err != nil {
		unix.Close(fds[0])
		b.Fatal(err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		b.Fatalf("socket pair end: got %T, want *net.UnixConn", c)
	}
	b.Cleanup(func() { unix.Close(fds[0]) })
	return fds[0], &pairConn{c: uc}
}
