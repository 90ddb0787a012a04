package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Ledger is the fleet's ledger over etcd (fleet.Ledger says what each of
// its methods promises): every read and write an agent or a mover makes,
// in this package's layout. The CLI's own reads and writes (cordons,
// standby sets, the history, the views) are Client's, beside it.
type Ledger struct {
	c *Client
	k Keys
	// ren renews the lease, on one keepalive stream.
	ren *renewer
	// trim trims the history of the subjects written to.
	trim *trimmer
	log  *slog.Logger
}

// NewLedger returns the ledger over c; log gets what it does in the
// background (the history's trims).
func NewLedger(c *Client, log *slog.Logger) *Ledger {
	return &Ledger{c: c, k: c.Keys, ren: newRenewer(c.Client), trim: newTrimmer(c, log), log: log}
}

func (l *Ledger) Where() ([]string, string) { return l.c.Endpoints, l.k.Prefix }

func (l *Ledger) Identity() string { return l.c.Identity() }

func (l *Ledger) ReadLeases(ctx context.Context, v *View) { l.c.ReadLeases(ctx, v) }

func (l *Ledger) History(ctx context.Context, q HistoryQuery) ([]Change, int64, error) {
	changes, rev, _, err := l.c.History(ctx, q)
	return changes, rev, err
}

func (l *Ledger) Close() {
	l.ren.close()
	l.trim.close()
}

func (l *Ledger) Record(ctx context.Context, changes []Change) error {
	for i := range changes {
		changes[i] = l.identified(changes[i])
	}
	return l.c.AppendHistory(ctx, changes)
}

// historyPut is the write that records ch, for the transaction that makes
// the change, with the subjects to trim once it commits.
func (l *Ledger) historyPut(ch Change) (HistoryWrite, error) {
	return l.k.HistoryPut(l.identified(ch))
}

// identified is ch with the identity the store knows this ledger's writer
// by, unless it names who asked already (a mover's, in its move record).
func (l *Ledger) identified(ch Change) Change {
	if ch.Identity == "" {
		ch.Identity = l.c.Identity()
	}
	return ch
}

func (l *Ledger) Register(ctx context.Context, ttl time.Duration, rec Node, set *FailsafeSet, predecessor func(Node) bool) (LeaseID, *Node, int64, error) {
	g, err := l.c.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		return 0, nil, 0, l.c.Explain(err)
	}
	lease := g.ID
	val, err := Encode(rec)
	if err != nil {
		return 0, nil, 0, err
	}
	key := l.k.Node(rec.Node)
	puts := []clientv3.Op{clientv3.OpPut(key, string(val), clientv3.WithLease(lease))}
	if set != nil {
		s := *set
		s.Node, s.Lease = rec.Node, int64(lease)
		sv, err := Encode(s)
		if err != nil {
			return 0, nil, 0, err
		}
		puts = append(puts, clientv3.OpPut(l.k.Failsafe(rec.Node), string(sv)))
	}
	resp, err := l.c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(puts...).
		Else(append([]clientv3.Op{clientv3.OpGet(key)}, l.guardReads(ctx)...)...).Commit()
	if err != nil {
		_, _ = l.c.Revoke(ctx, lease)
		return 0, nil, 0, l.c.Explain(err)
	}
	if resp.Succeeded {
		return LeaseID(lease), nil, resp.Header.Revision, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) != 1 {
		_, _ = l.c.Revoke(ctx, lease)
		return 0, nil, 0, fmt.Errorf("register node %s: its key changed while it was read: try again", rec.Node)
	}
	other, _ := Decode[Node](key, kvs[0].Value)
	if !predecessor(other) {
		_, _ = l.c.Revoke(ctx, lease)
		return 0, nil, 0, fmt.Errorf("node %s is already alive in the store (agent pid %d on host %s, since %s): give this agent its own --node NAME, or stop that agent first",
			rec.Node, other.PID, other.Host, other.Started.Local().Format("2006-01-02 15:04:05"))
	}
	other.Lease = kvs[0].Lease
	r2, err := l.c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kvs[0].ModRevision)).
		Then(puts...).Commit()
	if err != nil || !r2.Succeeded {
		_, _ = l.c.Revoke(ctx, lease)
		return 0, nil, 0, fmt.Errorf("register node %s over its dead agent's record: the record changed: try again", rec.Node)
	}
	return LeaseID(lease), &other, r2.Header.Revision, nil
}

