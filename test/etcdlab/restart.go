package etcdlab

import "github.com/vipctl/vip/test/labtest"

// StartStopped starts again, on their data, every member that is not
// running, and returns once each answers a quorum read. Unlike a Restart of
// one member after another, it starts them all before it waits for any:
// with the whole cluster down, none is healthy until a quorum is back.
func (c *Cluster) StartStopped(t labtest.TB) {
	t.Helper()
	var started []*Etcd
	for _, m := range c.Members {
		if !m.Running() {
			m.start(t)
			started = append(started, m)
		}
	}
	for _, m := range started {
		m.waitHealthy(t)
	}
}
