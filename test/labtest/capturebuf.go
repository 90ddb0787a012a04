package labtest

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/vipctl/vip/internal/lab"
)

// CaptureBuffered is Capture with a kernel buffer of bufKiB KiB for
// tcpdump (-B), for a capture that must not drop a frame of a long run on
// a busy machine: Packets fails the test when the kernel dropped any.
func CaptureBuffered(t TB, h *lab.Host, iface string, bufKiB int, filter ...string) *Cap {
	t.Helper()
	RequireTool(t, "tcpdump")
	c := &Cap{file: filepath.Join(t.TempDir(), fmt.Sprintf("%s-%s.pcap", h.Name, iface))}
	args := []string{
		"-i", iface, "-n", "-w", c.file, "-U", "--immediate-mode", "--time-stamp-precision=nano",
		"-B", strconv.Itoa(bufKiB),
	}
	c.proc = Start(t, h, "tcpdump", append(args, filter...)...)
	c.proc.WaitOutput(t, "listening on", listenTimeout)
	return c
}