func (l *Ledger) Reregister(ctx context.Context, lease LeaseID, rec Node) (bool, error) {
	if lease == 0 {
		return false, nil // a key without a lease, or none, compares equal to 0
	}
	val, err := Encode(rec)
	if err != nil {
		return false, err
	}
	key := l.k.Node(rec.Node)
	rctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	resp, err := l.c.Txn(rctx).If(clientv3.Compare(clientv3.LeaseValue(key), "=", int64(lease))).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(clientv3.LeaseID(lease)))).Commit()
	if err != nil {
		return false, l.c.Explain(err)
	}
	return resp.Succeeded, nil
}

func (l *Ledger) Renew(ctx context.Context, lease LeaseID, timeout time.Duration) error {
	err := l.ren.renew(ctx, clientv3.LeaseID(lease), timeout)
	if isLeaseGone(err) {
		return fmt.Errorf("%w: %w", ErrLeaseGone, err)
	}
	return err
}

func (l *Ledger) Revoke(ctx context.Context, lease LeaseID) error {
	if _, err := l.c.Revoke(ctx, clientv3.LeaseID(lease)); err != nil {
		return l.c.Explain(err)
	}
	return nil
}

func (l *Ledger) LeaseAlive(ctx context.Context, lease LeaseID) (bool, error) {
	rctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	ttl, err := l.c.TimeToLive(rctx, clientv3.LeaseID(lease))
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		// Expired (or revoked by an agent stopping).
		return false, nil
	case err != nil:
		return false, l.c.Explain(err)
	}
	return ttl.TTL > 0, nil
}

// claimValue is the record of a claim as the store keeps it.
func claimValue(rec Claim) (string, error) {
	val, err := Encode(rec)
	return string(val), err
}

func (l *Ledger) Acquire(ctx context.Context, lease LeaseID, rec Claim, who Actor) (fresh bool, err error) {
	val, err := claimValue(rec)
	if err != nil {
		return false, err
	}
	change := Change{Kind: ChangeClaim, Addr: rec.Addr, Node: rec.Node, Interface: rec.Interface, Group: rec.Group, Actor: who}
	hist, err := l.historyPut(change)
	if err != nil {
		return false, err
	}
	key := l.k.Claim(rec.Addr)
	rctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	cmps := append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}, l.guardCmps(ctx)...)
	resp, err := l.c.Txn(rctx).If(cmps...).
		Then(hist.After(clientv3.OpPut(key, val, clientv3.WithLease(clientv3.LeaseID(lease))))...).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return false, l.c.Explain(err)
	}
	if resp.Succeeded {
		l.trim.add(hist.Subjects...)
		return true, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 && len(cmps) > 1 {
		// The key is free: the guard's compares failed.
		return false, fmt.Errorf("claim %s: %w", rec.Addr, ErrFailsafeChanged)
	}
	if len(kvs) != 1 {
		return false, fmt.Errorf("claim %s: its key changed while it was read: try again", rec.Addr)
	}
	cur, err := Decode[Claim](key, kvs[0].Value)
	if fe := (*FormatError)(nil); errors.As(err, &fe) {
		return false, fmt.Errorf("claim %s: %w", rec.Addr, err)
	}
	if err != nil {
		return false, fmt.Errorf("claim %s: the store's key %s holds no vip claim (%v): delete it with etcdctl if it is stale", rec.Addr, key, err)
	}
	if cur.Node != rec.Node {
		return false, &HeldError{Addr: rec.Addr, Node: cur.Node, Since: cur.Since, Self: rec.Node}
	}
	if cur.Group != "" && cur.Group != rec.Group {
		return false, &GroupError{Addr: rec.Addr, Group: cur.Group, Requested: rec.Group}
	}
	if LeaseID(kvs[0].Lease) == lease {
		return false, nil
	}
	// This node's key under another lease: its dead (or restarted)
	// agent's, whose record's home and since stay (the key was not made
	// again).
	if rec.Home == "" {
		rec.Home = cur.Home
	}
	rec.Since = cur.Since
	if val, err = claimValue(rec); err != nil {
		return false, err
	}
	change.Kind, change.Message = ChangeAdopt, fmt.Sprintf("its agent restarted (the claim was under lease %x)", kvs[0].Lease)
	if hist, err = l.historyPut(change); err != nil {
		return false, err
	}
	r2, err := l.c.Txn(rctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kvs[0].ModRevision)).
		Then(hist.After(clientv3.OpPut(key, val, clientv3.WithLease(clientv3.LeaseID(lease))))...).Commit()
	if err != nil {
		return false, l.c.Explain(err)
	}
	if !r2.Succeeded {
		return false, fmt.Errorf("claim %s: its key changed while it was taken over: try again", rec.Addr)
	}
	l.trim.add(hist.Subjects...)
	return true, nil
}

