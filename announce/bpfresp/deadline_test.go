package bpfresp

import (
	"testing"
	"time"

	"github.com/vipctl/vip/internal/boottime"
	"github.com/vipctl/vip/test/wiretest"
)

// TestDeadline: a program with no deadline answers (an unguarded agent);
// with one ahead on CLOCK_BOOTTIME it answers; once it has passed, ARP
// requests and solicitations pass on unanswered and count as withheld,
// and the traffic still counts; a fresh deadline answers again.
func TestDeadline(t *testing.T) {
	for _, hook := range []Hook{TCX, XDPGeneric} {
		t.Run(hook.String(), func(t *testing.T) {
			r := requireBPF(t, hook)
			whoHas, ns := corpusFrame(t, "ARP who-has"), corpusFrame(t, "unicast solicitation (NUD)")
			answers := func(frame []byte) bool {
				out, err := runProgram(t, r, frame)
				return err == nil && out != nil
			}
			if !answers(whoHas) || !answers(ns) {
				t.Fatal("no answer without a deadline: an unguarded program must answer")
			}
			if err := r.SetDeadline(boottime.Now() + time.Hour); err != nil {
				t.Fatal(err)
			}
			if !answers(whoHas) || !answers(ns) {
				t.Fatal("no answer before the deadline")
			}
			if err := r.SetDeadline(boottime.Now() - time.Millisecond); err != nil {
				t.Fatal(err)
			}
			before, _ := r.Traffic(wiretest.CorpusHeld6)
			answered := r.Answered(wiretest.CorpusHeld4) + r.Answered(wiretest.CorpusHeld6)
			for range 3 {
				if answers(whoHas) {
					t.Fatal("an ARP request answered past the deadline")
				}
				if answers(ns) {
					t.Fatal("a solicitation answered past the deadline")
				}
			}
			if got := r.Withheld(); got != 6 {
				t.Errorf("withheld: got %d, want 6", got)
			}
			if got := r.Answered(wiretest.CorpusHeld4) + r.Answered(wiretest.CorpusHeld6); got != answered {
				t.Errorf("answered past the deadline: %d, want %d", got, answered)
			}
			if after, _ := r.Traffic(wiretest.CorpusHeld6); after != before+3 {
				t.Errorf("traffic past the deadline: %d packets, want %d: it still counts", after, before+3)
			}
			// Another node's frames are not ours to answer either way,
			// and are not counted as withheld.
			runOK(t, r, corpusFrame(t, "ARP who-has for another address"))
			if got := r.Withheld(); got != 6 {
				t.Errorf("withheld after a frame for another address: got %d, want 6", got)
			}
			if err := r.SetDeadline(boottime.Now() + time.Hour); err != nil {
				t.Fatal(err)
			}
			if !answers(whoHas) || !answers(ns) {
				t.Fatal("no answer after the deadline moved ahead again")
			}
			r.Close()
			if err := r.SetDeadline(boottime.Now()); err == nil {
				t.Error("SetDeadline on a closed responder: no error")
			}
			if got := r.Withheld(); got != 0 {
				t.Errorf("Withheld on a closed responder: %d, want 0", got)
			}
		})
	}
}

// TestDeadlineSilencesTheKernel: for an address the kernel answers for on
// vip's behalf (Count: vip added it for a claim), requests pass on to the
// kernel while the deadline holds and without one, and are dropped past
// it, so that the kernel falls silent with a frozen owner; another node's
// announcement still passes, for the capture.
func TestDeadlineSilencesTheKernel(t *testing.T) {
	for _, hook := range []Hook{TCX, XDPGeneric} {
		t.Run(hook.String(), func(t *testing.T) {
			r := requireBPF(t, hook)
			if err := r.LetGo(wiretest.CorpusHeld4, wiretest.CorpusHeld6); err != nil {
				t.Fatal(err)
			}
			if err := r.Count(wiretest.CorpusHeld4, wiretest.CorpusHeld6); err != nil {
				t.Fatal(err)
			}
			pass, drop := uint32(tcOK), uint32(2) // TC_ACT_SHOT
			if hook != TCX {
				pass, drop = xdpPass, 1 // XDP_DROP
			}
			prog := r.prog
			verdict := func(name string) uint32 {
				ret, _, err := prog.Test(corpusFrame(t, name))
				if err != nil {
					t.Fatalf("test run of %q: %v", name, err)
				}
				return ret
			}
			requests := []string{"ARP who-has", "unicast solicitation (NUD)"}
			for _, name := range requests {
				if got := verdict(name); got != pass {
					t.Errorf("%s without a deadline: verdict %d, want %d (to the kernel)", name, got, pass)
				}
			}
			if err := r.SetDeadline(boottime.Now() + time.Hour); err != nil {
				t.Fatal(err)
			}
			for _, name := range requests {
				if got := verdict(name); got != pass {
					t.Errorf("%s before the deadline: verdict %d, want %d (to the kernel)", name, got, pass)
				}
			}
			if err := r.SetDeadline(boottime.Now() - time.Millisecond); err != nil {
				t.Fatal(err)
			}
			for _, name := range requests {
				if got := verdict(name); got != drop {
					t.Errorf("%s past the deadline: verdict %d, want %d (dropped)", name, got, drop)
				}
			}
			if got := verdict("another node's ARP announcement of the held address"); got != pass {
				t.Errorf("another node's announcement past the deadline: verdict %d, want %d (for the capture)", got, pass)
			}
			if got := r.Withheld(); got != 2 {
				t.Errorf("withheld: got %d, want 2", got)
			}
			if r.Answered(wiretest.CorpusHeld4)+r.Answered(wiretest.CorpusHeld6) != 0 {
				t.Error("the program answered for an address the kernel answers for")
			}
			// No longer counted: no longer the program's to drop.
			if err := r.LetGo(wiretest.CorpusHeld4, wiretest.CorpusHeld6); err != nil {
				t.Fatal(err)
			}
			for _, name := range requests {
				if got := verdict(name); got != pass {
					t.Errorf("%s after LetGo: verdict %d, want %d", name, got, pass)
				}
			}
		})
	}
}
