package etcdlab

import (
	"fmt"
	"time"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/labtest"
)

// electionTimeout bounds the wait for the running members to agree on a
// leader: etcd's election timeout is a second, and a busy machine may need
// a few rounds.
const electionTimeout = 30 * time.Second

// Cluster is an etcd cluster with one member in each of its hosts, started
// by StartEtcdCluster.
type Cluster struct {
	// Members are the members in the order of their hosts.
	Members []*Etcd
}

// StartEtcdCluster runs one etcd member in each host, three for a cluster
// that survives the loss of one, joined through --initial-cluster, and
// returns once every member answers a quorum read. The test's cleanup kills
// them and removes their data directories.
func StartEtcdCluster(t labtest.TB, hosts ...*lab.Host) *Cluster {
	t.Helper()
	if len(hosts) < 3 {
		t.Fatalf("etcd cluster of %d lab hosts: want three or more, so that it keeps a quorum when one member is lost (StartEtcd runs a single member)", len(hosts))
	}
	c := &Cluster{}
	token := "vip-" + hosts[0].Netns
	for _, h := range hosts {
		c.Members = append(c.Members, newMember(t, h, token, hosts))
	}
	// Every member is started before any is waited for: none is healthy
	// until a quorum of them is up.
	for _, m := range c.Members {
		m.start(t)
	}
	for _, m := range c.Members {
		m.waitHealthy(t)
	}
	return c
}

// Endpoints returns every member's client URL, in the order of Members.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.Members))
	for i, m := range c.Members {
		eps[i] = m.Endpoint()
	}
	return eps
}

// Leader waits until every running member follows the same leader, itself
// a running member, and returns it.
func (c *Cluster) Leader(t labtest.TB) *Etcd {
	t.Helper()
	var leader *Etcd
	labtest.Eventually(t, electionTimeout, func() (bool, string) {
		var why string
		leader, why = c.agreedLeader()
		return leader != nil, why
	})
	return leader
}

// agreedLeader returns the leader every running member follows, or nil and
// why there is none yet.
func (c *Cluster) agreedLeader() (*Etcd, string) {
	byID := make(map[uint64]*Etcd)
	var leaderID uint64
	for _, m := range c.Members {
		if !m.Running() {
			continue
		}
		self, leader, err := m.memberStatus()
		switch {
		case err != nil:
			return nil, fmt.Sprintf("member %s: %v", m.Name, err)
		case leader == 0:
			return nil, fmt.Sprintf("member %s follows no leader", m.Name)
		case leaderID != 0 && leader != leaderID:
			return nil, fmt.Sprintf("member %s follows leader %x, another member %x", m.Name, leader, leaderID)
		}
		byID[self] = m
		leaderID = leader
	}
	if leaderID == 0 {
		return nil, "no member is running"
	}
	l, ok := byID[leaderID]
	if !ok {
		return nil, fmt.Sprintf("the members follow leader %x, which is not running", leaderID)
	}
	return l, ""
}

// KillLeader kills the current leader with SIGKILL and returns it, for the
// test to restart it later.
func (c *Cluster) KillLeader(t labtest.TB) *Etcd {
	t.Helper()
	l := c.Leader(t)
	l.Kill(t)
	return l
}
