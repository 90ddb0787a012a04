// Package boottime reads CLOCK_BOOTTIME, the clock that the answer
// deadline of a guarded agent is kept on, in user space and in the eBPF
// program alike (bpf_ktime_get_boot_ns reads the same clock).
//
// Why this clock: it counts from boot and never stops, not while the
// process is stopped (SIGSTOP, a cgroup freezer, a starved CPU), nor while
// the machine is suspended or a virtual machine paused in a way the guest
// sees as a suspend. CLOCK_MONOTONIC, which Go's time.Now carries and
// bpf_ktime_get_ns reads, stops across a suspend: a host that slept past
// its lease would wake with a deadline still in the future on that clock,
// and answer for addresses another node holds by then. The wall clock can
// be stepped by NTP or an operator, forward or back.
package boottime

import (
	"time"

	"golang.org/x/sys/unix"
)

// Now returns CLOCK_BOOTTIME: the time since boot, suspends included. It
// never returns zero, which callers may use to mean "no time".
func Now() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		// Linux has had CLOCK_BOOTTIME since 2.6.39; a kernel without
		// it would fail here, and the deadline then closes at once
		// (see announce.Deadline), which is the safe side.
		return time.Duration(1<<63 - 1)
	}
	return max(time.Duration(ts.Nano()), 1)
}
