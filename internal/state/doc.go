// Package state keeps the agent's claims in a file, so that an agent started
// after a crash can find what the last one held: re-adopt the claims, or clean
// up the addresses it had added to interfaces.
//
// A File is an announce.Book. It holds the claims in memory and writes the
// whole book to disk on every change, atomically: a temporary file in the
// same directory, fsync, rename over the state file, fsync of the directory.
// A reader therefore sees either the book before a change or the book after
// it, never a mix, and a change that Put or Delete reported as done survives
// a crash or a power cut. A change is applied in memory only once it is on
// disk, so what List returns is always what a restarted agent would find.
//
// Put and Delete take batches and write once per call: a batch of 10,000
// claims costs one file write, not 10,000.
//
// The file is JSON with a format version and one claim per line:
//
//	{"version":1,"claims":[
//	{"addr":"192.0.2.10","interface":"eth0",...},
//	{"addr":"2001:db8::10","interface":"eth0",...}
//	]}
//
// A state file that cannot be read whole (cut short by a full disk, edited by
// hand, written by a vip with another format) never keeps the agent from
// starting: Open keeps every claim it can still read, moves the file aside to
// "<path>.corrupt-<time>" for a human to look at, writes what it kept back to
// the path, logs a warning and reports what happened through
// File.Recovery.
package state
