// Package loadgen asks a layer-2 segment who has an address, at a fixed
// rate, and measures the answers: how long each took, which never came, and
// which came twice.
//
// It is the measuring side of vip's benchmarks. Run sends ARP requests or
// IPv6 neighbor solicitations from a packet socket, paced in small batches
// (the sender thread sleeps with nanosleep at a microsecond timer slack, so
// at 100,000 requests/s it wakes every 100 µs and sends ten). Each request
// is told apart by a sequence number in a hardware address of its own:
// 02:RR:SS:SS:SS:SS, locally administered and unicast, RR the run and SS the
// sequence. An ARP request carries it as its sender hardware address, which a
// responder (the kernel or vip) answers to and echoes as the reply's target
// hardware address; a solicitation carries it as its source link-layer
// option, which the advertisement goes back to, and comes from one of a small
// pool of source addresses, which the advertisement goes back to as well.
//
// Replies are read from a second packet socket, in promiscuous mode (they go
// to the sequence addresses, not the interface's own) and behind a kernel
// filter that lets in only this run's replies. Their times are the kernel's
// receive timestamps (SO_TIMESTAMPNS). Send times are the kernel's software
// transmit timestamps (SO_TIMESTAMPING) where the kernel gives them, and the
// clock read right before the write otherwise; Result says which.
//
// Monitor watches an interface for the first gratuitous frame for an
// address, with the kernel's receive timestamp: how soon a claim reached the
// wire.
//
// Sockets are opened inside a network namespace given by path (a lab host's
// /run/netns/NAME) on a goroutine locked to its thread, which enters the
// namespace and ends there; nothing else in the process changes namespace.
// Everything here needs CAP_NET_RAW, and entering a namespace CAP_SYS_ADMIN.
// Use it on a lab segment with documentation prefixes only: it floods.
package loadgen
