// Package nemesis is vip's fault-injection suite in Jepsen's manner, minus
// the lab: the types of a recorded history, the seeded schedule of faults,
// and the checker that decides from the history alone whether vip kept its
// guarantee.
//
// A run (the lab test in test/e2e) records three things while a nemesis
// injects faults: every ARP and NDP frame on a client's wire (Frame, made
// from the capture by Decode), every change of the store's claim keys with
// its etcd revision and the wall time it was seen (Claim), and what the
// nemesis did and when (Injection, Exclusion). Schedule turns a seed into
// the faults to inject, so that a seed reproduces a run. Check reads the
// History and nothing else: no frame may come from a MAC whose node did not
// hold the address's key at that moment, no request may be answered by two
// MACs, and no address may go unanswered for longer than Bounds.MaxGap while
// some live node could hold it. Its Report counts, per fault kind, what was
// injected, the longest silence and the overlaps, and renders a markdown
// table for RELIABILITY.md.
//
// Nothing here touches the network, a clock or a process: the checker is
// tested with synthetic histories, including ones that must fail.
package nemesis
