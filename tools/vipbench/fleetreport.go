package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/vipctl/vip/internal/fleet"
)

// The fleet step's targets (issue 14).
const (
	fleetMoveTarget = 250 * time.Millisecond
	keepAliveMethod = "Lease/LeaseKeepAlive"
	rangeMethod     = "KV/Range"
)

// fleetSize names the fleet measured, and says when it is the short one.
func (r *fleetResult) size() string {
	s := fmt.Sprintf("%s agents × %s claims", fmtCount(r.Cfg.Agents), fmtCount(r.Cfg.PerAgent))
	if r.Cfg.Agents != 1000 {
		s += fmt.Sprintf(" (not the 1,000 × 100 of the issue: %s)", r.why())
	}
	return s
}

func (r *fleetResult) why() string {
	switch {
	case r.Cfg.Fallback:
		return "a larger fleet fenced itself, above"
	case r.Cfg.Agents == 100 && r.Cfg.Short:
		return "-short"
	}
	return "-fleet-agents"
}

// ttlWhy says whether ttl is the default, as the section's text does; the
// headline reads it there (otherTTLRe).
func ttlWhy(ttl time.Duration) string {
	if ttl == fleet.DefaultTTL {
		return "the default"
	}
	return fmt.Sprintf("-fleet-ttl, not the default %v", fleet.DefaultTTL)
}

// restOnlyKeepAlives says whether etcd heard nothing at rest but lease
// keepalives, and nothing was written.
func (r etcdRates) onlyKeepAlives() (others float64, ok bool) {
	for _, m := range r.Methods {
		if m.Method != keepAliveMethod {
			others += m.Received
		}
	}
	return others, others == 0 && r.Proposals == 0
}

// fleetRows adds the step's targets to the main table.
func (b *bench) fleetRows() {
	if _, ok := b.ran[fleetStep]; !ok {
		return
	}
	r := b.fleet
	b.rep.Fleet, b.rep.FleetErr = r, b.ran[fleetStep]
	b.rep.FleetBroke = b.fleetBroke
	for _, bf := range b.fleetBroke {
		br := bf.res
		b.rep.Rows = append(b.rep.Rows, row{Scenario: fmt.Sprintf("fleet, %s agents × %s claims: agents fenced while the fleet filled",
			fmtCount(br.Cfg.Agents), fmtCount(br.Cfg.PerAgent)), Kernel: "—", Ratio: "—", Target: "none",
			Vip: fmt.Sprintf("%s, the first %s after the claims began", fmtCount(br.Fenced), fmtDur(br.FirstFence)), Met: notMet})
	}
	name := "fleet, " + fmtCount(b.fleetConfig().Agents) + " agents on one etcd"
	if r != nil {
		name = "fleet, " + r.size()
	}
	move := row{Scenario: name + ": move p99 (fleet.Mover.Move called → live on the target)", Kernel: "—", Ratio: "—",
		Target: "≤ " + fmtDur(fleetMoveTarget)}
	rest := row{Scenario: name + ": etcd requests at rest", Kernel: "—", Ratio: "—", Target: "only lease keepalives (no per-claim traffic)"}
	if r != nil && len(r.MoveCmd) > 0 {
		p99 := pctl(r.MoveCmd, 0.99)
		move.Vip = fmt.Sprintf("%s (p50 %s) over %d moves", fmtDur(p99), fmtDur(pctl(r.MoveCmd, 0.5)), len(r.MoveCmd))
		move.Met = verdictOf(p99 <= fleetMoveTarget)
	} else {
		move.Vip, move.Met, _ = b.missing(fleetStep)
	}
	if r != nil && r.Rest.Wall > 0 {
		others, ok := r.Rest.onlyKeepAlives()
		rest.Vip = fmt.Sprintf("%.0f keepalives/s, %.1f other requests/s, %.1f writes/s", r.Rest.method(keepAliveMethod).Received, others, r.Rest.Proposals)
		rest.Met = verdictOf(ok)
	} else {
		rest.Vip, rest.Met, _ = b.missing(fleetStep)
	}
	b.rep.Rows = append(b.rep.Rows, move, rest)
}

