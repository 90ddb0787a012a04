//go:build !cgo

package sniff

import (
	"fmt"
	"strings"

	"golang.org/x/net/bpf"
)

// maxKernelInsns is the longest classic BPF program Linux accepts
// (BPF_MAXINSNS).
const maxKernelInsns = 4096

// Filter returns the capture filter for a user's libpcap expression. This
// build has no libpcap to compile one, so it returns the BaseFilter for an
// empty expression, and for any other an error wrapping ErrNoLibpcap.
func Filter(user string) (string, error) {
	if strings.TrimSpace(user) == "" {
		return BaseFilter(), nil
	}
	return "", fmt.Errorf("capture filter %q needs libpcap, and %w: build it with CGO_ENABLED=1 and libpcap-dev, or leave the filter out", user, ErrNoLibpcap)
}

// userProgram would compile Filter(user) with libpcap; this build has none.
func userProgram(user string, snaplen int) ([]bpf.Instruction, error) {
	_, err := Filter(user)
	if err == nil {
		err = fmt.Errorf("capture filter %q needs libpcap, and %w", user, ErrNoLibpcap)
	}
	return nil, err
}
