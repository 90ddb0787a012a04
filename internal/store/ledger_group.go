package store

import (
	"context"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// groupTries bounds how often AcquireGroup reads the group's keys again
// when one changed between its read and its transaction.
const groupTries = 3

func (l *Ledger) AcquireFree(ctx context.Context, lease LeaseID, recs []Claim, who Actor) (bool, error) {
	if len(recs) > MaxGroupAddrs {
		return false, fmt.Errorf("claim %d addresses in one transaction: at most %d", len(recs), MaxGroupAddrs)
	}
	var (
		cmps     []clientv3.Cmp
		ops      []clientv3.Op
		subjects []string
	)
	for _, rec := range recs {
		val, err := claimValue(rec)
		if err != nil {
			return false, err
		}
		hist, err := l.historyPut(Change{Kind: ChangeClaim, Addr: rec.Addr, Node: rec.Node, Interface: rec.Interface, Group: rec.Group, Actor: who})
		if err != nil {
			return false, err
		}
		key := l.k.Claim(rec.Addr)
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
		ops = append(ops, hist.After(clientv3.OpPut(key, val, clientv3.WithLease(clientv3.LeaseID(lease))))...)
		subjects = append(subjects, hist.Subjects...)
	}
	guard := l.guardCmps(ctx)
	var free []clientv3.Cmp
	if len(guard) > 0 {
		// When the claims' compares fail, the guard's are judged
		// apart: a changed failsafe set is the caller's to read again.
		free = slices.Clone(cmps)
	}
	rctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	resp, err := l.c.Txn(rctx).If(append(cmps, guard...)...).Then(ops...).Commit()
	if err != nil {
		return false, l.c.Explain(err)
	}
	if resp.Succeeded {
		l.trim.add(subjects...)
		return true, nil
	}
	if len(guard) == 0 {
		return false, nil
	}
	r2, err := l.c.Txn(rctx).If(free...).Commit()
	if err != nil {
		return false, l.c.Explain(err)
	}
	if r2.Succeeded {
		return false, ErrFailsafeChanged
	}
	return false, nil
}

func (l *Ledger) AcquireGroup(ctx context.Context, lease LeaseID, recs []Claim, who Actor) ([]bool, error) {
	if len(recs) > MaxGroupAddrs {
		return nil, fmt.Errorf("group %s has %d addresses: a group holds at most %d", recs[0].Group, len(recs), MaxGroupAddrs)
	}
	for range groupTries {
		fresh, done, err := l.acquireGroupOnce(ctx, lease, recs, who)
		if err != nil || done {
			return fresh, err
		}
	}
	return nil, fmt.Errorf("claim group %s: its keys kept changing while it was claimed: try again", recs[0].Group)
}

// acquireGroupOnce reads the keys of recs, decides what each needs, and
// writes all of it in one transaction that compares every key with what
// was read. done is false when a key changed since: read again.
func (l *Ledger) acquireGroupOnce(ctx context.Context, lease LeaseID, recs []Claim, who Actor) (fresh []bool, done bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	gets := make([]clientv3.Op, len(recs))
	for i, rec := range recs {
		gets[i] = clientv3.OpGet(l.k.Claim(rec.Addr))
	}
	read, err := l.c.Txn(rctx).Then(gets...).Commit()
	if err != nil {
		return nil, false, l.c.Explain(err)
	}
	fresh = make([]bool, len(recs))
	var (
		cmps     []clientv3.Cmp
		ops      []clientv3.Op
		subjects []string
	)
	for i, rec := range recs {
		key := l.k.Claim(rec.Addr)
		kvs := read.Responses[i].GetResponseRange().Kvs
		change := Change{Kind: ChangeClaim, Addr: rec.Addr, Node: rec.Node, Interface: rec.Interface, Group: rec.Group, Actor: who}
		if len(kvs) == 0 {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
		} else {
			cur, err := Decode[Claim](key, kvs[0].Value)
			if err != nil {
				return nil, false, fmt.Errorf("claim %s: the store's key %s holds no vip claim (%v): delete it with etcdctl if it is stale", rec.Addr, key, err)
			}
			switch {
			case cur.Node != rec.Node:
				return nil, false, &HeldError{Addr: rec.Addr, Node: cur.Node, Since: cur.Since, Self: rec.Node}
			case cur.Group != "" && cur.Group != rec.Group:
				return nil, false, &GroupError{Addr: rec.Addr, Group: cur.Group, Requested: rec.Group}
			case LeaseID(kvs[0].Lease) == lease && cur.Group == rec.Group:
				continue // this agent's already, as asked
			case LeaseID(kvs[0].Lease) == lease:
				change.Message = "joined the group"
			default:
				change.Kind, change.Message = ChangeAdopt, fmt.Sprintf("its agent restarted (the claim was under lease %x)", kvs[0].Lease)
			}
			if rec.Home == "" {
				rec.Home = cur.Home
			}
			rec.Since = cur.Since // the key is this node's already
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", kvs[0].ModRevision))
		}
		val, err := claimValue(rec)
		if err != nil {
			return nil, false, err
		}
		hist, err := l.historyPut(change)
		if err != nil {
			return nil, false, err
		}
		ops = append(ops, hist.After(clientv3.OpPut(key, val, clientv3.WithLease(clientv3.LeaseID(lease))))...)
		subjects = append(subjects, hist.Subjects...)
		fresh[i] = true
	}
	if len(ops) == 0 {
		return fresh, true, nil
	}
	resp, err := l.c.Txn(rctx).If(append(cmps, l.guardCmps(ctx)...)...).Then(ops...).Else(l.guardReads(ctx)...).Commit()
	if err != nil {
		return nil, false, l.c.Explain(err)
	}
	if !resp.Succeeded {
		if guardFailedIn(ctx, resp.Responses) {
			return nil, false, ErrFailsafeChanged
		}
		return nil, false, nil
	}
	l.trim.add(subjects...)
	return fresh, true, nil
}
