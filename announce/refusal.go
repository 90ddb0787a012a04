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
// claimed, and a guard in front of it (fleet.Member.Claim) returns one the
// same way. errors.Is and errors.As see each refusal's error.
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
