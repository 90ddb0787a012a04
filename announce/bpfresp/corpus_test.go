package bpfresp

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/mdlayher/arp"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/wire"
	"github.com/vipctl/vip/test/labtest"
	"github.com/vipctl/vip/test/wiretest"
)

// Return codes of the programs (linux/pkt_cls.h, linux/bpf.h).
const (
	tcOK       = 0
	tcRedirect = 7
	xdpPass    = 2
	xdpTX      = 3
)

// testIfindex is the interface BPF_PROG_TEST_RUN runs a program on: the
// loopback device of the test's network namespace.
const testIfindex = 1

// memConn is a FrameConn in memory: frames written to in are read, frames
// the reader writes arrive on out.
type memConn struct {
	in, out chan []byte
	done    chan struct{}
	once    sync.Once
}

func newMemConn() *memConn {
	return &memConn{in: make(chan []byte), out: make(chan []byte, 4), done: make(chan struct{})}
}

func (c *memConn) ReadFrom(b []byte) (int, net.Addr, error) {
	select {
	case f := <-c.in:
		return copy(b, f), nil, nil
	case <-c.done:
		return 0, nil, net.ErrClosed
	}
}

func (c *memConn) WriteTo(b []byte, _ net.Addr) (int, error) {
	select {
	case c.out <- append([]byte(nil), b...):
		return len(b), nil
	case <-c.done:
		return 0, net.ErrClosed
	}
}

func (c *memConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return nil
}

type nopJoiner struct{}

func (nopJoiner) JoinGroup(netip.Addr) error  { return nil }
func (nopJoiner) LeaveGroup(netip.Addr) error { return nil }
func (nopJoiner) Close() error                { return nil }

// socketOracle is the user-space responder (an announce.Link answering on
// in-memory sockets) asked frame by frame: what it answers is what the
// program must answer.
type socketOracle struct {
	t         *testing.T
	arp, ip6  *memConn
	sentinels [2][]byte // a request on each socket that is answered
}

// answerTimeout bounds the wait for the socket responder's answer to a
// sentinel; it comes at once, so only a broken responder meets it.
const answerTimeout = 10 * time.Second

func newSocketOracle(t *testing.T) *socketOracle {
	t.Helper()
	o := &socketOracle{t: t, arp: newMemConn(), ip6: newMemConn()}
	l := announce.NewLink(&net.Interface{Index: testIfindex, Name: "corpus0", HardwareAddr: wiretest.CorpusMAC}, announce.LinkConfig{
		ARP: o.arp, IPv6: o.ip6,
		Groups: func() (announce.GroupJoiner, error) { return nopJoiner{}, nil },
	})
	t.Cleanup(func() { l.Close() })
	if err := l.Hold(wiretest.CorpusHeld4, wiretest.CorpusHeld6); err != nil {
		t.Fatal(err)
	}
	// The sentinels ask from an address no corpus frame uses, so their
	// answers are told apart from the frame's.
	asker := net.HardwareAddr{0x02, 0x00, 0x5e, 0x00, 0x53, 0xfe}
	a, err := wiretest.ARPFrame(wire.Broadcast, asker, arp.OperationRequest, asker, netip.MustParseAddr("192.0.2.254"), make(net.HardwareAddr, 6), wiretest.CorpusHeld4)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, wire.NDLenWithLinkLayer)
	ns := wire.ND{Type: wire.TypeNeighborSolicitation, Src: netip.MustParseAddr("2001:db8::fe"), Dst: wire.SolicitedNode(wiretest.CorpusHeld6),
		Target: wiretest.CorpusHeld6, LinkLayer: wire.MAC(asker), HasLinkLayer: true}
	n := wire.PutND(b, wire.GroupMAC(ns.Dst), wire.MAC(asker), &ns)
	o.sentinels = [2][]byte{a, b[:n]}
	return o
}