// writeFleet renders the step's own section.
func writeFleet(w io.Writer, rep *report) {
	r, stepErr := rep.Fleet, rep.FleetErr
	if r == nil && stepErr == nil && rep.FleetBroke == nil {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("## The fleet: agents and their claims on one etcd\n\n")
	for _, bf := range rep.FleetBroke {
		br := bf.res
		p("**%s agents × %s claims did not hold on this machine.** %s. ", fmtCount(br.Cfg.Agents), fmtCount(br.Cfg.PerAgent), codeBlockLine(bf.err.Error()))
		p("Before that, %s agents joined in %s", fmtCount(br.Cfg.Agents), fmtDur(br.Join))
		if w := br.Filling.method("Watch/Watch"); w.Sent > 0 {
			p("; while the claims ran, etcd received %.0f lease keepalives/s but renewed %.0f leases/s, sent %.0f watch messages/s and committed %.0f transactions/s, at %.0f%% of a core",
				br.Filling.method(keepAliveMethod).Received, br.Filling.Renewed, w.Sent, br.Filling.method("KV/Txn").Received, 100*br.Filling.CPU)
		}
		p(".\n\n")
	}
	if r == nil {
		p("The step failed before it had agents: %s\n\n", codeBlockLine(stepErr.Error()))
		return
	}
	cfg := r.Cfg
	timing := fleet.TimingFor(cfg.TTL)
	p("%s, each a real `fleet.Member` with its own etcd client over a real `announce.Engine` whose port sends nothing, in this process; ", r.size())
	p("one etcd (%s) in a lab host of its own. Lease TTL %v (%s): each agent renews every %v and fences %v after its last renewal. ",
		etcdNamed(rep.EtcdVersion), cfg.TTL, ttlWhy(cfg.TTL), timing.Renew, timing.FenceAfter())
	if cfg.Failsafe {
		p("Each agent runs the failsafe, as `vip agent` does by default (-fleet-failsafe): its key, a UDP socket on the loopback, its set written. ")
	} else {
		p("The agents run without the failsafe, which `vip agent` runs by default (-fleet-failsafe runs it). ")
	}
	p("Reproduce with `make bench BENCHFLAGS='-run ^fleet$ -gobench=false'` (add `-short` for 100 agents, `-fleet-agents N` for another size, `-fleet-ttl D` for another lease TTL, `-fleet-failsafe` for the failsafe).\n\n")
	if stepErr != nil {
		p("**The step failed:** %s\n\n", codeBlockLine(stepErr.Error()))
	}
	p("| measure | value | target | met? |\n|---|---|---|---|\n")
	p("| agents joined, %d at a time | %s in %s | — | — |\n", joinAtOnce, fmtCount(cfg.Agents), fmtDur(r.Join))
	if n := len(r.Claims); n > 0 {
		p("| claim: one `Member.Claim` of %d addresses, called → returned live (keys created, engine answering), %d agents claiming at once while the fleet filled | p50 %s, p99 %s, max %s over %d claims | — | — |\n",
			cfg.PerAgent, cfg.ClaimAtOnce, fmtDur(pctl(r.Claims, 0.5)), fmtDur(pctl(r.Claims, 0.99)), fmtDur(pctl(r.Claims, 1)), n)
	}
	if r.Fill > 0 {
		p("| the fleet filled: %s claims | %s agents claimed in %s (%.0f claims/s) | — | — |\n",
			fmtCount(cfg.Agents*cfg.PerAgent), fmtCount(r.Claimed), fmtDur(r.Fill), float64(r.Claimed*cfg.PerAgent)/r.Fill.Seconds())
		if w := r.Filling.method("Watch/Watch"); w.Sent > 0 {
			p("| etcd while the fleet filled | %.0f watch messages sent/s, %.0f transactions/s, %.0f ranges/s (the history's trims count each subject written), %.0f%% of a core | — | — |\n",
				w.Sent, r.Filling.method("KV/Txn").Received, r.Filling.method(rangeMethod).Received, 100*r.Filling.CPU)
		}
	}
	if r.Fenced > 0 {
		p("| agents fenced while the fleet filled | %s of %s, the first %s after the claims began | none | **no** |\n",
			fmtCount(r.Fenced), fmtCount(cfg.Agents), fmtDur(r.FirstFence))
	}
	if r.Rest.Wall > 0 {
		others, ok := r.Rest.onlyKeepAlives()
		p("| etcd at rest over %s (after %s for its watchers and the history's trims to catch up) | %.0f lease keepalives/s, %.1f other requests/s, %.1f raft proposals/s | only lease keepalives | %s |\n",
			fmtDur(r.Rest.Wall), fmtDur(r.Settle), r.Rest.method(keepAliveMethod).Received, others, r.Rest.Proposals, verdictOf(ok))
		p("| CPU at rest | etcd %s of a core, the %s agents %s | — | — |\n", fmtPercent(100*r.Rest.CPU), fmtCount(cfg.Agents), fmtPercent(100*r.RestCPU))
	}
	if r.Heap[1] > 0 {
		n := int64(cfg.Agents)
		p("| memory per agent, at rest after a GC: live heap / resident set / goroutines | %s / %s / %d | — | — |\n",
			fmtKB((r.Heap[1]-r.Heap[0])/n), fmtKB((r.RSS[1]-r.RSS[0])*1024/n), (r.Goroutines[1]-r.Goroutines[0])/n)
		p("| this process in all (before the agents joined) | heap %s (%s), RSS %s (%s) | — | — |\n",
			fmtMB(r.Heap[1]/1024), fmtMB(r.Heap[0]/1024), fmtMB(r.RSS[1]), fmtMB(r.RSS[0]))
		p("| etcd | %s keys, RSS %s | — | — |\n", fmtCount(int64(r.Keys)), fmtMB(int64(r.EtcdRSS)/1024))
	}
	if n := len(r.MoveCmd); n > 0 {
		p("| move: `fleet.Mover.Move` of one address to another agent, called → returned live on the target, one move at a time | p50 %s, p99 %s, max %s over %d moves | p99 ≤ %s | %s |\n",
			fmtDur(pctl(r.MoveCmd, 0.5)), fmtDur(pctl(r.MoveCmd, 0.99)), fmtDur(pctl(r.MoveCmd, 1)), n, fmtDur(fleetMoveTarget), verdictOf(pctl(r.MoveCmd, 0.99) <= fleetMoveTarget))
		p("| move: the move's own timeline, asked (its record written) → live | p50 %s, p99 %s, max %s; %d waited for a lease | — | — |\n",
			fmtDur(pctl(r.MoveLive, 0.5)), fmtDur(pctl(r.MoveLive, 0.99)), fmtDur(pctl(r.MoveLive, 1)), r.MoveWaited)
	}
	if r.History != nil {
		writeFleetHistory(p, r)
	}
	p("\n")
	writeMoveSteps(p, r)
	if len(r.Rest.Methods) > 0 || len(r.Moving.Methods) > 0 {
		p("etcd's gRPC traffic by method, from its own `/metrics` (`grpc_server_started_total`, `grpc_server_msg_received_total`, `grpc_server_msg_sent_total`), at rest per second and during the moves per move:\n\n")
		p("| method | at rest: calls or streams begun/s | at rest: messages received/s | during the moves: calls or streams begun per move | messages sent per move |\n|---|---|---|---|---|\n")
		moves := float64(max(len(r.MoveCmd), 1))
		seen := map[string]bool{}
		for _, list := range [][]methodRate{r.Rest.Methods, r.Moving.Methods} {
			for _, m := range list {
				if seen[m.Method] {
					continue
				}
				seen[m.Method] = true
				rest, mv := r.Rest.method(m.Method), r.Moving.method(m.Method)
				secs := r.Moving.Wall.Seconds()
				p("| %s | %.1f | %.1f | %.1f | %.1f |\n", m.Method, rest.Started, rest.Received, mv.Started*secs/moves, mv.Sent*secs/moves)
			}
		}
		p("\n")
	}
}

// writeMoveSteps says where the moves' time went, step by step.
func writeMoveSteps(p func(string, ...any), r *fleetResult) {
	if len(r.MoveSteps) != len(moveSteps) || len(r.MoveSteps[0]) == 0 {
		return
	}
	p("Where a move's time goes, over the same %d moves: each step's time, from `fleet.Mover.OnPhase` for the mover's own steps and from the times the owner and the target wrote in the move's record for theirs (every clock this process's). The p99 column is each step's own p99, not the p99 move's.\n\n", len(r.MoveSteps[0]))
	p("| step | p50 | p99 | max |\n|---|---|---|---|\n")
	for i, name := range moveSteps {
		d := r.MoveSteps[i]
		p("| %s | %s | %s | %s |\n", name, fmtDur(pctl(d, 0.5)), fmtDur(pctl(d, 0.99)), fmtDur(pctl(d, 1)))
	}
	p("\n")
}

// writeFleetHistory adds the history's rows to the fleet's table.
func writeFleetHistory(p func(string, ...any), r *fleetResult) {
	h := r.History
	p("| history after the fill: records under PREFIX/history/, bytes of keys and values | %s records, %s, %.0f bytes a record (the claims' keys: %s, %s, %.0f bytes a key) | — | — |\n",
		fmtCount(h.Filled.Keys), fmtMB(h.Filled.Bytes/1024), h.Filled.perKey(), fmtCount(h.Claims.Keys), fmtMB(h.Claims.Bytes/1024), h.Claims.perKey())
	p("| etcd's database after the fill (maintenance Status, nothing compacted) | %s, %s in use | — | — |\n", fmtMB(h.DB/1024), fmtMB(h.DBInUse/1024))
	for _, rd := range []struct {
		what string
		r    historyRead
	}{{"one address (`HistoryQuery{Addr}`, an address picked at random each time)", h.ReadAddr},
		{"one node (`HistoryQuery{Node}`, an agent picked at random each time)", h.ReadNode},
		{"everything (`HistoryQuery{}`)", h.ReadAll}} {
		p("| read: `store.Client.History` of %s | p50 %s, p99 %s over %d reads, %s records | — | — |\n",
			rd.what, fmtDur(pctl(rd.r.Took, 0.5)), fmtDur(pctl(rd.r.Took, 0.99)), len(rd.r.Took), fmtCount(rd.r.Records))
	}
	if h.Moved.Keys > 0 && len(r.MoveCmd) > 0 {
		added := h.Moved.Keys - h.Filled.Keys
		p("| history written by the moves | %s records for %d moves (%.2f a move) | — | — |\n",
			fmtCount(added), len(r.MoveCmd), float64(added)/float64(len(r.MoveCmd)))
	}
	if h.ChurnMoves > 0 {
		ok := h.Bound.MaxKeys <= historyBound
		p("| the bound: %s moved %d times between two agents, then trimmed behind the writes | it keeps %d records; the most any subject holds, of %s records: %d (%s) | ≤ %d a subject | %s |\n",
			h.Churned, h.ChurnMoves, h.ChurnKept, fmtCount(h.Bound.Keys), h.Bound.MaxKeys, h.Bound.MaxDir, historyBound, verdictOf(ok))
	}
}

// etcdNamed names the etcd the labs ran, as the report says it.
func etcdNamed(version string) string {
	if version == "" {
		return "the one in PATH"
	}
	return "etcd " + version
}

// fmtKB prints bytes in kilobytes (10^3 bytes).
func fmtKB(b int64) string { return fmt.Sprintf("%.0f kB", float64(b)/1e3) }

// fleetHowMeasured is the step's bullet under How measured.
func fleetHowMeasured(etcdVersion string) string {
	return strings.Join([]string{
		"**Fleet**, in the driver's own process before the main lab, in a lab of its own: etcd (" + etcdNamed(etcdVersion) + ", started by `test/etcdlab`) in host `store` (192.0.2.1), every agent's connections made from inside host `agents` (192.0.2.11) through `labtest.DialIn`.",
		"Each agent is a `fleet.Member` (default lease TTL) with its own `store.Open` client and a real `announce.Engine` with its defaults over one in-memory Port that sends nothing and answers nothing, so a claim takes the agent's own path: a key transaction per address, then the engine's claim with its burst and probe.",
		"Agents claim 198.51.100.1–254, 203.0.113.1–254 and 2001:db8:f1::/64 addresses, 100 each in one `Member.Claim`, which never reach a wire.",
		"*At rest*: once etcd has no watcher behind (`etcd_debugging_mvcc_slow_watcher_total` 0) and the history's trims are done (two reads of `/metrics` half a second apart with no `KV/Range` between them: each agent trims each subject it wrote, in the background, by a count), two reads of its `/metrics` the rest period apart; *raft proposals* are `etcd_server_proposals_committed_total`, every write.",
		"*History*: after the rest, through the movers' client: a paged range of every key under PREFIX/history/ (and PREFIX/claims/) summing the keys' and values' lengths, etcd's maintenance Status (`DbSize`, `DbSizeInUse`), and `store.Client.History` timed for 20 addresses, 5 nodes and 3 times the whole history, each picked at random; after the moves the range again (the records the moves added), then one address moved " + strconv.Itoa(churnMoves) + " times between two agents (past the bound of " + strconv.Itoa(historyBound) + ": 64 records, and up to 15 more from each writer between its trims), its records counted until its trim is done (10 s at most), and the range again for the most any subject holds.",
		"*Memory*: `runtime/debug.FreeOSMemory` (a GC, then the freed memory back to the system), then `runtime.MemStats.HeapAlloc` and VmRSS, with the agents at rest and before they joined; the difference over the agents.",
		"*Moves*: one after another, each of one address picked at random from its owner to another agent picked at random, through a client of its own; a move counts once `fleet.Mover.Move` has returned it live, the target's engine holds it and the owner's does not.",
	}, " ")
}