func (l *Ledger) Take(ctx context.Context, lease LeaseID, rec Claim, moveRev int64, cond TakeCond, ch Change) (bool, int64, error) {
	return l.TakeGroup(ctx, lease, []Claim{rec}, []int64{moveRev}, cond, ch)
}

func (l *Ledger) TakeGroup(ctx context.Context, lease LeaseID, recs []Claim, moveRevs []int64, cond TakeCond, ch Change) (bool, int64, error) {
	cordonRev, standby := cond.Standby()
	if len(recs) > MaxGroupAddrs {
		return false, 0, fmt.Errorf("group %s has %d addresses: a group holds at most %d", recs[0].Group, len(recs), MaxGroupAddrs)
	}
	if cond.MoveModRev() > 0 && len(recs) > 1 {
		// One move record's last write, compared for every address.
		return false, 0, fmt.Errorf("a take of %d addresses compares one move record's revision: take them one at a time", len(recs))
	}
	var (
		cmps     []clientv3.Cmp
		ops      []clientv3.Op
		subjects []string
	)
	for i, rec := range recs {
		val, err := claimValue(rec)
		if err != nil {
			return false, 0, err
		}
		c := ch
		c.Addr, c.Node, c.Interface, c.Group = rec.Addr, rec.Node, rec.Interface, rec.Group
		if rec.Group != "" && len(recs) > 1 {
			c.Message = fmt.Sprintf("group %s, %d addresses in one transaction", rec.Group, len(recs))
		}
		hist, err := l.historyPut(c)
		if err != nil {
			return false, 0, err
		}
		key := l.k.Claim(rec.Addr)
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(l.k.Move(rec.Addr)), "=", moveRevs[i]))
		if standby {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(l.k.Standby(rec.Addr, rec.Node)), ">", 0))
		}
		if mod := cond.MoveModRev(); mod > 0 {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(l.k.Move(rec.Addr)), "=", mod))
		}
		ops = append(ops, hist.After(clientv3.OpPut(key, val, clientv3.WithLease(clientv3.LeaseID(lease))))...)
		subjects = append(subjects, hist.Subjects...)
	}
	if standby {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(l.k.Cordon(recs[0].Node)), "=", cordonRev))
	}
	cmps = append(cmps, l.guardCmps(ctx)...)
	rctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	resp, err := l.c.Txn(rctx).If(cmps...).Then(ops...).Else(l.guardReads(ctx)...).Commit()
	if err != nil {
		return false, 0, l.c.Explain(err)
	}
	if resp.Succeeded {
		l.trim.add(subjects...)
	} else if guardFailedIn(ctx, resp.Responses) {
		return false, 0, ErrFailsafeChanged
	}
	return resp.Succeeded, resp.Header.Revision, nil
}

func (l *Ledger) Release(ctx context.Context, lease LeaseID, a netip.Addr, ch Change) error {
	ch.Addr = a
	hist, err := l.historyPut(ch)
	if err != nil {
		return err
	}
	key := l.k.Claim(a)
	rctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	resp, err := l.c.Txn(rctx).If(clientv3.Compare(clientv3.LeaseValue(key), "=", int64(lease))).
		Then(hist.After(clientv3.OpDelete(key))...).Commit()
	if err != nil {
		return l.c.Explain(err)
	}
	if resp.Succeeded {
		l.trim.add(hist.Subjects...)
	}
	return nil
}

func (l *Ledger) PutStandbys(ctx context.Context, recs []Standby) (int64, error) {
	ops := make([]clientv3.Op, len(recs))
	for i, s := range recs {
		op, err := l.standbyPut(s)
		if err != nil {
			return 0, err
		}
		ops[i] = op
	}
	rctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	resp, err := l.c.Txn(rctx).Then(ops...).Commit()
	if err != nil {
		return 0, l.c.Explain(err)
	}
	return resp.Header.Revision, nil
}

