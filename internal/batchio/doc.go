// Package batchio reads and writes the frames of packet sockets in
// batches, and waits for them in poll(2) rather than in the Go runtime's
// poller. The responder's readers (announce) and the capture (sniff) both
// read this way, the responder to answer at once, the capture to wake
// seldom.
//
// A Reader takes up to a batch of frames in one recvmmsg(2) from the first
// of its sockets that has any, into buffers its owner gives, with the
// control messages the socket adds when asked for room for them; when none
// has any it waits in poll(2), on its thread, until one has. A frame then
// wakes the reader's thread itself, not a poller thread that hands the
// goroutine on, and a socket nobody waits on wakes nobody. A Wake, an
// eventfd, ends every wait once poked, until drained: Close pokes it for
// good, an interruption for a while. A Writer queues frames in buffers its
// owner gives and sends them in one sendmmsg(2).
//
// The message headers are x/sys/unix's Mmsghdr, laid out for each
// architecture (a 32-bit one has no padding after the length). A Reader
// and a Writer allocate only when made: reading, sending and waiting
// without a timeout allocate nothing, so the answer path does not.
//
// CloseAll closes sockets together: each close of a packet socket waits
// for an RCU grace period in the kernel, and closes made at once share it.
package batchio
