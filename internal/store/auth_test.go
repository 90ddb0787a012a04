package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// TestExplainAuth: etcd's refusals, as gRPC statuses or as the client's
// errors, each become one sentence of their kind naming the fix.
func TestExplainAuth(t *testing.T) {
	t.Parallel()
	c := &Client{Endpoints: []string{"http://192.0.2.5:2379"}, Keys: NewKeys("/vip/"), identity: "viewer"}
	tests := []struct {
		name string
		err  error
		is   error
		want string
	}{
		{"wrong password", rpctypes.ErrGRPCAuthFailed, ErrCredentials, `the store at http://192.0.2.5:2379 refused user "viewer": wrong user or password (check --store-user and --store-password-file, or VIP_STORE_USER and VIP_STORE_PASSWORD)`},
		{"wrong password, the client's error", rpctypes.ErrAuthFailed, ErrCredentials, "wrong user or password"},
		{"no user", rpctypes.ErrGRPCUserEmpty, ErrCredentials, "has authentication enabled and vip gave no user: give --store-user"},
		{"no write permission", rpctypes.ErrGRPCPermissionDenied, ErrDenied, `the store refused the write: user "viewer" has no write permission on /vip/ (ask for a role with readwrite on the prefix)`},
		{"no write permission, wrapped", fmt.Errorf("move: %w", rpctypes.ErrPermissionDenied), ErrDenied, "has no write permission on /vip/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := c.Explain(tt.err)
			if !errors.Is(got, tt.is) || !strings.Contains(got.Error(), tt.want) || strings.Contains(got.Error(), "\n") {
				t.Errorf("Explain(%v): got %q, want one sentence with %q that is %v", tt.err, got, tt.want, tt.is)
			}
		})
	}
	if got := c.explain(rpctypes.ErrGRPCPermissionDenied, true).Error(); !strings.Contains(got, `user "viewer" has no read permission on /vip/ (ask for a role with read on the prefix)`) {
		t.Errorf("a refused read: got %q", got)
	}
	if got := (&Client{Keys: NewKeys("/vip/")}).Explain(rpctypes.ErrGRPCPermissionDenied).Error(); !strings.Contains(got, "this client has no write permission") {
		t.Errorf("a refused write with no identity: got %q", got)
	}
}

// TestOpenUserNeedsPassword: a user without its password is refused before
// anything connects.
func TestOpenUserNeedsPassword(t *testing.T) {
	t.Parallel()
	_, err := Open(t.Context(), Config{URL: "etcd://192.0.2.5:2379", User: "operator"})
	if err == nil || !strings.Contains(err.Error(), "goes with its password") {
		t.Errorf("got %v, want the user refused without its password", err)
	}
}
