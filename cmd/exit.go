package cmd

import (
	"errors"
	"fmt"
	"os"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/netcheck"
	"github.com/vipctl/vip/internal/store"
)

// errHeld makes a claim exit 5 when another node holds an address.
var errHeld = errors.New("held by another node")

// errUnguarded makes status --check exit 3 while a guarded claim is fenced
// or lost: this host does not answer for it as asked.
var errUnguarded = errors.New("not answered here")

// ExitCode is what vip exits with; scripts rely on these values.
type ExitCode int

// The exit codes, one table in the README.
const (
	ExitOK          ExitCode = 0 // success
	ExitFailure     ExitCode = 1 // the operation failed
	ExitBadInput    ExitCode = 2 // bad flags, addresses or interfaces
	ExitConflict    ExitCode = 3 // a competing claimer is present, a guarded claim is fenced or lost, probe --expect saw another owner, or drain's node still gets traffic
	ExitUnreachable ExitCode = 4 // the agent or the store is unreachable
	ExitHeld        ExitCode = 5 // another node holds the address in the store
	ExitDenied      ExitCode = 6 // the store denied this user the request: its roles lack the permission
)

// inputError marks an error in what the user typed: exit 2.
type inputError struct{ err error }

func (e *inputError) Error() string { return e.err.Error() }
func (e *inputError) Unwrap() error { return e.err }

func badInput(format string, args ...any) error {
	return &inputError{err: fmt.Errorf(format, args...)}
}

// permissionError says which privilege is missing and how to grant it.
type permissionError struct{ err error }

func (e *permissionError) Error() string {
	exe, err := os.Executable()
	if err != nil {
		exe = "$(command -v vip)"
	}
	return fmt.Sprintf("%v: vip needs root or the CAP_NET_RAW capability to send and read ARP and NDP; run it with sudo, or grant it once with \"sudo setcap cap_net_raw+ep %s\"", e.err, exe)
}
func (e *permissionError) Unwrap() error { return e.err }

// exitCode maps err to the exit code and wraps it for display.
func exitCode(err error) (ExitCode, error) {
	var (
		in     *inputError
		remote *api.RemoteError
		child  *exitError
		denied *store.DeniedError
	)
	switch {
	case err == nil:
		return ExitOK, nil
	case errors.As(err, &child):
		return ExitCode(child.code), nil
	case errors.As(err, &in), errors.Is(err, netcheck.ErrInvalid):
		return ExitBadInput, err
	case errors.Is(err, errConflict), errors.Is(err, errUnguarded), errors.Is(err, errUnexpected), errors.Is(err, errNotQuiet), errors.Is(err, errUncounted):
		return ExitConflict, err
	case errors.Is(err, errHeld):
		return ExitHeld, err
	case errors.Is(err, store.ErrCredentials), errors.Is(err, store.ErrConfig):
		return ExitBadInput, err
	case errors.As(err, &denied):
		// A move of many addresses is refused once per address, for the
		// same reason: say it once.
		return ExitDenied, denied
	case errors.As(err, &remote):
		switch remote.Code {
		case api.CodeBadInput, api.CodeTooLarge, api.CodeNoStore:
			// An agent without a store cannot take --standby or
			// --take-over: the fix is in the flags (or in how the
			// agent was started), and nothing was applied.
			return ExitBadInput, err
		case api.CodeHeld:
			return ExitHeld, err
		}
		return ExitFailure, err
	case errors.Is(err, store.ErrUnreachable), errors.Is(err, errStreamEnded):
		return ExitUnreachable, err
	case errors.Is(err, api.ErrUnreachable):
		return ExitUnreachable, fmt.Errorf("%w: start one with \"sudo vip agent\", or let vip claim start one (without --no-autostart)", err)
	case errors.Is(err, api.ErrSocketDenied):
		return ExitUnreachable, fmt.Errorf("%w: run vip with sudo, or have the agent started with --group and join that group", err)
	case errors.Is(err, announce.ErrKernelUnavailable):
		// --responder ebpf where eBPF cannot run: the sentence names the
		// capabilities itself, which are not CAP_NET_RAW's.
		return ExitFailure, err
	case errors.Is(err, os.ErrPermission):
		return ExitFailure, &permissionError{err: err}
	}
	return ExitFailure, err
}
