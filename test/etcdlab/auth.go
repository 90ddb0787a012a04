package etcdlab

import (
	"context"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vipctl/vip/test/labtest"
)

// Option changes how StartEtcd and StartEtcdTLS run etcd.
type Option func(*Etcd)

func (e *Etcd) apply(opts []Option) {
	for _, o := range opts {
		o(e)
	}
}

// AuthTokenTTL makes the tokens etcd hands out at authentication expire
// after ttl unused (etcd's --auth-token-ttl, 300 s by default), so that a
// test sees its clients authenticate again.
func AuthTokenTTL(ttl time.Duration) Option {
	return func(e *Etcd) {
		e.args = append(e.args, "--auth-token-ttl", strconv.Itoa(int(ttl/time.Second)))
	}
}

// Role is an etcd role with one permission on the keys under Prefix.
type Role struct {
	Name   string
	Prefix string
	Perm   clientv3.PermissionType
}

// User is an etcd user and its roles.
type User struct {
	Name, Password string
	Roles          []string
}

// Auth is what EnableAuth creates before it turns authentication on.
type Auth struct {
	// RootPassword is root's, the user etcd needs before it enables
	// authentication.
	RootPassword string
	Roles        []Role
	Users        []User
}

// EnableAuth creates root (with the root role), the roles and the users of
// a, and enables authentication, as the etcdctl commands of docs/authentication.md do:
// from then on every request to the store needs a user, or a client
// certificate whose common name is one on the TLS endpoint.
func (e *Etcd) EnableAuth(t labtest.TB, a Auth) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), healthyTimeout)
	defer cancel()
	cli := e.status
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("enable authentication on etcd in %s: %s: %v", e.Host.Name, what, err)
		}
	}
	_, err := cli.RoleAdd(ctx, "root")
	step("add role root", err)
	_, err = cli.UserAdd(ctx, "root", a.RootPassword)
	step("add user root", err)
	_, err = cli.UserGrantRole(ctx, "root", "root")
	step("grant root the role root", err)
	for _, r := range a.Roles {
		_, err = cli.RoleAdd(ctx, r.Name)
		step("add role "+r.Name, err)
		_, err = cli.RoleGrantPermission(ctx, r.Name, r.Prefix, clientv3.GetPrefixRangeEnd(r.Prefix), r.Perm)
		step("grant role "+r.Name+" its permission on "+r.Prefix, err)
	}
	for _, u := range a.Users {
		_, err = cli.UserAdd(ctx, u.Name, u.Password)
		step("add user "+u.Name, err)
		for _, r := range u.Roles {
			_, err = cli.UserGrantRole(ctx, u.Name, r)
			step("grant "+u.Name+" the role "+r, err)
		}
	}
	_, err = cli.AuthEnable(ctx)
	step("auth enable", err)
}
