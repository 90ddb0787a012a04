package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The history of ownership: every change of an address's owner, and of a
// node's cordon and fence, as one record appended under
//
//	history/addr/ADDR/STAMP   a change of ADDR (claim, release, move, ...)
//	history/node/NODE/STAMP   a change of NODE (cordon, fence, ...)
//
// written in the transaction that makes the change wherever vip makes one
// (a claim's key created, a release's deleted, a move's or a standby's take,
// a cordon written), so that the history holds a change if and only if the
// store does. STAMP is the writer's time in nanoseconds, in hex, and a
// random suffix: keys sort by it, but the order of the store is the
// revision (ChangeRev), which readers sort by. Each subject keeps its last
// HistoryKeep records: whoever writes trims the oldest beyond that
// (TrimHistory).

// HistoryKeep is how many records each address and each node keep;
// NodeIndexKeep how many changes of its addresses a node's index keeps.
const (
	HistoryKeep   = 64
	NodeIndexKeep = 4 * HistoryKeep
)

// ChangeKind says what changed.
type ChangeKind string

// UnmarshalJSON reads a kind as this release or the next writes it: the
// next release's names of renamed kinds read as this release's.
func (k *ChangeKind) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*k = ChangeKind(s)
	if *k == changeFailoverNext {
		*k = ChangeFailover
	}
	return nil
}

// The kinds of change.
const (
	// ChangeClaim: the node claimed an address nobody held.
	ChangeClaim ChangeKind = "claim"
	// ChangeAdopt: a restarted agent bound its dead agent's claim to its
	// own lease (the address never changed owner).
	ChangeAdopt ChangeKind = "adopt"
	// ChangeRelease: the owner let go (vip release, a stopping agent, a
	// claim undone).
	ChangeRelease ChangeKind = "release"
	// ChangeMove: a move's target took the address (vip move, drain,
	// uncordon --return, the live view's move).
	ChangeMove ChangeKind = "move"
	// ChangeTakeOver: vip claim --take-over moved it here.
	ChangeTakeOver ChangeKind = "take-over"
	// ChangeFailover: a standby took an address whose owner's lease
	// expired. Written "standby-takeover" until the next release, which
	// writes changeFailoverNext ("take-over" is vip claim --take-over);
	// records of either name read as ChangeFailover.
	ChangeFailover     ChangeKind = "standby-takeover"
	changeFailoverNext ChangeKind = "failover"
	// ChangeFence and ChangeResume: a node that could not renew its
	// lease fell silent, and answered again. A fenced node reaches no
	// store, so both are written when it resumes.
	ChangeFence  ChangeKind = "fence"
	ChangeResume ChangeKind = "resume"
	// ChangeLost: a node found, once it reached the store again, that
	// another node took its address.
	ChangeLost ChangeKind = "lost"
	// ChangeCordon and ChangeUncordon: a node cordoned and uncordoned.
	ChangeCordon   ChangeKind = "cordon"
	ChangeUncordon ChangeKind = "uncordon"
	// ChangeStandbyAdd and ChangeStandbyRemove: a node added to an
	// address's standbys, and taken out, by vip standby.
	ChangeStandbyAdd    ChangeKind = "standby-add"
	ChangeStandbyRemove ChangeKind = "standby-remove"
	// ChangeFailsafe: an owner answered on failsafe (vip agent
	// --failsafe) while the store was unreachable, on the promises of
	// the other nodes. It reaches no store meanwhile, so it is written
	// once the store acknowledges the owner again.
	ChangeFailsafe ChangeKind = "failsafe"
	// ChangeFailsafeClear: an operator cleared a lapsed owner's failsafe
	// set (vip failsafe clear), which held the takes of the nodes it
	// left out.
	ChangeFailsafeClear ChangeKind = "failsafe-clear"
	// ChangeRefresh: an operator re-armed the owner's gratuitous window
	// (vip refresh), after a split brain or a switch's change, say.
	ChangeRefresh ChangeKind = "refresh"
)

// nodeWide says whether a change of kind k is a node's rather than an
// address's.
func (k ChangeKind) nodeWide() bool {
	switch k {
	case ChangeFence, ChangeResume, ChangeCordon, ChangeUncordon, ChangeFailsafe, ChangeFailsafeClear:
		return true
	}
	return false
}

