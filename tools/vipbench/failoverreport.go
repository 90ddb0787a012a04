package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/vipctl/vip/internal/fleet"
)

// The failover step's targets (issue 32): vip's takeover at most as long as
// keepalived's in the same run, and at most a TTL and this.
const failoverOverTTL = 500 * time.Millisecond

// failoverRun is the step: the vip binary built for the run, the rounds in
// a lab of their own.
func (b *bench) failoverRun(ctx context.Context) error {
	if err := b.ran["build vip"]; err != nil {
		return fmt.Errorf("%w: vip was not built: %v", errSkipped, err)
	}
	res, err := runFailover(ctx, b.failoverConfig(), b.vipBin, b.logf)
	b.failover = res
	return err
}

// tooks are the rounds' times from the kill to the new owner's first answer.
func tooks(tks []takeover) []time.Duration {
	var ds []time.Duration
	for _, tk := range tks {
		ds = append(ds, tk.took())
	}
	return ds
}

// spread prints the median of ds and, for more than one, their range.
func spread(ds []time.Duration) string {
	s := fmtDur(median(ds))
	if len(ds) > 1 {
		s += fmt.Sprintf(" (%s–%s)", fmtDur(slices.Min(ds)), fmtDur(slices.Max(ds)))
	}
	return s
}

// late sums the frames the old owners' hosts sent after the new owners'
// first answers.
func late(tks []takeover) (n int) {
	for _, tk := range tks {
		n += tk.Late
	}
	return n
}

// failoverRows adds the step's two rows to the main table.
func (b *bench) failoverRows() {
	if _, ok := b.ran[failoverStep]; !ok {
		return
	}
	r := b.failover
	b.rep.Failover, b.rep.FailoverErr = r, b.ran[failoverStep]
	took := row{Scenario: "failover after kill -9 of the owner, to the standby's first answer on the client's wire, at each one's defaults (kernel column: keepalived, unicast VRRP)",
		Target: "≤ 1.0× keepalived, and ≤ the TTL + " + fmt.Sprint(failoverOverTTL.Seconds()) + " s"}
	after := row{Scenario: "failover after kill -9 of the owner: frames from its host saying it has the address after the standby's first answer (kernel column: keepalived)",
		Ratio: "—", Target: "0 (vip)"}
	if r == nil || len(r.KA) == 0 || len(r.Vip) == 0 {
		took.Vip, took.Met, _ = b.missing(failoverStep)
		took.Kernel, took.Ratio = took.Vip, "—"
		after.Kernel, after.Vip, after.Met = took.Vip, took.Vip, took.Met
		b.rep.Rows = append(b.rep.Rows, took, after)
		return
	}
	ka, vip := tooks(r.KA), tooks(r.Vip)
	took.Kernel, took.Vip = spread(ka), spread(vip)
	ratio := float64(median(vip)) / float64(median(ka))
	took.Ratio = fmtRatio(float64(median(vip)), float64(median(ka)))
	took.Met = verdictOf(ratio <= 1.0 && slices.Max(vip) <= r.Cfg.ttl()+failoverOverTTL)
	rounds := fmt.Sprintf(" in %d rounds, %s after each first answer", len(r.KA), fmtDur(r.Cfg.After))
	after.Kernel = fmtCount(late(r.KA)) + rounds
	after.Vip = fmtCount(late(r.Vip)) + rounds
	after.Met = verdictOf(late(r.Vip) == 0)
	b.rep.Rows = append(b.rep.Rows, took, after)
}