// answer returns the socket responder's answer to frame, or nil. The frame
// goes to both sockets (their kernel filters check nothing the codec does
// not), each followed by its sentinel: the reader is sequential, so what it
// writes before the sentinel's answer is the frame's.
func (o *socketOracle) answer(frame []byte) []byte {
	o.t.Helper()
	var got [][]byte
	for i, c := range []*memConn{o.arp, o.ip6} {
		for _, f := range [][]byte{frame, o.sentinels[i]} {
			select {
			case c.in <- f:
			case <-time.After(answerTimeout):
				o.t.Fatal("the socket responder stopped reading")
			}
		}
		for done := false; !done; {
			select {
			case out := <-c.out:
				if isAnswerTo(out, o.sentinels[i]) {
					done = true
					continue
				}
				got = append(got, out)
			case <-time.After(answerTimeout):
				o.t.Fatalf("the socket responder did not answer its sentinel within %v", answerTimeout)
			}
		}
	}
	if len(got) > 1 {
		o.t.Fatalf("the socket responder answered one frame %d times", len(got))
	}
	if len(got) == 0 {
		return nil
	}
	return got[0]
}

// isAnswerTo reports whether out is addressed to the sender of request.
func isAnswerTo(out, request []byte) bool {
	return bytes.Equal(out[0:6], request[6:12])
}

// errNotRun is runProgram's error for a frame BPF_PROG_TEST_RUN refuses
// to run a program on.
var errNotRun = errors.New("BPF_PROG_TEST_RUN takes no such frame")

// runProgram runs r's program on frame with BPF_PROG_TEST_RUN and returns
// its answer, or nil when it passes the frame on (untouched: it checks).
func runProgram(t *testing.T, r *Responder, frame []byte) ([]byte, error) {
	t.Helper()
	if len(frame) < wire.EthernetHeaderLen {
		return nil, errNotRun
	}
	prog := r.prog
	ret, out, err := prog.Test(frame)
	// For tc, the kernel builds an skb and refuses an IPv6 frame shorter
	// than an IPv6 header; XDP runs it.
	if errors.Is(err, unix.EINVAL) && r.hook == TCX && len(frame) < wire.ICMPv6Offset {
		return nil, errNotRun
	}
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	pass, answered := uint32(tcOK), uint32(tcRedirect)
	if r.hook != TCX {
		pass, answered = xdpPass, xdpTX
	}
	switch ret {
	case answered:
		return out, nil
	case pass:
		if !bytes.Equal(out, frame) {
			t.Errorf("the program passed the frame on changed:\n got % x\nwant % x", out, frame)
		}
		return nil, nil
	}
	t.Fatalf("the program returned %d, want %d (answered) or %d (passed on)", ret, answered, pass)
	return nil, nil
}

// requireBPF skips the test (fails it under CI=true) where programs cannot
// be loaded, and returns a responder of hook, loaded but not attached,
// holding the corpus's addresses on the test-run interface.
func requireBPF(t *testing.T, hook Hook) *Responder {
	t.Helper()
	labtest.RequireRoot(t, "loading eBPF programs")
	me, _ := wire.MACOf(wiretest.CorpusMAC)
	r, err := loadDetached("lo", testIfindex, me, hook, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if err := r.Hold(wiretest.CorpusHeld4, wiretest.CorpusHeld6); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCorpusAgreesWithSocketResponder runs every frame of the shared
// corpus through the user-space responder and through the program on each
// hook: both answer, byte for byte the same, or neither does.
func TestCorpusAgreesWithSocketResponder(t *testing.T) {
	oracle := newSocketOracle(t)
	for _, hook := range []Hook{TCX, XDPGeneric} {
		r := requireBPF(t, hook)
		for _, c := range wiretest.Corpus() {
			t.Run(hook.String()+"/"+c.Name, func(t *testing.T) {
				want := oracle.answer(c.Frame)
				if (want != nil) != c.Answer {
					t.Errorf("the socket responder answers: %v, the corpus says %v", want != nil, c.Answer)
				}
				got, err := runProgram(t, r, c.Frame)
				if errors.Is(err, errNotRun) {
					t.Logf("%v (%d bytes): the socket responder's answer alone is checked", err, len(c.Frame))
					return
				}
				if !bytes.Equal(got, want) {
					t.Errorf("the program answers\n% x\nthe socket responder\n% x", got, want)
				}
			})
		}
	}
}
