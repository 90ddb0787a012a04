package e2e_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/etcdlab"
	"github.com/vipctl/vip/test/labtest"
)

// authTokenTTL is short, so that the agents' tokens expire during the test
// and their clients must authenticate again.
const authTokenTTL = 2 * time.Second

// vipRoles are docs/authentication.md's least-privilege roles on /vip/, and a user of
// each (carol is an operator known by her client certificate alone).
func vipRoles() etcdlab.Auth {
	return etcdlab.Auth{
		RootPassword: "root-secret",
		Roles: []etcdlab.Role{
			{Name: "vip-agent", Prefix: "/vip/", Perm: clientv3.PermissionType(clientv3.PermReadWrite)},
			{Name: "vip-operator", Prefix: "/vip/", Perm: clientv3.PermissionType(clientv3.PermReadWrite)},
			{Name: "vip-viewer", Prefix: "/vip/", Perm: clientv3.PermissionType(clientv3.PermRead)},
		},
		Users: []etcdlab.User{
			{Name: "agent", Password: "agent-secret", Roles: []string{"vip-agent"}},
			{Name: "operator", Password: "operator-secret", Roles: []string{"vip-operator"}},
			{Name: "viewer", Password: "viewer-secret", Roles: []string{"vip-viewer"}},
			{Name: "carol", Password: "carol-secret", Roles: []string{"vip-operator"}},
		},
	}
}