// writeFailover renders the step's own section.
func writeFailover(w io.Writer, rep *report) {
	r, stepErr := rep.Failover, rep.FailoverErr
	if r == nil && stepErr == nil {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("## Failover after kill -9, beside keepalived (issue 32)\n\n")
	if r == nil {
		p("The step failed before its first round: %s\n\n", codeBlockLine(stepErr.Error()))
		return
	}
	responder := r.Responder
	if responder == "" {
		responder = "its default responder"
	}
	p("One lab, one run: the owner is killed (`kill -9`, no restart) while the client asks for the address %d times a second, and the client's capture says when the standby first answered and what the dead owner's host sent after. ", r.Cfg.Rate)
	p("Each round kills keepalived's master, then vip's owner. keepalived: %s, unicast VRRP, `advert_int 1`, its defaults otherwise (the master at priority 150, the backup at the default 100). ", strings.TrimSpace(r.Keepalived))
	p("vip: two agents guarded by one etcd, the lease TTL %v (the default), answering with %s; b stands by (`vip claim ADDR --standby`). ", r.Cfg.ttl(), responder)
	p("Each kill lands at a random point of the second after the owner's first answer, so of keepalived's advertisement period and of vip's renewal period (%v at the default TTL). ", fleet.TimingFor(r.Cfg.ttl()).Renew.Round(time.Millisecond))
	p("keepalived's backup declares the master dead 3 × `advert_int` + (256 − 100)/256 × `advert_int` = 3.61 s after the last advertisement it heard, so 2.61–3.61 s after a kill; ")
	p("vip's standby takes over once etcd deletes the dead owner's key, a TTL after the last renewal that reached it, on etcd's next expiry check (every 500 ms). ")
	p("*Slack*: from the old owner's last frame for the address to the standby's first answer, the time the address went unanswered (negative: both answered). ")
	p("Reproduce with `make bench BENCHFLAGS='-run ^failover$ -gobench=false'`.\n\n")
	if stepErr != nil {
		p("**The step failed:** %s\n\n", codeBlockLine(stepErr.Error()))
	}
	p("| round | keepalived: kill → backup's first answer | frames from the dead master's host after it (backup's answers) | vip: kill → standby's first answer | slack | frames from the old owner's host after it (standby's answers) |\n")
	p("|---|---|---|---|---|---|\n")
	for i := range max(len(r.KA), len(r.Vip)) {
		ka, kaLate, v, slack, vLate := "—", "—", "—", "—", "—"
		if i < len(r.KA) {
			tk := r.KA[i]
			ka, kaLate = fmtDur(tk.took()), fmt.Sprintf("%d (%d)", tk.Late, tk.Answered)
		}
		if i < len(r.Vip) {
			tk := r.Vip[i]
			v, slack, vLate = fmtDur(tk.took()), fmtSigned(tk.slack()), fmt.Sprintf("%d (%d)", tk.Late, tk.Answered)
		}
		p("| %d | %s | %s | %s | %s | %s |\n", i+1, ka, kaLate, v, slack, vLate)
	}
	if len(r.KA) > 0 && len(r.Vip) > 0 {
		var slacks []time.Duration
		for _, tk := range r.Vip {
			slacks = append(slacks, tk.slack())
		}
		p("| median | %s | %s in all | %s | %s | %s in all |\n", fmtDur(median(tooks(r.KA))), fmtCount(late(r.KA)), fmtDur(median(tooks(r.Vip))), fmtSigned(median(slacks)), fmtCount(late(r.Vip)))
		p("\nvip over keepalived, medians: %s. The frames after the first answer are counted for %s after it.\n",
			fmtRatio(float64(median(tooks(r.Vip))), float64(median(tooks(r.KA)))), fmtDur(r.Cfg.After))
	}
	p("\n")
}

// fmtSigned is fmtDur for a duration that may be negative.
func fmtSigned(d time.Duration) string {
	if d < 0 {
		return "−" + fmtDur(-d)
	}
	return fmtDur(d)
}

// failoverHowMeasured is the step's bullet under How measured.
func failoverHowMeasured(etcdVersion string) string {
	return strings.Join([]string{
		"**Failover beside keepalived**, after the build and before the main lab, in a lab of its own: etcd (" + etcdNamed(etcdVersion) + ") in host `store` (192.0.2.1), the owners `a` (192.0.2.11) and `b` (192.0.2.12), the client (192.0.2.13).",
		"keepalived runs in a's and b's namespaces with a configuration, pid files and nothing else of its own (`keepalived -n -l -D -G -P -f FILE -p FILE -r FILE`; never the host's /etc/keepalived or its service), moving 192.0.2.10; a is master once it says so, b backup once it says so, and a's whole process group is killed.",
		"vip's agents (`vip agent --store etcd://192.0.2.1:2379`, new ones each round) move 192.0.2.20: a claims it, b stands by for it, and a's agent is killed once b reports the claim standing by.",
		"Through each round the client sends ARP requests for the address at a fixed rate from a packet socket (`tools/loadgen`), and tcpdump on its eth0 records the ARP frames that say who has it, with the kernel's receive timestamps; the kill is timed by the driver's clock right before the signal.",
		"*The standby's first answer* is its first ARP reply to one of the client's requests after the kill (its gratuitous frames are not answers); *frames after it* are every ARP frame from the old owner's MAC whose sender is the address (answers and announcements), counted over the stated time after that first answer.",
		"After each round b's keepalived is stopped (it takes the address off), the address is taken off a by hand, and b releases vip's address before its agent stops.",
	}, " ")
}
