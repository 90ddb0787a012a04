// Package probe asks a segment who answers for addresses, without claiming
// them: vip probe. For each interface of the addresses it opens a Link,
// which sends RFC 5227 ARP probes (from 0.0.0.0) and duplicate-address-
// detection neighbor solicitations (from ::), and a Listener, a capture
// whose frames a sniff.Detector reads as competing claimers of addresses
// held with the link's MAC; after the probes and a wait, each address's
// claimers are the result (api.ProbeResult).
//
// Run owns the goroutines of its captures: it stops them and waits for
// them on every return, an early one (an interface that cannot be opened,
// a probe that cannot be sent, a cancelled context) as the normal one. The
// links and captures are seams (Config.Open, Config.Listen), so the tests
// drive Run with fakes and a fake clock, without privileges.
package probe