// passwordFile writes password to a file of the owner's alone.
func passwordFile(t *testing.T, dir, user, password string) string {
	t.Helper()
	p := filepath.Join(dir, user+".password")
	if err := os.WriteFile(p, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStoreAuthentication, against a real etcd with authentication enabled
// and docs/authentication.md's roles on /vip/: agents claim and move with their
// credentials, through token expiries; an operator moves, by password and
// by client certificate, and the history names who the store
// authenticated; a viewer reads the fleet and the history and is refused
// a move in one sentence naming the permission (exit 6); a wrong password,
// no credentials and a certificate of another CA are refused in one
// sentence, exit 2.
func TestStoreAuthentication(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := etcdlab.NewPKI(t, dir, "good", netip.MustParseAddr("192.0.2.1"))
	other := etcdlab.NewPKI(t, dir, "other", netip.MustParseAddr("192.0.2.1"))
	carolCert, carolKey := good.Client(t, "carol")
	strangerCert, strangerKey := other.Client(t, "carol")
	roles := vipRoles()
	pw := map[string]string{}
	for _, u := range roles.Users {
		pw[u.Name] = passwordFile(t, dir, u.Name, u.Password)
	}
	f := newFleetLabOn(t, func(h *lab.Host) *etcdlab.Etcd {
		e := etcdlab.StartEtcdTLS(t, h, good.Files, etcdlab.AuthTokenTTL(authTokenTTL))
		e.EnableAuth(t, roles)
		return e
	}, "--store-user", "agent", "--store-password-file", pw["agent"])
	st := f.storeURL
	as := func(user string) []string {
		return []string{"--store", st, "--store-user", user, "--store-password-file", pw[user]}
	}
	const addr = "192.0.2.10"
	mustVip(t, f.a, f.sa, "claim", addr, "--reason", "service up")
	mustVip(t, f.b, f.sb, "claim", addr, "--standby")

	// The viewer reads, and may not write.
	viewFleet := func(want string) {
		t.Helper()
		out := mustVip(t, f.client, f.sc, append([]string{"fleet", "--json"}, as("viewer")...)...)
		if !strings.Contains(out, `"node": "`+want+`"`) {
			t.Errorf("vip fleet --json as the viewer: want %s holding %s in\n%s", want, addr, out)
		}
	}
	viewFleet("a")
	mustVip(t, f.client, f.sc, append([]string{"history"}, as("viewer")...)...)
	refused := []struct {
		name string
		args []string
		env  []string
		code int
		want string
	}{
		{"the viewer's move", append([]string{"move", addr, "--to", "b"}, as("viewer")...), nil, 6,
			`vip: the store refused the write: user "viewer" has no write permission on /vip/ (ask for a role with readwrite on the prefix)`},
		{"a wrong password", []string{"fleet", "--store", st, "--store-user", "operator", "--store-password-file", pw["viewer"]}, nil, 2,
			`refused user "operator": wrong user or password (check --store-user and --store-password-file, or VIP_STORE_USER and VIP_STORE_PASSWORD)`},
		{"a wrong password in the environment", []string{"fleet", "--store", st}, []string{"VIP_STORE_USER=operator", "VIP_STORE_PASSWORD=nope"}, 2,
			"wrong user or password"},
		{"no credentials", []string{"fleet", "--store", st}, nil, 2, "has authentication enabled and vip gave no user"},
		{"a certificate of another CA", []string{"move", addr, "--to", "b", "--store", tlsURL(f.etcd), "--store-ca", good.CA,
			"--store-cert", strangerCert, "--store-key", strangerKey}, nil, 2, "check --store-ca, --store-cert and --store-key"},
	}
	for _, tc := range refused {
		out, code := vipEnvOn(t, f.client, f.sc, tc.env, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.want) || strings.Count(strings.TrimSpace(out), "\n") > 0 {
			t.Errorf("%s: got exit %d:\n%s\nwant exit %d and one line with %q", tc.name, code, out, tc.code, tc.want)
		} else if why := labtest.CheckMessage(out); why != "" {
			t.Errorf("%s: the message %s: %q", tc.name, why, out)
		}
	}
	viewFleet("a")
	// An agent with the viewer's credentials may not join: exit 6, its
	// last line one sentence naming the permission.
	viewerAgent := labtest.Start(t, f.client, vipBin, append([]string{"agent", "--socket", f.sc, "--node", "v", "--lease-ttl", fleetTTL}, as("viewer")...)...)
	if code := viewerAgent.Wait(t, 20*time.Second); code != 6 || !strings.Contains(viewerAgent.Output(), "permission") {
		t.Errorf("an agent with the viewer's credentials: exit %d, want 6 naming the permission:\n%s", code, viewerAgent.Output())
	} else if why := labtest.CheckLastLine(viewerAgent.Output()); why != "" {
		t.Errorf("an agent with the viewer's credentials: its message %s:\n%s", why, viewerAgent.Output())
	}

	// Every token the agents got has expired a few times over: they renew,
	// watch and write all the same.
	deadline := time.Now().Add(3 * authTokenTTL)
	for time.Now().Before(deadline) {
		for _, h := range []struct {
			host *lab.Host
			sock string
		}{{f.a, f.sa}, {f.b, f.sb}} {
			if out, code := vipOn(t, h.host, h.sock, "status", "--check"); code != 0 {
				t.Fatalf("%s after its token expired: status --check exit %d:\n%s", h.host.Name, code, out)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The operator moves, by password (from the environment) and then by
	// client certificate.
	opEnv := []string{"VIP_STORE_USER=operator", "VIP_STORE_PASSWORD=" + roles.Users[1].Password}
	if out, code := vipEnvOn(t, f.client, f.sc, opEnv, "move", addr, "--to", "b", "--reason", "by password", "--traffic-window", "0", "--store", st); code != 0 {
		t.Fatalf("the operator's move: exit %d:\n%s", code, out)
	}
	viewFleet("b")
	mustVip(t, f.client, f.sc, "move", addr, "--to", "a", "--reason", "by certificate", "--traffic-window", "0",
		"--store", tlsURL(f.etcd), "--store-ca", good.CA, "--store-cert", carolCert, "--store-key", carolKey)
	viewFleet("a")

	// The history names who the store authenticated.
	want := map[string]string{"claim a (service up)": "agent", "move b from a (by password)": "operator", "move a from b (by certificate)": "carol"}
	h := historyOf(t, f, as("viewer")[2:]...)
	got := map[string]string{}
	for _, c := range h.Changes {
		if c.Addr == addr {
			got[changeLine(c)] = c.Identity
		}
	}
	for line, who := range want {
		if got[line] != who {
			t.Errorf("history: %q by store user %q, want %q (all: %v)", line, got[line], who, got)
		}
	}
	text := mustVip(t, f.client, f.sc, append([]string{"history", addr}, as("viewer")...)...)
	if !strings.Contains(text, "(store user operator)") || !strings.Contains(text, "(store user carol)") {
		t.Errorf("vip history %s does not name the store users:\n%s", addr, text)
	}
	for _, c := range h.Changes {
		if c.Identity == "" {
			t.Errorf("%s: no store user, want the one the store authenticated its writer as", c.Summary)
		}
	}
}

// tlsURL is etcds://IP:PORT of e's TLS endpoint.
func tlsURL(e *etcdlab.Etcd) string {
	return "etcds://" + strings.TrimPrefix(e.TLSEndpoint(), "https://")
}

// TestAgentCredentialsRefused: authentication turned on under a running
// fleet whose agents have no credentials (issue 35's tryout). A claim
// through such an agent exits 2 with the store's one sentence, as the same
// refusal of the CLI's own request does, not 1; and an agent asked about
// the fleet again and again (vip watch polls it) logs the refusal once,
// not an ERROR a request.
func TestAgentCredentialsRefused(t *testing.T) {
	t.Parallel()
	f := newFleetLab(t)
	mustVip(t, f.a, f.sa, "claim", "192.0.2.10")
	f.etcd.EnableAuth(t, vipRoles())
	out, code := vipOn(t, f.a, f.sa, "claim", "192.0.2.20")
	if code != 2 || !strings.Contains(out, "has authentication enabled and vip gave no user") || strings.Count(strings.TrimSpace(out), "\n") > 0 {
		t.Errorf("a claim through an agent without credentials: exit %d:\n%s\nwant exit 2, one line saying the store asks for a user", code, out)
	}
	// The live view asks its agent for the fleet every second.
	c := api.NewClient(f.sa)
	for range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.Fleet(ctx)
		cancel()
		var remote *api.RemoteError
		if !errors.As(err, &remote) || remote.Code != api.CodeCredentials {
			t.Fatalf("the agent's fleet without credentials: %v, want the store's refusal as %q", err, api.CodeCredentials)
		}
	}
	if n := strings.Count(f.agentA.Output(), "has authentication enabled and vip gave no user"); n != 1 {
		t.Errorf("the agent logged the store's refusal %d times over a claim and 10 reads of the fleet, want once:\n%s", n, f.agentA.Output())
	}
}
