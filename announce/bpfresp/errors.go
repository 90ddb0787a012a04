package bpfresp

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/vipctl/vip/announce"
	"golang.org/x/sys/unix"
)

// ErrUnavailable is announce.ErrKernelUnavailable, which every error that
// says this responder cannot run here wraps (the kernel, the privileges,
// the interface or its hook refuse it), as opposed to a fault.
var ErrUnavailable = announce.ErrKernelUnavailable

// unavailableError is one reason the responder cannot run: a sentence for
// the user, ErrUnavailable to errors.Is, and the cause to errors.As.
type unavailableError struct {
	msg   string
	cause error
}

func (e *unavailableError) Error() string { return e.msg }

func (e *unavailableError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrUnavailable}
	}
	return []error{ErrUnavailable, e.cause}
}

func unavailable(cause error, format string, args ...any) error {
	return &unavailableError{msg: fmt.Sprintf(format, args...), cause: cause}
}

// classify turns an error from loading or attaching the program into one
// sentence that names the fix, wrapping ErrUnavailable when the cause is
// the machine rather than vip. what says what failed, for the others.
// Missing kernel BTF is no cause: the program uses no CO-RE, and cilium/ebpf
// leaves the maps' and programs' BTF out where the kernel has none. A
// kernel too old for a helper the program calls (bpf_loop: 5.17,
// bpf_xdp_load_bytes: 5.18) fails in the verifier.
func classify(err error, ifname string, hook Hook, what string) error {
	var ve *ebpf.VerifierError
	switch {
	case errors.As(err, &ve) && forRootOnly(ve):
		// The verifier's Spectre hardening refuses some of the
		// program's pointer arithmetic (EACCES) without CAP_PERFMON.
		return unavailable(err, "loading vip's eBPF program on %s needs CAP_PERFMON besides CAP_BPF and CAP_NET_ADMIN, for the verifier to allow its pointer arithmetic: run vip as root or grant it those capabilities", ifname)
	case errors.Is(err, unix.EPERM), errors.Is(err, os.ErrPermission):
		return unavailable(err, "loading an eBPF program on %s needs CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN: run vip as root or grant it those capabilities", ifname)
	case hook == TCX && errors.Is(err, ebpf.ErrNotSupported):
		return unavailable(err, "the kernel is too old for a tcx program on %s (tcx needs Linux 6.6): upgrade the kernel or use the socket responder", ifname)
	case errors.Is(err, ebpf.ErrNotSupported):
		return unavailable(err, "the kernel cannot run the eBPF responder on %s (%s needs Linux 5.18): upgrade the kernel or use the socket responder", ifname, hook)
	case hook != TCX && (errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EEXIST)):
		return unavailable(err, "another program owns the XDP hook on %s: detach it or use the tcx hook", ifname)
	case hook == XDPNative && errors.Is(err, unix.EOPNOTSUPP):
		return unavailable(err, "the driver of %s has no native XDP: use the xdp-generic or tcx hook", ifname)
	case errors.Is(err, unix.ENODEV):
		return unavailable(err, "interface %s is gone: claim on an interface that exists", ifname)
	}
	if errors.As(err, &ve) {
		// A program this kernel's verifier refuses is vip's fault on this
		// kernel, but the sockets still answer: say so, and let auto fall
		// back.
		return unavailable(err, "the kernel's verifier refuses vip's eBPF responder on %s: use the socket responder and report the kernel version", ifname)
	}
	return fmt.Errorf("%s on %s: %w", what, ifname, err)
}

// forRootOnly reports whether the verifier refused what it allows only a
// program loaded with CAP_PERFMON ("... prohibited for !root").
func forRootOnly(ve *ebpf.VerifierError) bool {
	for _, line := range ve.Log {
		if strings.Contains(line, "for !root") {
			return true
		}
	}
	return false
}