// standbyPut is the put of a standby record, bound to no lease.
func (l *Ledger) standbyPut(s Standby) (clientv3.Op, error) {
	s.Lease = 0
	val, err := Encode(s)
	if err != nil {
		return clientv3.Op{}, err
	}
	return clientv3.OpPut(l.k.Standby(s.Addr, s.Node), string(val)), nil
}

func (l *Ledger) StandbyOf(ctx context.Context, a netip.Addr, node string) (*Standby, int64, error) {
	key := l.k.Standby(a, node)
	kv, rev, err := l.getOne(ctx, key)
	if err != nil || kv == nil {
		return nil, rev, err
	}
	s, err := Decode[Standby](key, kv.Value)
	if err != nil {
		return nil, 0, err
	}
	s.Addr, s.Node, s.Lease = a, node, kv.Lease
	return &s, rev, nil
}

// getOne reads key: nil when it is absent, with the revision read.
func (l *Ledger) getOne(ctx context.Context, key string) (*mvccpb.KeyValue, int64, error) {
	rctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	resp, err := l.c.Get(rctx, key)
	if err != nil {
		return nil, 0, l.c.Explain(err)
	}
	if len(resp.Kvs) == 0 {
		return nil, resp.Header.Revision, nil
	}
	return resp.Kvs[0], resp.Header.Revision, nil
}

func (l *Ledger) PutLingering(ctx context.Context, lease LeaseID, rec Lingering) error {
	return l.c.PutLingering(ctx, int64(lease), rec)
}

func (l *Ledger) DeleteStandby(ctx context.Context, a netip.Addr, node string) error {
	rctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	if _, err := l.c.Delete(rctx, l.k.Standby(a, node)); err != nil {
		return l.c.Explain(err)
	}
	return nil
}

func (l *Ledger) Standbys(ctx context.Context, node string) ([]Standby, int64, error) {
	var mine []Standby
	rev, err := l.c.Range(ctx, l.k.Standbys(), func(kv *mvccpb.KeyValue) {
		p, err := l.k.Parse(string(kv.Key))
		if err != nil || p.Node != node {
			return
		}
		s, err := Decode[Standby](string(kv.Key), kv.Value)
		if err != nil {
			return
		}
		s.Addr, s.Node, s.Lease = p.Addr, p.Node, kv.Lease
		mine = append(mine, s)
	})
	return mine, rev, err
}

func (l *Ledger) Cordon(ctx context.Context, node string) (*Cordon, int64, error) {
	kv, rev, err := l.getOne(ctx, l.k.Cordon(node))
	if err != nil || kv == nil {
		return nil, rev, err
	}
	c, _ := ReadCordon(node, kv)
	return &c, rev, nil
}

func (l *Ledger) Inbox(ctx context.Context, node string) ([]netip.Addr, error) {
	var addrs []netip.Addr
	_, err := l.c.Range(ctx, l.k.InboxOf(node), func(kv *mvccpb.KeyValue) {
		if p, err := l.k.Parse(string(kv.Key)); err == nil && p.Kind == KindInbox {
			addrs = append(addrs, p.Addr)
		}
	})
	return addrs, err
}

func (l *Ledger) Moves(ctx context.Context, addrs []netip.Addr) ([]MoveRecord, error) {
	ops := make([]clientv3.Op, len(addrs))
	for i, a := range addrs {
		ops[i] = clientv3.OpGet(l.k.Move(a))
	}
	rctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	resp, err := l.c.Txn(rctx).Then(ops...).Commit()
	if err != nil {
		return nil, l.c.Explain(err)
	}
	var out []MoveRecord
	for i, r := range resp.Responses {
		kvs := r.GetResponseRange().Kvs
		if len(kvs) != 1 {
			continue
		}
		mv, err := Decode[Move](string(kvs[0].Key), kvs[0].Value)
		if err != nil {
			continue
		}
		mv.Addr = addrs[i]
		out = append(out, MoveRecord{Move: mv, Rev: kvs[0].CreateRevision, ModRev: kvs[0].ModRevision, Lease: LeaseID(kvs[0].Lease)})
	}
	return out, nil
}

