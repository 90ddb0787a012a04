package main

import (
	"fmt"
	"io"
)

// findings is what the profiles showed and what made the difference, as
// BENCHMARKS.md keeps it from run to run. Each item names the measurement
// it rests on (vipbench -short on this 2-core machine, before and after the
// change, or the profile taken with vipbench -agent-flags "--cpuprofile
// FILE"), so that a later run can check it still holds.
const findings = `## What made the difference

Profiles first (pprof through ` + "`vipbench -agent-flags \"--cpuprofile FILE\"`" + `, strace -c and perf on the agent), then one change at a time, each measured before and after with ` + "`vipbench -short -run …`" + ` on this machine.

- **Kernel filters narrowed to what is held.** The answer sockets have carried a per-target BPF filter since the start, so requests for other addresses never reach the readers. The capture had only the broad ARP/NDP filter: at 100,000 requests/s for an address nobody holds, every frame was copied to the agent, decoded and counted (profile: ` + "`Capture.Run`" + ` 63% of the agent's samples, table and detector a third of that), 10.2% / 10.9% of a core for IPv4 / IPv6. The capture's filter is now narrowed in the kernel to the addresses held on the interface (ARP sender or target, NDP target or source; up to 900 addresses, beyond which the agent narrows in user space): 0.3–0.6%. ` + "`vip agent --all-traffic`" + ` keeps the old behaviour for operators who want the whole segment's who-has traffic.
- **No waiting inside C.** gopacket waits for frames in poll(2) inside a C call. While a goroutine sits in C the runtime's monitor thread wakes every 20 µs for up to 10 ms (strace on the idle agent: 530 nanosleeps a second), which cost 0.25–0.63% of a core with nothing happening. The capture now reads with non-blocking ` + "`pcap_next_ex`" + ` and waits on libpcap's descriptor in the Go poller, with no deadline (Run interrupts it when its context ends): idle with one claim went to 0 ticks of CPU in 60 s, about 20 system calls a second. The kernel also leaves out the frames the host sends itself (PACKET_IGNORE_OUTGOING) instead of libpcap copying and dropping them.
- **Answers woken directly.** Each answer socket's reader waited in the runtime's poller, which hands a woken goroutine on from the thread in epoll_wait. It now waits in poll(2) on a duplicate of the socket's descriptor, so the frame wakes the reader's own thread: the in-process socket-pair round trip went from 15.8 to 7.8 µs, the lab's 20,000/s median from 23–25 to 17–20 µs (IPv4) and p99 from 130–1,250 to 70–150 µs. Zero allocations on the answer path, as before.
- **Receive buffer.** At 100,000/s the answer sockets lost 7.8% (IPv4) and 13.5% (IPv6) of requests in bursts; a 4 MiB receive buffer took it to none.
- **Gratuitous rounds without allocation.** A round went through mdlayher's marshallers and a new ` + "`packet.Addr`" + ` per write, about 15 µs of the sender's time, so with 10,000 claims the single sender was busy for most of each train. The frames are now built in the Link's own buffer with the answer path's builders (byte for byte what ` + "`internal/wire`" + ` builds, tested) and written straight to the socket: 2.3 µs a round with the write, no allocation.
- **A late round kept.** With 10,000 VIPs, a sender held up longer than its 20 ms bucket made the rest of a train late, and the scheduler then dropped the last round of every late VIP (1,104 VIPs short of 5 rounds in one lab run). A window now keeps a round whose on-time slot falls inside it.
- **Tried, no difference beyond the noise:** sending rounds in batches with one lock per batch; waking the sender only when the earliest due round changes.

### What this machine does not allow

The *userspace floor* table shows it: the kernel answers inside the sender's own context, while any responder in user space that sleeps between frames has to be woken for each one, and on this virtual machine that wake-up costs more than the kernel's whole answer. The smallest Go responder (one thread, a packet socket, read and write) is 2.5× the kernel at 1,000/s and 4× at 20,000/s; vip is 1.2–1.3× that floor. Spinning instead of sleeping gets within 1.2–1.4× of the kernel, at the price of a whole core, which an operator's host should not pay for ARP. The 20,000/s median target (3× the kernel) is therefore out of reach for a sleeping responder here; the way to it is the in-kernel XDP fast path on the roadmap, which answers where the kernel does.
`

func writeFindings(w io.Writer) { fmt.Fprint(w, findings, "\n") }
