package store

import (
	"context"
	"net/netip"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Lingering is what reached a node, after it released them, for the
// addresses it still counts (an address lingers: its agent's in-kernel
// responder answers for it no more but counts the packets sent to the
// interface's MAC for it, and who sent them, for Linger after the
// release). The node's agent writes it under its lease, at most once a
// second and only when a count changed, so that vip drain, from any host,
// can tell when the old owner has gone quiet. It goes with the lease.
type Lingering struct {
	Versioned
	Node    string    `json:"node"`
	Updated time.Time `json:"updated"`
	// Linger is how long the node counts after a release; zero when it
	// counts nothing after one.
	Linger Duration `json:"linger"`
	// Uncounted are the node's interfaces that cannot count after a
	// release: their responder answers on packet sockets.
	Uncounted []string     `json:"uncounted,omitempty"`
	Addrs     []LingerAddr `json:"addrs,omitempty"`
	// Omitted is how many lingering addresses were left out to bound
	// the record (MaxLingerAddrs), the last by address.
	Omitted int `json:"omitted,omitempty"`
}

// LingerAddr is what reached one lingering address, in the node's clock.
type LingerAddr struct {
	Addr      netip.Addr `json:"addr"`
	Interface string     `json:"interface"`
	// Since is the release; Until when the node stops counting.
	Since   time.Time `json:"since"`
	Until   time.Time `json:"until"`
	Packets uint64    `json:"packets"`
	Bytes   uint64    `json:"bytes"`
	// Last is when the latest packet came; zero when none did.
	Last    time.Time      `json:"last,omitzero"`
	Senders []LingerSender `json:"senders,omitempty"`
	// MoreSenders is how many senders were left out (MaxLingerSenders,
	// MaxLingerSendersAll), and MorePackets how many packets they sent.
	// Packets less these and the senders' is what came from senders the
	// responder no longer remembers (it keeps a bounded number; the
	// address's own counts are exact).
	MoreSenders int    `json:"more_senders,omitempty"`
	MorePackets uint64 `json:"more_packets,omitempty"`
}

// LingerSender is a host that sent to a lingering address: whose cache
// still names the old owner.
type LingerSender struct {
	MAC     string     `json:"mac"`
	From    netip.Addr `json:"from"`
	Packets uint64     `json:"packets"`
	Last    time.Time  `json:"last"`
}

// MaxLingerAddrs, MaxLingerSenders and MaxLingerSendersAll bound a
// Lingering record: addresses (about 230 bytes each), senders of one
// address, and senders in all (about 110 bytes each, given to the
// addresses with the latest traffic first), under maxLingeringBytes.
const (
	MaxLingerAddrs      = 4096
	MaxLingerSenders    = 4
	MaxLingerSendersAll = 1024
)

// maxLingeringBytes bounds a Lingering record, which lists up to
// MaxLingerAddrs addresses: larger than the other records (a full one is
// about 1.05 MB), under etcd's request limit (1.5 MiB by default).
const maxLingeringBytes = 1280 << 10

// Of returns what the record says of a, if it lists it.
func (l Lingering) Of(a netip.Addr) (LingerAddr, bool) {
	for _, la := range l.Addrs {
		if la.Addr == a {
			return la, true
		}
	}
	return LingerAddr{}, false
}

// ReadLingering reads node's Lingering record: nil when there is none (its
// agent is not alive, or predates the record).
func (c *Client) ReadLingering(ctx context.Context, node string) (*Lingering, error) {
	key := c.Keys.Lingering(node)
	rctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.Get(rctx, key)
	if err != nil {
		return nil, c.Explain(err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	l, err := Decode[Lingering](key, resp.Kvs[0].Value)
	if err != nil {
		return nil, err
	}
	l.Node = node
	return &l, nil
}

// ReadAllLingering reads every node's Lingering record, in one range: what
// reaches each node for the addresses it released and still counts. A
// record vip cannot read is skipped.
func (c *Client) ReadAllLingering(ctx context.Context) ([]Lingering, error) {
	dir := c.Keys.Prefix + lingerDir
	var out []Lingering
	_, err := c.Range(ctx, dir, func(kv *mvccpb.KeyValue) {
		node := strings.TrimPrefix(string(kv.Key), dir)
		l, err := Decode[Lingering](string(kv.Key), kv.Value)
		if err != nil || CheckNode(node) != nil {
			return
		}
		l.Node = node
		out = append(out, l)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PutLingering writes rec as its node's Lingering record under lease.
func (c *Client) PutLingering(ctx context.Context, lease int64, rec Lingering) error {
	val, err := Encode(rec)
	if err != nil {
		return err
	}
	rctx, cancel := c.ctx(ctx)
	defer cancel()
	if _, err := c.Put(rctx, c.Keys.Lingering(rec.Node), string(val), clientv3.WithLease(clientv3.LeaseID(lease))); err != nil {
		return c.Explain(err)
	}
	return nil
}
