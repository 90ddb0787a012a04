// Package etcdlab runs a real etcd server, Debian's etcd-server, inside the
// hosts of a lab, for the tests of the claims guarded in a store.
//
// StartEtcd runs one member in a host, StartEtcdCluster three or more, each
// with its own data directory; both return once the store answers a quorum
// read. An Etcd can be stopped, killed (SIGKILL) and restarted on the same
// data directory; a Cluster finds and kills its leader. Client gives the test
// process a client whose connections are made from inside a lab host
// (labtest.DialIn), never from the root network namespace the test runs in.
// labtest.Isolate cuts hosts off from the store.
//
// The tests that use it skip when not run as root or without the etcd binary,
// saying why, and fail instead under CI=true.
package etcdlab
