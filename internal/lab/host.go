package lab

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Command returns a command that runs name with args inside the host's
// namespace. It runs through `ip netns exec`, which execs name in place, so
// the command's process is name itself and signals sent to it reach name.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.Netns, name}, args...)...)
}

// Run runs name with args inside the host's namespace and returns its
// combined output. If the command fails, the error includes the output.
func (h *Host) Run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := h.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s on %s: %w: %s", strings.Join(append([]string{name}, args...), " "), h.Name, err, bytes.TrimSpace(out))
	}
	return string(out), nil
}
