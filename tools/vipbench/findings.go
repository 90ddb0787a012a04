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

- **Kernel filters narrowed to what is held.** The answer sockets have carried a per-target BPF filter since the start, so requests for other addresses never reach the readers. The capture had only the broad ARP/NDP filter: at 100,000 requests/s for an address nobody holds, every frame was copied to the agent, decoded and counted (profile: ` + "`Capture.Run`" + ` 63% of the agent's samples, table and detector a third of that), 10.2% / 10.9% of a core for IPv4 / IPv6. The capture's filter is now narrowed in the kernel to the addresses held on the interface (ARP sender or target, NDP target or source; up to 900 addresses, beyond which the agent narrows in user space): 0.3–0.6%. ` + "`vip agent --watch-all`" + ` keeps the old behaviour for operators who want the whole segment's who-has traffic.
- **No waiting inside C.** gopacket waits for frames in poll(2) inside a C call. While a goroutine sits in C the runtime's monitor thread wakes every 20 µs for up to 10 ms (strace on the idle agent: 530 nanosleeps a second), which cost 0.25–0.63% of a core with nothing happening. The capture now reads with non-blocking ` + "`pcap_next_ex`" + ` and waits on libpcap's descriptor in the Go poller, with no deadline (Run interrupts it when its context ends): idle with one claim went to 0 ticks of CPU in 60 s, about 20 system calls a second. The kernel also leaves out the frames the host sends itself (PACKET_IGNORE_OUTGOING) instead of libpcap copying and dropping them.
- **Answers woken directly.** Each answer socket's reader waited in the runtime's poller, which hands a woken goroutine on from the thread in epoll_wait. It now waits in poll(2) on a duplicate of the socket's descriptor, so the frame wakes the reader's own thread: the in-process socket-pair round trip went from 15.8 to 7.8 µs, the lab's 20,000/s median from 23–25 to 17–20 µs (IPv4) and p99 from 130–1,250 to 70–150 µs. Zero allocations on the answer path, as before.
- **Receive buffer, then batches.** At 100,000/s the answer sockets lost 7.8% (IPv4) and 13.5% (IPv6) of requests in one-second runs; a 4 MiB receive buffer took that to none. Five-second runs then showed the reader still falling behind with one read and one write per request (median 2–23 ms, p99 44–138 ms, 1.6–5.6% lost in some runs). Frames are now read with recvmmsg and the replies written with sendmmsg, up to 32 a system call once the reader falls behind (one at a time otherwise, so the lower rates are unchanged): median 0.04–0.3 ms, p99 2–15 ms, none lost, in back-to-back runs against the build before.
- **Gratuitous rounds without allocation.** A round went through mdlayher's marshallers and a new ` + "`packet.Addr`" + ` per write, about 15 µs of the sender's time, so with 10,000 claims the single sender was busy for most of each train. The frames are now built in the Link's own buffer with the answer path's builders (byte for byte what ` + "`internal/wire`" + ` builds, tested) and written straight to the socket: 2.3 µs a round with the write, no allocation.
- **Status of 10,000 claims.** ` + "`vip status --json`" + ` took 310–400 ms: encoding/json in the agent, decoding and encoding again in the client (5 MB), and ` + "`Engine.Status`" + ` sorting 10,000 large values (20 ms) under the engine's lock. The engine now keeps the claims sorted until one comes or goes (4 ms), and probes wait in one queue behind one timer instead of 10,000 timers firing together. The agent streams the status in 128 KB pieces while the client copies them to stdout as they come: encoding/json writes each claim, compact, as it is converted, and a small indenter that takes encoding/json's output to be valid lays it out (json.Indent's scanner, which checks every byte, was half of the agent's 35 ms): medians of 31–45 ms in four runs. (A hand-written writer and decoder, which had to be kept in step with every field and were dropped for this, gave 28–33 ms in the same runs.)
- **Memory.** The capture narrowed to held addresses gets a 1 MiB kernel buffer instead of 2 MiB (its ring is resident; 100,000 frames/s for a held address still drop none): idle RSS 30.4 → 29.6 MB. What remains is mostly not vip's own doing: about 18–20 MB are the binary's and libraries' pages, and about 7 MB of the anonymous part are lookup tables that gopacket/layers (imported by gopacket/pcap) fills in at start-up and vip never uses.
- **A late round kept.** With 10,000 VIPs, a sender held up longer than its 20 ms bucket made the rest of a train late, and the scheduler then dropped the last round of every late VIP (1,104 VIPs short of 5 rounds in one lab run). A window now keeps a round whose on-time slot falls inside it.
- **The sender never waits for the engine's lock.** A claim of 10,000 addresses holds the engine's lock for 30–55 ms of bookkeeping (a log line, an event, a burst and a probe per claim), and the sender took that lock for every round, so the first rounds waited for the whole request: 32–58 ms later than the cap allows (p99). What a round needs of its claim (port and frame kinds) is now kept in a map of its own, updated wherever a claim's port or options change: 3.6 ms in the run after the change.
- **The group joins yield.** Holding 9,492 IPv6 addresses joins as many solicited-node groups, about a second of system time (the kernel walks the interface's group list on each join), right when the first rounds go out. The joiner now runs on a thread of its own at nice 19.
- **The capture in pure Go, out of the poller.** The capture left libpcap (issue 13): a packet socket read with recvmmsg, its BPF filter built in Go, libpcap only to compile a ` + "`--filter`" + `. First through mdlayher/packet in the Go poller: the 20,000/s median reply went from 23–26 to 35–42 µs (bisected to that change, two runs each): a socket in the poller's epoll set wakes the poller for every frame after a read, whether anyone waits or not, on the CPU the answers need. Reading at most every 5 ms alone did not help. The socket is now made with socket(2), outside the poller, waited on in poll(2) only when the capture means to read, and read at most every 5 ms while it keeps up: 26–29 µs against 25–28 µs in the same runs, no drops at 100,000/s.
- **Tried, no difference beyond the noise:** sending rounds in batches with one lock per batch; waking the sender only when the earliest due round changes; turning the garbage collector off during the 10,000-claim windows; leaving out the group joins altogether (on the wire, round lateness stayed between 11 and 52 ms p99 either way); arming the bursts of a 10,000-claim request after the engine's lock is released (the first rounds leave no sooner: only the reference the lateness is measured from moves, so it was not kept).

### Issue 34: what each fix bought (2026-12-07)

Each measured before and after on this machine the same afternoon, the *before* built from 617e1e7
(a worktree), the *after* from the commit named; where traces told where the time went, they are
named. Load averages 0.4–1.4 on 2 cores.

| fix | measure | before | after |
|---|---|---|---|
| ` + "`" + `sniff` + "`" + ` calls libpcap's ` + "`" + `pcap_compile` + "`" + ` itself, not through ` + "`" + `gopacket/pcap` + "`" + `, whose import linked ` + "`" + `gopacket/layers` + "`" + ` (096d309) | idle agent with one claim, RSS, vipbench (the binary as ` + "`" + `go build` + "`" + ` wrote it) | 43.0, 42.3 MB | 34.4 MB |
| the same | the same, both binaries copied into place alike, in a netns of their own, twice each: idle / one claim (anonymous) | 30.5–30.7 / 35.3–35.6 MB (12.7 MB) | 23.1 / 27.7–28.0 MB (5.6–5.8 MB) |
| the same | 10,000 claims, RSS | 106.2, 105.3 MB | 95.7 MB |
| libpcap opened (dlopen) at the first ` + "`" + `--filter` + "`" + ` compiled, not linked (f08d2de) | agent idle / with one claim, copied binaries as above, twice each | 23.2 / 27.8–27.9 MB | 21.9 / 26.5–26.8 MB |
| the same | ` + "`" + `vip --version` + "`" + `: package init / peak RSS | 8.6 ms / 36.5 MB | 2.7 ms / 28.5 MB |
| the same, and the state file's fsync after the first round (4035fd2) | ` + "`" + `vip claim` + "`" + ` to its first frame, median of 5 (arping -U) | 14.95, 15.57 ms (1.48, 1.81 ms) | 10.88 ms (1.41 ms) |
| trims after every 16 records a writer wrote to a subject, not after each (219b732); the node index (025dfe2) | fleet of 300 agents × 100 claims filling: etcd's KV/Range | 2,378/s | 239/s |
| the same | the same: claims a second; one ` + "`" + `Member.Claim` + "`" + ` of 100, p50 / p99 | 2,859/s; 277 / 405 ms | 3,687/s; 211 / 342 ms |
| the node index (025dfe2) | ` + "`" + `vip history` + "`" + ` of one node (` + "`" + `store.Client.History` + "`" + `), p50 / p99 of 5 | 225 / 236 ms (a scan of 30,000 records) | 1.73 / 1.93 ms (two ranges) |
| the same | what the history costs | 30,000 records, 6.1 MB | 60,000 records, 12.0 MB (a copy of each address's change for its node) |
| — | 200 moves, ` + "`" + `Mover.Move` + "`" + ` p50 / p99 | 16.4 / 90.1 ms | 17.7 / 84.4 ms |
| a status's claims written field by field (` + "`" + `agent.appendClaimJSON` + "`" + `), not by encoding/json, which spent half its time on the claims' times (` + "`" + `time.Time.MarshalJSON` + "`" + `, its output then checked byte by byte); a string or time it would escape or refuse is still left to it, and a test fails when ` + "`" + `api.Claim` + "`" + ` gains a field the writer leaves out, the drift for which an earlier hand-written writer was dropped | 10,000 claims: ` + "`" + `vip status --json` + "`" + `, median of 5, two runs each, alternated, under the bench's load | 55.9, 53.4 ms | 50.2, 41.5 ms |
| the same | ` + "`" + `BenchmarkStatusJSON` + "`" + ` (10,000 claims, compact / indented) and ` + "`" + `BenchmarkStatus` + "`" + ` (the agent's whole answer) | 17.6 / 21.5 ms; 22.8 ms | 4.9 / 8.4 ms; 10.3 ms |
| RLIMIT_MEMLOCK lifted with one setrlimit, not by cilium/ebpf's ` + "`" + `rlimit` + "`" + ` package, whose init made a BPF map in every vip process, before main (386eb5d) | ` + "`" + `vip --version` + "`" + `, start to exit, 150 runs of each binary, alternated | median 7.17 ms (p10 6.56, p90 9.17) | 6.72 ms (6.16, 8.62) |
| the same | ` + "`" + `vip claim` + "`" + ` to its first frame, median of 5, two runs each, alternated (arping -U) | 14.14, 12.48 ms | 11.17, 14.04 ms: within this measure's noise |
| vipbench runs vip copied into place, as a package's install writes it (b7c3eee): how vip is measured, not a change to it | idle agent, the binary's pages resident (RssFile), twice each | 25.2, 25.3 MB (the linker's own output) | 19.1, 19.2 MB (copied) |

Where the time to the first frame still goes (a helper's trace of ` + "`" + `vip claim` + "`" + ` against a running
agent, median of 9, before these fixes: 13.7 ms): 10.7 ms from exec to ` + "`" + `main` + "`" + ` (the dynamic loader,
the runtime, package init; a Go hello-world takes 1.5 ms the same way), of which gopacket/layers'
init was 3.1–3.7 ms and libpcap's chain of shared libraries (libdbus, libsystemd, libgcrypt, lz4,
zstd, lzma) about 1.5 ms; 0.4 ms for the request over the socket; 0.5 ms for the agent's checks
(three netlink round trips, then the link and addresses read again for the hold); 1.2 ms for the
state file's fsync (p90 3.8, p99 16 ms), now after the first round; 0.1 ms from the commit to the
frame on the wire. What is left above the 5 ms target is mostly the client's start: a client that
links only ` + "`" + `internal/api` + "`" + ` measured 3.8 ms from exec to ` + "`" + `main` + "`" + ` with cgo, 2.5 ms without. The first
claim on an interface also opens its port: 27 ms for the eBPF responder (13.5 ms to load the
objects, 11 ms to attach on tcx), 0.25 ms for the socket one; not in the figure above.

The gratuitous scheduler, measured again with no change to it, twice (3 runs of 10,000 IPv4
VIPs each, load about 1): later rounds late p99 2.04 and 1.84 ms over each time's 120,000
rounds, through the engine 1.94 and 2.02 ms (the tables above are the second). The 18.67 ms of
the full run before came from a machine at a load of 2.9; the target holds where the machine is
not that busy.

At 1,000 agents this machine does not hold the fleet at the 2 s default TTL (3,000 keepalives a
second): before, 898 agents fenced while the fleet filled (etcd: "too many requests"); after, the
100,000 claims went in (1,879/s, one claim of 100 p99 904 ms) but at rest etcd used 97.6% of a
core and stopped answering while the history was counted. So the rows above are at 300 agents,
and the fleet's section is now measured at 1,000 agents with a 6 s TTL (` + "`" + `-fleet-ttl 6s` + "`" + `, two renewals a
second less per agent than the default's three), which the section and the headline say: its
etcd at rest is not judged against the target, set for the default TTL.

### The fleet at 1,000 agents: where a move's and a claim's time went (2026-12-07, later)

Measured with the fleet step alone (` + "`" + `vipbench -run ^fleet$` + "`" + `), before and after each change the
same afternoon, at 1,000 agents × 100 claims with a 6 s TTL on Debian's etcd 3.4.23 unless the row
says otherwise; the step now prints where each move's time goes (` + "`" + `fleet.Mover.OnPhase` + "`" + ` and the times
in the move's record).

| fix | measure | before | after |
|---|---|---|---|
| a move reads the target's and the owners' records only (` + "`" + `store.Client.MoveViewOf` + "`" + `), once (e326d48) | 200 moves, ` + "`" + `Mover.Move` + "`" + ` p50 / p99; the fleet read, p50 | 34.48 / 111.59 ms; 10.46 + 9.97 ms (two reads of every node's record) | 14.11 / 60.78 ms; 1.65 ms |
| the mover's watch made from now, with etcd's word it is made, not from the plan's revision (e326d48) | the mover hearing that the move is live, p99 / max | 78.34 / 82.64 ms (etcd brings a watch that starts behind its latest revision up to date every 100 ms) | 3.46 / 20.61 ms; ` + "`" + `Mover.Move` + "`" + ` p99 42.37 ms |
| a claim's free keys a batch per transaction, up to 32 (` + "`" + `Ledger.AcquireFree` + "`" + `, e326d48) | the fleet filling: claims a second; one ` + "`" + `Member.Claim` + "`" + ` of 100 while 8 agents claim, p50 / p99 (the batch turned off and on, one run each) | 2,968/s; 259.50 / 508.60 ms | 7,965/s; 63.94 / 319.39 ms |
| the same | etcd 3.4.23 at rest afterwards: its CPU, its RSS | 45.9% of a core, 676 MB | 68.6%, 845 MB (below) |
| takes keep the failsafe guard they read until one fails on it (5154e2c, e122214) | 100 agents with the failsafe, default TTL: 20 moves p50 / p99; one claim of 100 p99 | 30.23 / 124.42 ms; 790.62 ms | 12.24 / 28.43 ms; 582.72 ms |
| etcd 3.7.3 built from go.mod, not Debian's 3.4.23 (how measured, 71241c6) | 1,000 agents, TTL 6 s: etcd at rest; the fill; one claim of 100 p99 | 64.0–68.6% of a core; 7,909–7,965/s; 319–330 ms | 21.4%; 11,926/s; 203.50 ms |
| the same | 1,000 agents at the 2 s default TTL (3,000 keepalives/s): etcd at rest; one claim of 100 p99; move p99 | did not hold (below) | 40.4–42.3% of a core; 311.18 ms; 31.54 ms |

- **Why etcd 3.4 grew busier at rest after a faster fill.** Profiles of etcd (` + "`" + `--enable-pprof` + "`" + `, 12 s at
  rest, 1,000 keepalives/s): 3.4 makes each response's header with a read transaction that copies
  the backend's read buffer (` + "`" + `mvcc.readView.Rev` + "`" + ` → ` + "`" + `backend.bucketBuffer.Copy` + "`" + `: 0.63 s of 4.72 s
  after a fill a key at a time, 1.91 s of 7.31 s after one in batches), and the buffer stays as long
  as the largest burst of writes it has taken; the garbage collection of those copies is most of
  the rest (` + "`" + `gcBgMarkWorker` + "`" + ` 1.90 and 2.78 s). A smaller ` + "`" + `--snapshot-count` + "`" + ` (1,000) changed nothing
  (64.0%). etcd 3.5 and later read the revision without a copy: 3.7.3, the version go.mod already
  requires for the embedded test store, is what ` + "`" + `vipbench` + "`" + ` now builds and runs for the fleet and failover
  steps (` + "`" + `-etcd /usr/bin/etcd` + "`" + ` measures Debian's).
- **Where etcd 3.7's time at rest goes** at the default TTL (3,000 keepalives/s, 40.4% of a core):
  gRPC's transport, a read and a write on each agent's own connection for every keepalive
  (system calls 30% of its samples, the scheduler 15%); ` + "`" + `LeaseRenew` + "`" + ` itself 7%. It grows with the
  keepalives a second, which the renewal period sets (a sixth of the TTL, for the fence's margin:
  issue 32); the 25% target would need fewer of them.
- **The failsafe at scale: at rest fixed, then a fleet forming.** The fleet step runs without the
  failsafe, which ` + "`" + `vip agent` + "`" + ` runs by default; ` + "`" + `-fleet-failsafe` + "`" + ` runs it. Before (6678270), each
  agent read every node's record and every set every TTL and at each change its watch of the
  nodes told: O(N) and O(N²) bytes a read, by every agent. Then (53c5290..bee618b) an agent took
  its peers' changes from the watch one record at a time, counted the records a TTL apart (etcd
  counts them in its index), read them all only when the count differed or ten TTLs on, and read
  the sets only when a peer's record went; at 100 agents at rest etcd went from 19.7% to 10.6% of
  a core and the agents from 44.6% to 14.1% (7.2% and 9.7% without the failsafe). A fleet
  forming was left: each owner's set named every other node and was rewritten as each joined,
  O(N³) bytes, and a take failed on any set written since its read. Now (b2a108b, 0d3dd8f) a set
  names its nodes by the revision the owner read them at (a few dozen bytes; format 2), a take
  fails only on a set created since its read, and two costs the profiles of 300 agents showed
  (` + "`" + `vipbench -fleet-profile` + "`" + `) are gone: a comparison of the names at every change of the peers
  that split the set's names once per name, and a copy of the peers at every change (18% of the
  CPU, 128 MB of the live heap). One run each on this machine, default TTL, etcd 3.7.3, at
  52a8c2a and at 0d3dd8f: 100 agents joined in 833 → 587 ms, one claim of 100 while the fleet
  filled p99 396.56 → 179.74 ms, at rest etcd 10.2 → 8.3% of a core and the agents 14.2 → 11.3%;
  300 agents joined in 19.9 → 3.6 s, and 9 of 300 agents' claims failed → none (p99 216.92 ms).
  The 300-agent step then still failed at rest: the agents, starved in one process on two
  cores, went on failsafe, each asking all 299 others, every question and answer signed
  (Ed25519: half the CPU in the profile), and some fenced.
- **The failsafe's questions and answers with a key per pair** (version 2 of the datagram,
  2026-12-08). Each node derives an X25519 key from its failsafe key and puts the public half
  in its record; two nodes agree a key once and authenticate each question and answer with
  HMAC-SHA256 instead of Ed25519 (signed still with a node whose record has none: an older vip).
  ` + "`BenchmarkRound`" + ` (` + "`internal/failsafe`" + `: one question and its answer through both nodes, three
  runs): 182–209 µs signed, 12.9–13.8 µs with the shared key, 14× less. A fleet of a thousand
  on failsafe at once spent more than half a core on every node on them; now about 4%. The
  price is a key agreement, 45–52 µs (` + "`BenchmarkKeyringShared`" + `), once for each other node as its
  record is read: 50 ms for a node of a fleet of a thousand, but N² of them in the fleet step's
  one process. One run each of ` + "`-short -fleet-failsafe`" + ` at 07fe9eb and after: 100 agents joined
  in 746 → 1,303 ms; the rest the same within the noise (one claim of 100 while the fleet
  filled p99 177.03 → 162.56 ms, etcd at rest 9.6 → 10.3% of a core, the agents 13.3 → 13.8%,
  100 moves p99 26.60 → 27.04 ms). The 300-agent step with the failsafe still fails, one run
  each: before, a client for the moves could not reach the store after the rest; after, agents
  lost their leases at rest, joined again, and a move found its target gone. Its 300 agents
  starve in one process on two cores either way.
- **Two rows of the 2026-12-08 full run over their targets, within the noise.** 10,000 claims:
  RSS 100.9 MB (≤ 100) and ` + "`vip status --json`" + ` 53.56 ms (< 50). The same step again, the binaries
  of the run before (8b61157) and of this one (d92f099) alternated, twice each: RSS 101.1 and
  88.7 MB before, 93.1 and 89.4 MB after; ` + "`vip status --json`" + `, medians of 5, 46.4 and 47.2 ms
  before, 40.5 and 47.0 ms after. The heap's size when RSS is read, and the machine's load, move
  them by 10%; no change of this stop touches the agent's claims.
- **` + "`vip claim`" + ` to the wire: where its 9–12 ms go** (perf, 150 claims and releases against a
  running agent in a namespace, 2026-12-08). The client's package initialisation is 40% of its
  samples (etcd's API, protobuf's descriptors and gRPC about 20%; Prometheus' client and procfs
  6%; bubbletea and the clipboard 2.5%); the runtime's start, its threads and page faults about
  35% (985 page faults, against 188 for a Go hello world); ` + "`main`" + ` 7.5% (cobra's tree of
  commands 4%, the request 2.5%). The agent's side is about a millisecond: three netlink reads,
  the state file written before the first frame and synced after it. ` + "`vip --version`" + ` alone takes
  5.5–7 ms, a hello world 1.5 ms. One binary links the etcd client, Prometheus and the TUI into
  every command, and Go initialises every linked package before ` + "`main`" + `: the target (5 ms, 2×
  ` + "`arping -U`" + `) needs a client that does not link them (2.5 ms from exec to ` + "`main`" + `, measured
  earlier without cgo), which is a packaging decision this project has not made.

### The in-kernel responder (issue 15)

Measured twice when it landed (full runs at commits 0c1c5bf and 20ad025, *first*), then again on 1 December after the changes below (the tables above: commit c5de0af, each of vip's latency runs between two of the kernel's, *now*). Ratios to the kernel; *first* gives runs 1 and 2.

| scenario | first, tcx | now, tcx | now, XDP generic | now, socket |
|---|---|---|---|---|
| IPv4 median, 1,000 / 20,000 / 100,000/s | 1.03, 1.01 / 1.09, 1.22 / 1.04, 1.05× | 0.94 / 0.99 / 0.91× | 0.91 / 0.94 / 0.88× | 15 / 11 / 24× |
| IPv4 p99, same rates | 1.05, 1.26 / 1.09, 1.60 / 1.07, 1.30× | 0.78 / 0.97 / 0.89× | 0.76 / 0.81 / 0.92× | 6.4 / 29 / 148× |
| IPv6 median, same rates | 0.78, 0.81 / 0.84, 0.86 / 0.94, 0.91× | 0.90 / 0.80 / 0.72× | 0.78 / 0.76 / 0.70× | 13 / 8.7 / 19× |
| IPv6 p99, same rates | 0.76, 0.80 / 0.81, 1.01 / 1.08, 1.07× | 0.87 / 0.82 / 0.68× | 0.76 / 0.68 / 0.62× | 11 / 13 / 129× |
| p99 at 20,000/s with a core busy, IPv4 / IPv6 | 1.00, 1.05 / 0.80, 0.59× | 0.97 / 0.55× | not run | 68 / 81× |
| lost at 100,000/s | none | none | none | none |
| the agent's CPU at 100,000/s, IPv4 / IPv6 | 9.1, 8.9 / 10.2, 10.0% | 0.38 / 0.57% | 0.38 / 0.57% | 63 / 66% |
| frames the agent's capture received at 100,000/s | every request | none | none | every request |
| 10,000 claims: ` + "`vip status --json`" + ` | 61.7, 61.5 ms | 45.9, 47.0 ms | — | 36.7 ms |

- **Answering in the kernel.** The program answers in the softirq that carries the request, in the sender's own context like the kernel, so the wake-up that held every user-space responder at 2–4× the kernel is gone. A busy core no longer matters.
- **The capture stopped waking for every request** (commits 055b793 to 69f50c6). On tcx the packet taps run before the program, and the agent's capture, narrowed to the held addresses, admitted every request for them: 500,000 wake-ups to read, decode and count at 100,000/s, 9–10% of a core. The program now remembers who asked (an LRU map of asker, requests answered and latest time, 8,192 per interface, 16,384 since 559c7b8), the agent adds what is new to the who-has table every second and on each read, and the capture's kernel filter keeps only the frames that claim a held address (rivals'). The agent's CPU went to 0.4–0.6%; on XDP, whose taps never see an answered request, the who-has table sees them now too.
- **A full LRU map on every request** (commit e633a9f). The load generator puts each request's sequence number in its sender MAC, so every request was a new asker: an insertion in a full LRU map, which makes room 128 entries at a time under a lock. The run at 69f50c6 had p99 at 1.5–3.4× the kernel (IPv6 1,000/s 1.86×, IPv4 20,000/s 3.4×). Each CPU now starts remembering at most 256 new askers a second; the requests of the others count, exactly, in one entry per address (the table says more askers asked than it names). The next run had every IPv6 row under 1.0× and IPv4 p99 1.02–1.20×.
- **The tap itself** (commit 5bab471). A packet socket bound to every protocol is a tap before tc ingress: each frame is handed to it and runs its filter, even one that keeps nothing. In a lab benchmark with the program alone, adding such a socket with a drop-all filter put 0.2–0.4 µs on each answer on tcx (three rounds: 2.30 → 2.57, 2.51 → 2.70, 2.61 → 2.93 µs at 20,000/s), 8–17%, about the program's whole lead over the kernel's ARP. Where the program answers, the capture now reads after tc ingress, on an ARP and an IPv6 socket: the requests the program answered never reach it, nor does any frame of another protocol.
- **The measurement** (commit c5de0af). The kernel's steps run first and vip's minutes later, and this machine's latencies drift by 10–30% over minutes. The run at 5bab471 still said 0.95 / 1.15 / 1.10× for the IPv4 medians, while kernel and agent measured alternately in one lab, four rounds, gave 0.85–0.95× at 20,000 and 100,000/s (one round 1.04×). Each of vip's latency runs now goes between a run of the kernel's right before it and one right after, and the ratio is to their mean.
- **A rival's announcement** (commit e970a0b), found while checking what a capture after tc ingress misses. A rival's gratuitous ARP in request form (` + "`arping -U`" + `) asks for the held address, so the program answered it and consumed it: the capture never saw the claim (on XDP it never had), and a rival that answers no probe went unreported. Both responders now leave another node's announcement unanswered and pass it on; the claim's conflict policy decides (defend re-arms the gratuitous window; warn and yield must not contest it). A lab test fails without it on both hooks. What a capture after ingress still misses: a rival's request from one held address for another held address, which is answered (its replies to vip's probes, every 10 s, still give it away), and frames another tc program drops first.
- **How steady.** p99 moves by a third from run to run here. After the review fixes (commit 559c7b8, the askers map twice as large, the capture's own-frames check) a run of every tcx load had every row met but IPv4 p99 at 20,000/s, 1.42×; two runs of that step alone then gave 0.83× and 1.07×. The medians stayed at 0.74–0.99×.
- **Which hook.** tcx stays the default: it shares the hook, reconfigures nothing, and ` + "`tcpdump`" + ` still sees every frame. XDP generic is a little faster (its XDP_TX skips tc and the qdisc path); native XDP was not measured (a lab veth needs a program on the peer before XDP_TX works).
- **Status of 10,000 claims** reads each port's counters in one pass with batched lookups, outside the engine's lock (it made two lookups per claim, half of them under the lock): 45.9–47.0 ms against the 50 ms target.
- **Memory.** Idle with one claim, 39.9–40.9 MB against the 30 MB target (etcd's client, gRPC and cilium/ebpf are linked; loading the program allocates under 1 MB). With 10,000 claims on eBPF 98.0–104.4 MB around the 100 MB target, against 88.7 MB on the sockets. Writing the maps in batches (commit 1900e5d, a few system calls for 10,000 addresses instead of 20,000) took a 10,000-address claim from 685 to 666 ms: the map writes were not what it waits on.

### The core restructure, before and after

Issue 13 rebuilt the core (the responder in parts, the engine's I/O out of its lock, one frame codec, the capture without libpcap, plain JSON for status, the API as a contract) and issue 12 added the metrics. ` + "`vipbench -short -gobench=false`" + ` against the build before (8ba609a) and after, alternately, two runs each, 1 December on this machine:

| scenario | before | after |
|---|---|---|
| IPv4 1,000/s median / p99 | 49.1, 51.6 / 78, 252 µs | 48.5, 51.3 / 244, 91 µs |
| IPv4 20,000/s median / p99 | 26.1, 25.7 / 89, 98 µs | 26.9, 25.6 / 105, 101 µs |
| IPv6 1,000/s median / p99 | 65.7, 68.7 / 105, 704 µs | 62.4, 61.9 / 101, 105 µs |
| IPv6 20,000/s median / p99 | 27.7, 26.5 / 101, 93 µs | 28.6, 30.0 / 93, 101 µs |
| 100,000/s: lost, duplicates, capture drops | none | none |
| 100,000/s for an address nobody holds: agent CPU | 0%, 0% | 0–0.64% |
| idle with one claim: CPU over 5 s | 0–0.2% | 0–0.2% |
| idle with one claim: RSS | 26.7, 26.8 MB | 33.6, 33.2 MB |
| claim to the first frame on the wire | 9.2, 11.8 ms | 10.4, 11.5 ms |
| 10,000 claims: RSS | 75.2, 72.6 MB | 78.8, 80.6 MB |
| 10,000 claims: ` + "`vip status --json`" + ` | 23.0, 25.7 ms | 33.0, 31.5 ms |
| scheduler, 10,000 VIPs: later rounds p99 (alone / through the engine / on the wire) | 1.2–1.8 / 1.2–1.6 / 2.3–3.3 ms | 1.9 / 1.8 / 2.2–2.7 ms |

Two figures are worse beyond the noise. Idle RSS rose by 6.5 MB, all of it file-backed (the anonymous part is 8.7 → 9.0 MB, measured apart): pages of a binary 3.5 MB larger that start-up touches, chiefly prometheus/client_golang and the protobuf descriptors its data model registers when the program starts, metrics served or not. It is page cache, shared and reclaimable, but it is over the 30 MB target. Plain encoding/json costs ` + "`vip status --json`" + ` of 10,000 claims about 8 ms, within its 50 ms target.

### What this machine does not allow

**Gratuitous rounds on the wire.** The scheduler meets its target in-process, alone and through the engine (later rounds p99 1.2–2.1 ms over 40,000 rounds, pace within the cap). On the wire, with 10,000 claims sending 50,000 frames/s through the lab's bridge to two other namespaces whose kernels process every one, the later rounds' p99 lateness ranged from 4.7 to 52 ms from run to run on this 2-core machine: each frame costs the sending thread about 7 µs of kernel time (the bridge and the receivers' processing run in its context), and trains paced exactly at the cap cannot make up a stall.

The *userspace floor* table shows it: the kernel answers inside the sender's own context, while any responder in user space that sleeps between frames has to be woken for each one, and on this virtual machine that wake-up costs more than the kernel's whole answer. In the runs of 30 November, the smallest Go responder (one thread, a packet socket, read and write) was 2.3–2.5× the kernel at 1,000/s and 3.3–4.3× at 20,000/s, and vip 1.1–1.5× that floor; spinning instead of sleeping came within 0.9–1.4× of the kernel, at the price of a whole core, which an operator's host should not pay for ARP. From run to run the kernel's own median moves by half (9–15 µs at 1,000/s), and the ratios with it. The 20,000/s median target (3× the kernel) is therefore out of reach for a sleeping responder here; the in-kernel responder (issue 15, above) answers where the kernel does.
`

func writeFindings(w io.Writer) { fmt.Fprint(w, findings, "\n") }
