package agent

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/announce/bpfresp"
	"github.com/vipctl/vip/internal/api"
)

// refusal is an eBPF refusal as bpfresp makes them.
type refusal struct{}

func (refusal) Error() string {
	return "loading an eBPF program on lo needs CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN"
}
func (refusal) Is(e error) bool { return e == bpfresp.ErrUnavailable }

// fakeResp is an opened eBPF responder; it answers nothing.
type fakeResp struct {
	announce.KernelResponder // unused methods
	closed                   bool
}

func (*fakeResp) Hold(...netip.Addr) error   { return nil }
func (*fakeResp) LetGo(...netip.Addr) error  { return nil }
func (*fakeResp) Answered(netip.Addr) uint64 { return 0 }
func (r *fakeResp) Close() error             { r.closed = true; return nil }

// fakePort is an opened port that says which responder it was given.
type fakePort struct {
	announce.Port // unused methods
	kind          string
}

// TestPortOpener: auto answers in the kernel where it may and on sockets
// where it may not, saying why once per interface; ebpf refuses; socket
// never tries eBPF; a port that fails to open closes the responder.
func TestPortOpener(t *testing.T) {
	tests := []struct {
		name      string
		mode      ResponderMode
		bpfErr    error
		linkErr   error
		want      string // "ebpf", "socket" or the error
		wantLog   string
		wantTries int
	}{
		{"auto where eBPF runs", ResponderAuto, nil, nil, "ebpf", "", 1},
		{"auto refused", ResponderAuto, refusal{}, nil, "socket", "the eBPF responder is unavailable: answering on packet sockets", 1},
		{"auto on a fault", ResponderAuto, errors.New("load the eBPF responder on lo: boom"), nil, "socket", "the eBPF responder failed: answering on packet sockets", 1},
		{"ebpf refused", ResponderEBPF, refusal{}, nil, "needs CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN", "", 1},
		{"socket", ResponderSocket, nil, nil, "socket", "", 0},
		{"port fails", ResponderAuto, nil, errors.New("open ARP socket on lo: denied"), "open ARP socket", "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			o := newPortOpener(ResponderConfig{Mode: tt.mode}, slog.New(slog.NewTextHandler(&logs, nil)))
			tries := 0
			var opened []*fakeResp
			o.openBPF = func(*net.Interface, bpfresp.Hook, *slog.Logger) (announce.KernelResponder, error) {
				tries++
				if tt.bpfErr != nil {
					return nil, tt.bpfErr
				}
				r := &fakeResp{}
				opened = append(opened, r)
				return r, nil
			}
			o.openLink = func(_ *net.Interface, resp announce.KernelResponder, _ *slog.Logger) (announce.Port, error) {
				if tt.linkErr != nil {
					return nil, tt.linkErr
				}
				kind := "socket"
				if resp != nil {
					kind = "ebpf"
				}
				return &fakePort{kind: kind}, nil
			}
			for range 2 { // twice: the fallback is said once
				p, err := o.open("lo")
				got := ""
				switch {
				case err != nil:
					got = err.Error()
				default:
					got = p.(*fakePort).kind
				}
				if !strings.Contains(got, tt.want) {
					t.Fatalf("got %q, want %q", got, tt.want)
				}
			}
			if tries != 2*tt.wantTries {
				t.Errorf("eBPF tried %d times in two opens, want %d", tries, 2*tt.wantTries)
			}
			if n := strings.Count(logs.String(), "answering on packet sockets"); (tt.wantLog == "" && n != 0) || (tt.wantLog != "" && (n != 1 || !strings.Contains(logs.String(), tt.wantLog))) {
				t.Errorf("logs:\n%s\nwant %q once", logs.String(), tt.wantLog)
			}
			if tt.linkErr != nil {
				for i, r := range opened {
					if !r.closed {
						t.Errorf("responder %d: not closed after its port failed", i)
					}
				}
			}
		})
	}
}

// TestClaimsShowTheResponder: a claim's responder is "kind (hook)" for an
// in-kernel one and the kind alone otherwise, and its traffic is there
// only where it is counted.
func TestClaimsShowTheResponder(t *testing.T) {
	st := []announce.Status{
		{Responder: "ebpf", Hook: "tcx", Traffic: &announce.Traffic{Packets: 3, Bytes: 294, PacketsPerSecond: 1, BytesPerSecond: 98}},
		{Responder: "ebpf", Hook: "xdp-generic", Traffic: &announce.Traffic{}},
		{Responder: announce.KindSocket},
		{},
	}
	want := []struct {
		responder string
		traffic   *api.ClaimTraffic
	}{
		{"ebpf (tcx)", &api.ClaimTraffic{Packets: 3, Bytes: 294, PacketsPerSecond: 1, BytesPerSecond: 98}},
		{"ebpf (xdp-generic)", &api.ClaimTraffic{}},
		{"socket", nil},
		{"", nil},
	}
	for i, c := range ClaimsFromStatus(st, time.Now()) {
		w := want[i]
		if c.Responder != w.responder || (c.Traffic == nil) != (w.traffic == nil) || (c.Traffic != nil && *c.Traffic != *w.traffic) {
			t.Errorf("claim %d: got responder %q traffic %+v, want %q and %+v", i, c.Responder, c.Traffic, w.responder, w.traffic)
		}
	}
}

// closingPort is a fakePort that says whether it was closed.
type closingPort struct {
	fakePort
	closed bool
}

func (p *closingPort) Close() error { p.closed = true; return nil }

// guardedPort is a closingPort that records the deadline it was guarded
// with.
type guardedPort struct {
	closingPort
	guard *announce.Deadline
	err   error
}

func (p *guardedPort) Guard(d *announce.Deadline) error { p.guard = d; return p.err }

// TestPortOpenerGuards: with a guarded agent's deadline, every port is
// given it before it is returned (so before it holds anything); a port
// that refuses it is closed and the open fails: a port that answers past
// the deadline must never be used.
func TestPortOpenerGuards(t *testing.T) {
	d := announce.NewDeadline(nil)
	tests := []struct {
		name    string
		port    *guardedPort
		wantErr string
	}{
		{"guarded", &guardedPort{}, ""},
		{"guard refused", &guardedPort{err: errors.New("write the answer deadline on lo: no map")}, "no map"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newPortOpener(ResponderConfig{Mode: ResponderSocket, Deadline: d}, nil)
			o.openLink = func(*net.Interface, announce.KernelResponder, *slog.Logger) (announce.Port, error) {
				return tt.port, nil
			}
			p, err := o.open("lo")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error saying %q", err, tt.wantErr)
				}
				if !tt.port.closed {
					t.Error("the port that could not be guarded was not closed")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p != announce.Port(tt.port) || tt.port.guard != d {
				t.Errorf("the port was guarded with %p, want the agent's deadline %p", tt.port.guard, d)
			}
		})
	}
}