func (l *Ledger) HandOver(ctx context.Context, lease LeaseID, rs []MoveRecord) (bool, int64, error) {
	if len(rs) > MaxGroupAddrs {
		return false, 0, fmt.Errorf("hand over %d moves in one transaction: at most %d", len(rs), MaxGroupAddrs)
	}
	var (
		cmps []clientv3.Cmp
		ops  []clientv3.Op
	)
	for _, r := range rs {
		mv := r.Move
		val, err := Encode(mv)
		if err != nil {
			return false, 0, err
		}
		key, mkey := l.k.Claim(mv.Addr), l.k.Move(mv.Addr)
		// The target hears of it in its inbox, under the mover's lease.
		ops = append(ops, clientv3.OpDelete(key), clientv3.OpPut(mkey, string(val), clientv3.WithIgnoreLease()),
			clientv3.OpPut(l.k.Inbox(mv.To, mv.Addr), "", clientv3.WithLease(clientv3.LeaseID(r.Lease))))
		if r.Standby != nil {
			op, err := l.standbyPut(*r.Standby)
			if err != nil {
				return false, 0, err
			}
			ops = append(ops, op)
		}
		cmps = append(cmps, clientv3.Compare(clientv3.LeaseValue(key), "=", int64(lease)),
			clientv3.Compare(clientv3.CreateRevision(mkey), "=", r.Rev))
	}
	rctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	resp, err := l.c.Txn(rctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return false, 0, l.c.Explain(err)
	}
	return resp.Succeeded, resp.Header.Revision, nil
}

func (l *Ledger) MarkMove(ctx context.Context, mv Move, rev int64, done bool) error {
	val, err := Encode(mv)
	if err != nil {
		return err
	}
	mkey := l.k.Move(mv.Addr)
	same := clientv3.Compare(clientv3.CreateRevision(mkey), "=", rev)
	rctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	_, err = l.c.Txn(rctx).If(same).Then(clientv3.OpPut(mkey, string(val), clientv3.WithIgnoreLease())).Commit()
	cancel()
	if err != nil {
		return l.c.Explain(err)
	}
	if !done {
		return nil
	}
	rctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	_, _ = l.c.Txn(rctx).If(same).Then(clientv3.OpDelete(mkey)).Commit()
	return nil
}

func (l *Ledger) Fleet(ctx context.Context) (View, error) { return l.c.Fleet(ctx) }

func (l *Ledger) MoveView(ctx context.Context, addrs []netip.Addr, to string) (View, error) {
	return l.c.MoveViewOf(ctx, addrs, to)
}

func (l *Ledger) Grant(ctx context.Context, ttl time.Duration) (LeaseID, error) {
	rctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	g, err := l.c.Grant(rctx, int64(ttl/time.Second))
	if err != nil {
		return 0, l.c.Explain(err)
	}
	return LeaseID(g.ID), nil
}

func (l *Ledger) Ask(ctx context.Context, lease LeaseID, asks []Asking) (bool, error) {
	if len(asks) > MaxGroupAddrs {
		return false, fmt.Errorf("ask %d moves in one transaction: at most %d", len(asks), MaxGroupAddrs)
	}
	id := clientv3.LeaseID(lease)
	var (
		cmps []clientv3.Cmp
		ops  []clientv3.Op
	)
	for _, a := range asks {
		mv := a.Move
		val, err := Encode(mv)
		if err != nil {
			return false, fmt.Errorf("encode the move of %s: %w", mv.Addr, err)
		}
		mkey := l.k.Move(mv.Addr)
		ops = append(ops, clientv3.OpPut(mkey, string(val), clientv3.WithLease(id)),
			clientv3.OpPut(l.k.Inbox(mv.To, mv.Addr), "", clientv3.WithLease(id)))
		if mv.From != "" {
			ops = append(ops, clientv3.OpPut(l.k.Inbox(mv.From, mv.Addr), "", clientv3.WithLease(id)))
		}
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(mkey), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(l.k.Claim(mv.Addr)), "=", a.ClaimRev))
	}
	// One target per request: its cordon is compared once.
	cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(l.k.Cordon(asks[0].Move.To)), "=", asks[0].CordonRev))
	rctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	resp, err := l.c.Txn(rctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return false, l.c.Explain(err)
	}
	return resp.Succeeded, nil
}
