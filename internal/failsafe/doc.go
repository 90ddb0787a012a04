// Package failsafe is the direct channel between agents that keeps an
// owner answering through a store outage (after Patroni's failsafe_mode).
//
// An owner whose renewals no longer reach the store asks every node of its
// failsafe set, over UDP, whether it reaches the store; a node that does
// not reach it either answers that, and promises not to take any of the
// owner's addresses for a while. While every node of the set has so
// promised, the owner may answer past its lease's deadline, up to the
// earliest promise's end counted from when it sent the question (a promise
// counts from when it was received, which is later). One node that does
// not answer in time, or answers that it reaches the store, and the owner
// answers no longer than its lease allows.
//
// Both ways are authenticated: each agent keeps an Ed25519 key pair on disk
// (LoadKey), derives an X25519 key pair from it (Keyring), and registers
// both public halves in its node record. Two nodes agree a key from their
// X25519 halves, once, and every message between them carries its MAC
// (version 2 of the datagram); with a node whose record has no X25519 key
// (an older vip) messages are signed with Ed25519 instead (version 1), and
// a node answers in the version it was asked in. No secret is handed out by
// hand, and someone who can only read the store cannot forge a message,
// nor can a node forge one between two others. (Someone who holds a node's
// key file can agree its key with every other node, and so forge any
// node's message to it: with signatures, only that node's. A key file
// taken breaks the guarantee either way.) A question carries a random nonce that its answer must
// echo (an old answer replayed is no answer), and a sequence number that
// only grows for a given owner's lease (an old question replayed gets none).
// A datagram that does not parse, is not for this node, comes from a node
// whose key is unknown, or does not verify, is dropped and counted: it
// changes nothing.
package failsafe
