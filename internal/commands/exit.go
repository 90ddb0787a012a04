package commands

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

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

// The exit codes. exitCodes describes each, commandExits says which each
// command returns, and the README's table and each command's help are made
// from those two.
const (
	ExitOK          ExitCode = 0 // success
	ExitFailure     ExitCode = 1 // the operation failed
	ExitBadInput    ExitCode = 2 // bad flags, addresses or interfaces
	ExitConflict    ExitCode = 3 // a competing claimer is present, a guarded claim is fenced or lost, probe --expect saw another owner, or drain's node still gets traffic
	ExitUnreachable ExitCode = 4 // the agent or the store is unreachable
	ExitHeld        ExitCode = 5 // another node holds the address in the store
	ExitDenied      ExitCode = 6 // the store denied this user the request: its roles lack the permission
)

// exitInfo describes one exit code for the README and the help.
type exitInfo struct {
	Code ExitCode
	// Name is a word or two for the code, as scripts might call it.
	Name string
	// Meaning says when vip exits with the code.
	Meaning string
}

// exitCodes is every code exitCode returns, in order.
var exitCodes = []exitInfo{
	{ExitOK, "ok", "success"},
	{ExitFailure, "failure", "the operation failed (for example missing privileges)"},
	{ExitBadInput, "bad input", "bad flags, addresses, interfaces or store settings; credentials the store refuses (a wrong user or password, none where it asks for them, a client certificate or CA it does not take)"},
	{ExitConflict, "conflict", "a competing claimer is present, a guarded claim is fenced or lost, an address is not answered by the expected owner alone (--expect), the drained node still gets traffic at --timeout, or a proof of vip lab demo --fleet failed"},
	{ExitUnreachable, "unreachable", "the agent or the store does not answer: no agent answers on the socket, the socket is not open to this user, the agent ended the event stream, or the store does not answer"},
	{ExitHeld, "held", "another node holds the address in the store (a claim on a guarded agent): move it with vip move, or claim --take-over"},
	{ExitDenied, "denied", "the store denied this user the request: its roles lack the permission"},
}

// commandExits lists the codes each command returns, by command path. Every
// command returns 0, 1 and 2 (a bad flag is 2 everywhere); a test checks
// that every command is here and every code is in exitCodes.
var commandExits = map[string][]ExitCode{
	"vip":                {ExitOK, ExitFailure, ExitBadInput},
	"vip claim":          {ExitOK, ExitFailure, ExitBadInput, ExitUnreachable, ExitHeld, ExitDenied},
	"vip release":        {ExitOK, ExitFailure, ExitBadInput, ExitUnreachable, ExitDenied},
	"vip refresh":        {ExitOK, ExitFailure, ExitBadInput, ExitUnreachable},
	"vip status":         {ExitOK, ExitFailure, ExitBadInput, ExitConflict, ExitUnreachable},
	"vip events":         {ExitOK, ExitFailure, ExitBadInput, ExitUnreachable},
	"vip agent":          {ExitOK, ExitFailure, ExitBadInput, ExitUnreachable, ExitDenied},
	"vip watch":          {ExitOK, ExitFailure, ExitBadInput, ExitUnreachable},
	"vip move":           {ExitOK, ExitFailure, ExitBadInput, ExitUnreachable, ExitDenied},
	"vip fleet":          {ExitOK, ExitFailure, ExitBadInput, ExitUnreachable, ExitDenied},
	"vip cordon":         {ExitOK, ExitFailure, ExitBadInput, ExitUnreachable, ExitDenied},
	"vip uncordon":       {ExitOK, ExitFailure, ExitBadInput, ExitUnreachable, ExitDenied},
	"vip drain":          {ExitOK, ExitFailure, ExitBadInput, ExitConflict, ExitUnreachable, ExitDenied},
	"vip failsafe":       {ExitOK, ExitFailure, ExitBadInput, ExitUnreachable, ExitDenied},
	"vip failsafe clear": {ExitOK, ExitFailure, ExitBadInput, ExitUnreachable, ExitDenied},
	"vip standby":        {ExitOK, ExitFailure, ExitBadInput, ExitUnreachable, ExitDenied},
	"vip probe":          {ExitOK, ExitFailure, ExitBadInput, ExitConflict, ExitUnreachable, ExitDenied},
	"vip history":        {ExitOK, ExitFailure, ExitBadInput, ExitUnreachable, ExitDenied},
	"vip version":        {ExitOK, ExitFailure, ExitBadInput},
	"vip lab":            {ExitOK, ExitFailure, ExitBadInput},
	"vip lab up":         {ExitOK, ExitFailure, ExitBadInput},
	"vip lab down":       {ExitOK, ExitFailure, ExitBadInput},
	"vip lab exec":       {ExitOK, ExitFailure, ExitBadInput},
	"vip lab demo":       {ExitOK, ExitFailure, ExitBadInput, ExitConflict},
}

// passesExit names the commands that exit with the code of a command they
// run, besides their own.
var passesExit = map[string]bool{"vip lab exec": true}

// exitInfoOf returns the description of code.
func exitInfoOf(code ExitCode) (exitInfo, bool) {
	for _, e := range exitCodes {
		if e.Code == code {
			return e, true
		}
	}
	return exitInfo{}, false
}

// exitStatus is the "Exit status" section of path's help.
func exitStatus(path string) string {
	var b strings.Builder
	b.WriteString("Exit status:\n")
	for _, code := range commandExits[path] {
		e, _ := exitInfoOf(code)
		fmt.Fprintf(&b, "  %d  %s: %s\n", code, e.Name, e.Meaning)
	}
	if passesExit[path] {
		b.WriteString("  and the exit status of the command it ran\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// addExitStatus ends the long help of c and its subcommands with the codes
// each returns, so that --help and the man pages list them.
func addExitStatus(c *cobra.Command) {
	if _, ok := commandExits[c.CommandPath()]; ok {
		long := c.Long
		if long == "" {
			long = c.Short + "."
		}
		c.Long = long + "\n\n" + exitStatus(c.CommandPath())
	}
	for _, sub := range c.Commands() {
		addExitStatus(sub)
	}
}

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
	case errors.Is(err, errConflict), errors.Is(err, errUnguarded), errors.Is(err, errUnexpected), errors.Is(err, errNotQuiet), errors.Is(err, errUncounted), errors.Is(err, errProofFailed):
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
		case api.CodeCredentials:
			// The agent's own credentials: the fix is in how it was
			// started, as for the CLI's (store.ErrCredentials).
			return ExitBadInput, err
		case api.CodeDenied:
			return ExitDenied, err
		case api.CodeStoreUnreachable:
			return ExitUnreachable, err
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
