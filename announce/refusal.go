package announce

import (
	"fmt"
	"net/netip"
	"strings"
)

// Refusal is an address that a claim did not take, and why.
type Refusal struct {
	Addr netip.Addr
	Err  error
}

// RefusedError says which addresses of a claim were refused; the others
// were claimed. Engine.Claim returns one beside the statuses of what it
// claimed, and a Book's Put may return one to refuse some addresses (held
// by another host) while it records the others. errors.Is and errors.As see
// each refusal's error.
type RefusedError struct {
	Refused []Refusal
}

// maxRefusalsShown bounds the refusals one error message names.
const maxRefusalsShown = 3

func (e *RefusedError) Error() string {
	var b strings.Builder
	for i, r := range e.Refused {
		if i == maxRefusalsShown {
			fmt.Fprintf(&b, "; and %d more", len(e.Refused)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(r.Err.Error())
	}
	return b.String()
}

// Unwrap returns each refusal's error.
func (e *RefusedError) Unwrap() []error {
	out := make([]error, len(e.Refused))
	for i, r := range e.Refused {
		out[i] = r.Err
	}
	return out
}

// byAddr returns the error of each refusal in e by its address; nil when e
// is nil.
func (e *RefusedError) byAddr() map[netip.Addr]error {
	if e == nil {
		return nil
	}
	out := make(map[netip.Addr]error, len(e.Refused))
	for _, r := range e.Refused {
		out[r.Addr] = r.Err
	}
	return out
}
