package labtest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/pcapgo"

	"github.com/vipctl/vip/internal/lab"
)

// listenTimeout bounds how long Capture waits for tcpdump to start listening.
const listenTimeout = 5 * time.Second

// Cap is a tcpdump capture running inside a lab host, started by Capture.
type Cap struct {
	proc    *Proc
	file    string
	packets []gopacket.Packet // set by Packets once tcpdump has stopped
	stopped bool
}

// Capture starts tcpdump on interface iface of host h, with an optional
// filter expression, e.g. Capture(t, h, "eth0", "arp"), and returns once
// tcpdump is listening, so that every packet sent after Capture returns is
// seen. Each packet is written to the capture file as soon as it arrives, with
// a nanosecond timestamp. The capture stops when Packets is called, or when the
// test ends.
//
// A new lab is not silent: for about a second after it comes up, hosts send
// MLD reports for their solicited-node groups and the bridge IGMP reports for
// 224.0.0.106. Give a filter, or look for the packets the test is about rather
// than counting all of them.
func Capture(t TB, h *lab.Host, iface string, filter ...string) *Cap {
	t.Helper()
	RequireTool(t, "tcpdump")
	c := &Cap{file: filepath.Join(t.TempDir(), fmt.Sprintf("%s-%s.pcap", h.Name, iface))}
	args := []string{
		"-i", iface,
		"-n",
		"-w", c.file,
		"-U",               // write each packet out as it arrives, so Snapshot sees it
		"--immediate-mode", // and hand it over from the kernel at once
		"--time-stamp-precision=nano",
	}
	c.proc = Start(t, h, "tcpdump", append(args, filter...)...)
	// tcpdump says so once the socket is open with its filter attached.
	c.proc.WaitOutput(t, "listening on", listenTimeout)
	return c
}

// Packets stops tcpdump and returns every packet it captured, in order, each
// with its capture timestamp in Metadata().Timestamp. The test fails if
// tcpdump reports that the kernel dropped packets, since a test looking for
// the absence of a packet could then pass wrongly. Later calls return the same
// packets.
func (c *Cap) Packets(t TB) []gopacket.Packet {
	t.Helper()
	if c.stopped {
		return c.packets
	}
	c.stopped = true
	// tcpdump finishes the file and prints its counts on SIGINT.
	if code := c.proc.stop(t, syscall.SIGINT); code != 0 {
		t.Fatalf("tcpdump exited with status %d; output:\n%s", code, c.proc.Output())
	}
	if n := droppedByKernel(c.proc.Output()); n != 0 {
		t.Errorf("tcpdump: the kernel dropped %d packets; the capture is incomplete", n)
	}
	packets, err := readPcap(c.file, false)
	if err != nil {
		t.Fatalf("read capture: %v", err)
	}
	c.packets = packets
	return packets
}

// Snapshot returns the packets captured so far without stopping tcpdump, for
// use inside Eventually. A packet tcpdump is writing at that moment is left
// for the next call.
func (c *Cap) Snapshot(t TB) []gopacket.Packet {
	t.Helper()
	if c.stopped {
		return c.packets
	}
	packets, err := readPcap(c.file, true)
	if err != nil {
		t.Fatalf("read capture so far: %v", err)
	}
	return packets
}

var droppedRE = regexp.MustCompile(`(?m)^(\d+) packets? dropped by kernel`)

func droppedByKernel(output string) int {
	m := droppedRE.FindStringSubmatch(output)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// readPcap decodes the pcap file at path. With partial set it accepts a file
// that ends inside a packet, or before the file header, as tcpdump may still
// be writing it.
func readPcap(path string, partial bool) ([]gopacket.Packet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	truncated := func(err error) bool {
		return partial && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF))
	}
	r, err := pcapgo.NewReader(f)
	if truncated(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var packets []gopacket.Packet
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) || truncated(err) {
			return packets, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: packet %d: %w", path, len(packets)+1, err)
		}
		p := gopacket.NewPacket(data, r.LinkType(), gopacket.Default)
		p.Metadata().CaptureInfo = ci
		packets = append(packets, p)
	}
}
