package bpfresp

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/labtest"
)

// TestClassify: each way the machine refuses the program is one sentence
// that names the fix and wraps ErrUnavailable; other failures do not.
func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		name        string
		err         error
		hook        Hook
		unavailable bool
		says        string
	}{
		{"no privileges", fmt.Errorf("load program: %w", unix.EPERM), TCX, true, "needs CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN"},
		{"no CAP_PERFMON", fmt.Errorf("load: %w", &ebpf.VerifierError{Cause: unix.EACCES, Log: []string{"274: (0f) r3 += r1", "R3 tried to add from different maps, paths or scalars, pointer arithmetic with it prohibited for !root"}}), TCX, true, "needs CAP_PERFMON besides CAP_BPF and CAP_NET_ADMIN"},
		{"old kernel, tcx", fmt.Errorf("attach: %w", ebpf.ErrNotSupported), TCX, true, "tcx needs Linux 6.6"},
		{"old kernel, XDP", fmt.Errorf("load: %w", ebpf.ErrNotSupported), XDPGeneric, true, "upgrade the kernel"},
		{"XDP hook taken", fmt.Errorf("attach: %w", unix.EBUSY), XDPGeneric, true, "another program owns the XDP hook"},
		{"no native XDP", fmt.Errorf("attach: %w", unix.EOPNOTSUPP), XDPNative, true, "no native XDP"},
		{"interface gone", fmt.Errorf("attach: %w", unix.ENODEV), TCX, true, "is gone"},
		{"verifier", fmt.Errorf("load: %w", &ebpf.VerifierError{}), TCX, true, "verifier refuses"},
		{"anything else", errors.New("out of cheese"), TCX, false, "load on eth9: out of cheese"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := classify(tt.err, "eth9", tt.hook, "load")
			if got := errors.Is(err, ErrUnavailable); got != tt.unavailable {
				t.Errorf("errors.Is(%q, ErrUnavailable): got %v, want %v", err, got, tt.unavailable)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.says) || !strings.Contains(msg, "eth9") || strings.HasSuffix(msg, ".") || msg != strings.ToLower(msg[:1])+msg[1:] {
				t.Errorf("got %q, want one lowercase sentence naming eth9 that says %q", msg, tt.says)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("got %q, which does not wrap its cause %q", err, tt.err)
			}
		})
	}
	if err := unavailable(nil, "x"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("unavailable without a cause: got %v, want ErrUnavailable", err)
	}
}

// TestOpenRefusesNonEthernet: an interface without a 6-byte MAC is
// unavailable, before anything is loaded.
func TestOpenRefusesNonEthernet(t *testing.T) {
	_, err := Open("tun0", 9, nil, TCX, nil)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no Ethernet address") {
		t.Errorf("got %v, want ErrUnavailable saying there is no Ethernet address", err)
	}
	if _, err := Open("eth0", 9, net.HardwareAddr{2, 0, 0, 0, 0, 1}, Hook(9), nil); err == nil || errors.Is(err, ErrUnavailable) {
		t.Errorf("unknown hook: got %v, want an error that is not ErrUnavailable", err)
	}
}

// TestLabXDPHookTaken: another program on the XDP hook makes the XDP
// responder unavailable, and says so; tcx is unaffected.
func TestLabXDPHookTaken(t *testing.T) {
	l := labtest.New(t, lab.HostConfig{Name: "b"})
	b := l.Host("b")
	eth0 := labtest.Link(b, "eth0")
	other, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "other", Type: ebpf.XDP, License: "MIT",
		Instructions: asm.Instructions{asm.LoadImm(asm.R0, 2, asm.DWord), asm.Return()}, // XDP_PASS
	})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var lk link.Link
	if err := labtest.Do(b, func() (err error) {
		lk, err = link.AttachXDP(link.XDPOptions{Program: other, Interface: eth0.Index, Flags: link.XDPGenericMode})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	err = labtest.Do(b, func() error {
		r, err := Open("eth0", eth0.Index, eth0.MAC, XDPGeneric, nil)
		if err == nil {
			r.Close()
		}
		return err
	})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "another program owns the XDP hook on eth0") {
		t.Errorf("Open with the XDP hook taken: got %v, want ErrUnavailable saying another program owns it", err)
	}
	openOn(t, b, TCX)
}

// TestLabWithoutCapabilities: a process without capabilities is told
// which ones it needs, as ErrUnavailable.
func TestLabWithoutCapabilities(t *testing.T) {
	labtest.RequireTool(t, "setpriv")
	l := labtest.New(t, lab.HostConfig{Name: "b"})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := labtest.Start(t, l.Host("b"), "setpriv", "--inh-caps=-all", "--bounding-set=-all", "env", childEnv+"=eth0", self)
	if code := p.Wait(t, 10*time.Second); code != 1 {
		t.Fatalf("the child without capabilities: got exit %d, want 1:\n%s", code, p.Output())
	}
	if out := p.Output(); !strings.Contains(out, "needs CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN: run vip as root or grant it those capabilities") || !strings.Contains(out, "(unavailable: true)") {
		t.Errorf("the child without capabilities said:\n%s\nwant the capabilities it needs, as ErrUnavailable", out)
	}
}