// Actor is who asked for a change: the user and host that ran the command
// (for a request to an agent, the user of the socket's peer, which the
// kernel vouches for), the identity the store authenticated the writer as
// (Client.Identity; empty when the store asks for none), and the reason
// given with --reason.
type Actor struct {
	By       string `json:"by,omitempty"`
	Identity string `json:"identity,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// MaxReasonLen bounds a --reason, in bytes: a sentence, not a file.
const MaxReasonLen = 200

// CheckReason says whether s can be a change's reason: printable, one
// line, at most MaxReasonLen bytes.
func CheckReason(s string) error {
	if len(s) > MaxReasonLen {
		return fmt.Errorf("--reason is %d bytes: say it in at most %d", len(s), MaxReasonLen)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return errors.New("--reason holds a control character: give it as one line of text")
		}
	}
	return nil
}

// UserAt names uid's user at this host, as user@host.
func UserAt(uid int) string {
	name := strconv.Itoa(uid)
	if u, err := user.LookupId(name); err == nil {
		name = u.Username
	}
	return name + "@" + hostname()
}

func hostname() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return "localhost"
	}
	return host
}

// LocalUser names who runs this command, as user@host: the user who ran
// sudo, if it did ($SUDO_USER, which only root can set otherwise), else
// the process's user.
func LocalUser() string {
	if name := os.Getenv("SUDO_USER"); name != "" {
		return name + "@" + hostname()
	}
	return UserAt(os.Getuid())
}

// LocalActor is who runs this command (LocalUser), as the store knows this
// client, with reason.
func (c *Client) LocalActor(reason string) Actor {
	return Actor{By: LocalUser(), Identity: c.Identity(), Reason: reason}
}

type actorKey struct{}

// WithActor carries who asked for what a request changes to the code that
// writes the history.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorOf returns who asked, as WithActor put it; zero when nobody said
// (the agent's own doing).
func ActorOf(ctx context.Context) Actor {
	a, _ := ctx.Value(actorKey{}).(Actor)
	return a
}

// Change is one record of the history.
type Change struct {
	Versioned
	// Rev is the store's revision of the change (the record's creation),
	// read from the key.
	Rev int64 `json:"rev"`
	// Seq orders the changes one transaction records (a fence, the
	// losses found then, the resumption), which share its revision.
	Seq  int        `json:"seq,omitempty"`
	Time time.Time  `json:"time"`
	Kind ChangeKind `json:"kind"`
	Addr netip.Addr `json:"addr,omitzero"`
	// Node is the node the change is of: the new owner, the one that let
	// go, the one cordoned or fenced.
	Node string `json:"node"`
	// From is the node an address came from (a move, a takeover), or, for
	// a loss, the one that took it.
	From string `json:"from,omitempty"`
	// Interface is the owner's interface, where there is one.
	Interface string `json:"interface,omitempty"`
	// Group is the address's group, where it has one (vip claim --group).
	Group string `json:"group,omitempty"`
	Actor
	// Asked and Released are a move's timeline before the target took
	// it (Time): when it was asked for, and when the old owner let go, in
	// each writer's clock.
	Asked    time.Time `json:"asked,omitzero"`
	Released time.Time `json:"released,omitzero"`
	// Since is when a fence began (the record is written when it lifts).
	Since time.Time `json:"since,omitzero"`
	// Addrs lists the addresses a node-wide change (a fence) concerned,
	// up to maxChangeAddrs; Count is how many there were.
	Addrs   []netip.Addr `json:"addrs,omitempty"`
	Count   int          `json:"count,omitempty"`
	Message string       `json:"message,omitempty"`
}

// maxChangeAddrs bounds the addresses one node-wide record lists.
const maxChangeAddrs = 256

// SetAddrs lists addrs in a node-wide change, at most maxChangeAddrs of
// them, and counts them all.
func (c *Change) SetAddrs(addrs []netip.Addr) {
	c.Count = len(addrs)
	c.Addrs = slices.Clone(addrs[:min(len(addrs), maxChangeAddrs)])
	slices.SortFunc(c.Addrs, netip.Addr.Compare)
}

// Concerns says whether the change is of address a: its own, or a
// node-wide one that lists it.
func (c Change) Concerns(a netip.Addr) bool {
	return c.Addr == a || slices.Contains(c.Addrs, a)
}

// Subject is the part of the history a change is kept in.
func (c Change) Subject() string {
	if c.Kind.nodeWide() || !c.Addr.IsValid() {
		return NodeSubject(c.Node)
	}
	return AddrSubject(c.Addr)
}

// AddrSubject and NodeSubject name the history of an address and a node;
// NodeIndexSubject the copies of the changes of addresses a node took, lost
// or let go (each also under its address's), which a node's history reads.
func AddrSubject(a netip.Addr) string  { return "addr/" + a.String() }
func NodeSubject(n string) string      { return "node/" + n }
func NodeIndexSubject(n string) string { return nodeIndexDir + n }

// nodeIndexDir holds the node index's subjects, under the history's
// directory: readers of the whole history leave it out (its records are
// copies).
const nodeIndexDir = "by-node/"

// keepOf is how many records subject keeps: a node's index holds the
// changes of all its addresses, so more than one address's or node's.
func keepOf(subject string) int64 {
	if strings.HasPrefix(subject, nodeIndexDir) {
		return NodeIndexKeep
	}
	return HistoryKeep
}

// History is the directory of the whole history; HistoryOf that of one
// subject.
func (k Keys) History() string                 { return k.Prefix + historyDir }
func (k Keys) HistoryOf(subject string) string { return k.Prefix + historyDir + subject + "/" }

// historyStamp is a new last part of a record's key: its time, and a
// random suffix.
func historyStamp(c Change) string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%016x-%s", c.Time.UnixNano(), hex.EncodeToString(r[:]))
}

// HistoryWrite is a change's record, for the transaction that makes the
// change: the puts (the record, and its copy in the index of each node an
// address's change concerns) and the subjects to trim once it commits.
type HistoryWrite struct {
	Ops      []clientv3.Op
	Subjects []string
}

// After is ops, then w's puts: a transaction's operations, the history's
// last.
func (w HistoryWrite) After(ops ...clientv3.Op) []clientv3.Op {
	return append(ops, w.Ops...)
}

// MaxHistoryOps is the most puts a HistoryWrite has: the record, and a
// copy for its node and for the node it came from.
const MaxHistoryOps = 3

// HistoryPut is the write that appends c to the history, for a transaction
// that makes the change. Its time is now unless set; the record is bound to
// no lease (WithIgnoreLease is not used: a put without a lease has none).
// A change of an address is copied to the index of its node and of the
// node it came from (NodeIndexSubject), so that a node's history is read
// without a scan of every address's.
func (k Keys) HistoryPut(c Change) (HistoryWrite, error) {
	if c.Time.IsZero() {
		c.Time = time.Now()
	}
	c.Time, c.Rev = c.Time.UTC(), 0
	val, err := Encode(c)
	if err != nil {
		return HistoryWrite{}, fmt.Errorf("encode a history record: %w", err)
	}
	stamp := historyStamp(c)
	subjects := []string{c.Subject()}
	if subjects[0] != NodeSubject(c.Node) {
		for _, n := range []string{c.Node, c.From} {
			if n != "" && !slices.Contains(subjects, NodeIndexSubject(n)) {
				subjects = append(subjects, NodeIndexSubject(n))
			}
		}
	}
	w := HistoryWrite{Subjects: subjects}
	for _, s := range subjects {
		w.Ops = append(w.Ops, clientv3.OpPut(k.HistoryOf(s)+stamp, string(val)))
	}
	return w, nil
}

// AppendHistory writes changes in transactions of their own (at most
// MaxTxnOps/MaxHistoryOps at a time): the records of changes no
// transaction of vip's made (a fence, a loss), and trims each subject.
func (c *Client) AppendHistory(ctx context.Context, changes []Change) error {
	subjects := map[string]bool{}
	for batch := range slices.Chunk(changes, MaxTxnOps/MaxHistoryOps) {
		ops := make([]clientv3.Op, 0, len(batch))
		for i, ch := range batch {
			ch.Seq = i
			w, err := c.Keys.HistoryPut(ch)
			if err != nil {
				return err
			}
			ops = append(ops, w.Ops...)
			for _, s := range w.Subjects {
				subjects[s] = true
			}
		}
		rctx, cancel := c.ctx(ctx)
		_, err := c.Txn(rctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			return c.Explain(err)
		}
	}
	for s := range subjects {
		if err := c.TrimHistory(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// TrimHistory deletes subject's oldest records beyond what it keeps
// (HistoryKeep, NodeIndexKeep for a node's index): one count, and when
// over, one read of the oldest keys and their deletion.
func (c *Client) TrimHistory(ctx context.Context, subject string) error {
	dir := c.Keys.HistoryOf(subject)
	rctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.Get(rctx, dir, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return c.Explain(err)
	}
	over := resp.Count - keepOf(subject)
	if over <= 0 {
		return nil
	}
	old, err := c.Get(rctx, dir, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(over))
	if err != nil {
		return c.Explain(err)
	}
	for batch := range slices.Chunk(old.Kvs, MaxTxnOps) {
		ops := make([]clientv3.Op, len(batch))
		for i, kv := range batch {
			ops[i] = clientv3.OpDelete(string(kv.Key))
		}
		if _, err := c.Txn(rctx).Then(ops...).Commit(); err != nil {
			return c.Explain(err)
		}
	}
	return nil
}

// Describe says what the change was, in a phrase after its time.
func (c Change) Describe() string {
	var b strings.Builder
	subject := c.Addr.String()
	if !c.Addr.IsValid() {
		subject = "node " + c.Node
	} else if c.Group != "" {
		subject += " (group " + c.Group + ")"
	}
	switch c.Kind {
	case ChangeClaim:
		fmt.Fprintf(&b, "%s claimed by %s", subject, c.Node)
	case ChangeAdopt:
		fmt.Fprintf(&b, "%s adopted by %s's new agent", subject, c.Node)
	case ChangeRelease:
		fmt.Fprintf(&b, "%s released by %s", subject, c.Node)
	case ChangeMove, ChangeTakeOver:
		fmt.Fprintf(&b, "%s moved %s -> %s", subject, orNobody(c.From), c.Node)
		if c.Kind == ChangeTakeOver {
			b.WriteString(" (take-over)")
		}
		if !c.Asked.IsZero() && !c.Released.IsZero() {
			// As vip move and vip drain print the move, from the same
			// times: the owner's release and the target's take.
			fmt.Fprintf(&b, ", asked, released by %s +%s, taken by %s +%s", orNobody(c.From), sinceAsked(c.Released, c.Asked), c.Node, sinceAsked(c.Time, c.Asked))
		}
	case ChangeFailover:
		fmt.Fprintf(&b, "%s taken by standby %s (the lease of %s expired)", subject, c.Node, orNobody(c.From))
	case ChangeLost:
		fmt.Fprintf(&b, "%s lost by %s to %s", subject, c.Node, orNobody(c.From))
	case ChangeFence:
		fmt.Fprintf(&b, "node %s fenced since %s (%d addresses silent)", c.Node, c.Since.Local().Format("15:04:05.000"), c.Count)
	case ChangeResume:
		fmt.Fprintf(&b, "node %s resumed (%d addresses)", c.Node, c.Count)
	case ChangeFailsafe:
		fmt.Fprintf(&b, "node %s answered on failsafe from %s to %s (%d addresses)", c.Node,
			c.Since.Local().Format("15:04:05.000"), c.Time.Local().Format("15:04:05.000"), c.Count)
	case ChangeStandbyAdd:
		fmt.Fprintf(&b, "%s: %s stands by", subject, c.Node)
	case ChangeStandbyRemove:
		fmt.Fprintf(&b, "%s: %s stands by no more", subject, c.Node)
	case ChangeFailsafeClear:
		fmt.Fprintf(&b, "node %s's failsafe set cleared", c.Node)
	case ChangeRefresh:
		fmt.Fprintf(&b, "%s refreshed by %s (its gratuitous window re-armed)", subject, c.Node)
	case ChangeCordon:
		fmt.Fprintf(&b, "node %s cordoned", c.Node)
	case ChangeUncordon:
		fmt.Fprintf(&b, "node %s uncordoned", c.Node)
	default:
		fmt.Fprintf(&b, "%s %s on %s", c.Kind, subject, c.Node)
	}
	if c.Message != "" {
		b.WriteString(": " + c.Message)
	}
	return b.String()
}

// sinceAsked is t as a step of a move's timeline, in whole milliseconds
// since it was asked, as api.MoveResult's Summary prints one.
func sinceAsked(t, asked time.Time) string {
	return fmt.Sprintf("%d ms", max(t.Sub(asked).Round(time.Millisecond).Milliseconds(), 0))
}

func orNobody(n string) string {
	if n == "" {
		return "nobody"
	}
	return n
}
