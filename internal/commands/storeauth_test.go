package commands

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/vipctl/vip/internal/store"
)

// writePassword writes a password file of mode perm and returns its path.
func writePassword(t *testing.T, content string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	// WriteFile's mode passes through the umask: set it as asked.
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStoreCredentials: the user comes from --store-user, else
// $VIP_STORE_USER; its password from --store-password-file (less one
// trailing newline), else $VIP_STORE_PASSWORD; what is missing, or a file
// every user may read, is refused with one sentence naming the fix.
func TestStoreCredentials(t *testing.T) {
	const url = "etcd://192.0.2.5:2379"
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		wantUser string
		wantPass string
		// wantErr is part of the sentence of a refusal.
		wantErr string
	}{
		{name: "none", args: nil},
		{name: "flag and file", args: []string{"--store-user", "operator", "--store-password-file", "{0600:s3cret\n}"}, wantUser: "operator", wantPass: "s3cret"},
		{name: "one newline only", args: []string{"--store-user", "operator", "--store-password-file", "{0640:s3cret\n\n}"}, wantUser: "operator", wantPass: "s3cret\n"},
		{name: "CRLF", args: []string{"--store-user", "operator", "--store-password-file", "{0600:s3cret\r\n}"}, wantUser: "operator", wantPass: "s3cret"},
		{name: "environment", env: map[string]string{storeUserEnv: "agent", storePasswordEnv: "pw"}, wantUser: "agent", wantPass: "pw"},
		{name: "flag over environment", args: []string{"--store-user", "operator"}, env: map[string]string{storeUserEnv: "agent", storePasswordEnv: "pw"}, wantUser: "operator", wantPass: "pw"},
		{name: "file over environment", args: []string{"--store-password-file", "{0600:fromfile}"}, env: map[string]string{storeUserEnv: "agent", storePasswordEnv: "pw"}, wantUser: "agent", wantPass: "fromfile"},
		{name: "a password with no user", env: map[string]string{storePasswordEnv: "pw"}},
		{name: "a user with no password", args: []string{"--store-user", "operator"}, wantErr: `store user "operator" needs its password: give --store-password-file FILE (or set VIP_STORE_PASSWORD)`},
		{name: "a file with no user", args: []string{"--store-password-file", "{0600:pw}"}, wantErr: "give --store-user too"},
		{name: "world-readable", args: []string{"--store-user", "operator", "--store-password-file", "{0644:pw}"}, wantErr: "is readable by every user (mode 0644): make it the owner's alone, chmod 600"},
		{name: "empty", args: []string{"--store-user", "operator", "--store-password-file", "{0600:\n}"}, wantErr: "is empty"},
		{name: "missing", args: []string{"--store-user", "operator", "--store-password-file", "/nonexistent/password"}, wantErr: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{storeUserEnv, storePasswordEnv} {
				t.Setenv(k, tt.env[k])
			}
			t.Setenv(storeEnv, url)
			args := append([]string(nil), tt.args...)
			for i, a := range args {
				// {MODE:CONTENT} is a password file to write.
				if strings.HasPrefix(a, "{") {
					var perm os.FileMode
					switch a[1:5] {
					case "0600":
						perm = 0o600
					case "0640":
						perm = 0o640
					case "0644":
						perm = 0o644
					}
					args[i] = writePassword(t, strings.TrimSuffix(a[6:], "}"), perm)
				}
			}
			o := parse(t, newFleetCmd, args...)
			err := o.Store.check()
			if tt.wantErr != "" {
				var in *inputError
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.As(err, &in) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("got %v, want one sentence of bad input with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("check: %v", err)
			}
			cfg := o.Store.config()
			if cfg.User != tt.wantUser || cfg.Password != tt.wantPass {
				t.Errorf("got user %q password %q, want %q and %q", cfg.User, cfg.Password, tt.wantUser, tt.wantPass)
			}
		})
	}
}

// TestStoreCredentialsNeedAStore: the credential flags without a store are
// refused, as the other store flags are.
func TestStoreCredentialsNeedAStore(t *testing.T) {
	t.Setenv(storeEnv, "")
	o := parse(t, newHistoryCmd, "--store-user", "viewer")
	if err := o.Store.check(); err == nil || !strings.Contains(err.Error(), "--store-user shapes how vip reaches the store") {
		t.Errorf("got %v, want --store-user refused without --store", err)
	}
}

// TestCredentialsExitCodes: credentials the store refuses are bad input
// (exit 2), a permission it denies exits 6 and is said once however many
// addresses it was refused for.
func TestCredentialsExitCodes(t *testing.T) {
	denied := &store.DeniedError{User: "viewer", Prefix: "/vip/"}
	joined := errors.Join(denied, &store.DeniedError{User: "viewer", Prefix: "/vip/"})
	for _, tt := range []struct {
		name string
		err  error
		want ExitCode
		text string
	}{
		{"denied", denied, ExitDenied, `the store refused the write: user "viewer" has no write permission on /vip/ (ask for a role with readwrite on the prefix)`},
		{"denied twice", joined, ExitDenied, `the store refused the write: user "viewer" has no write permission on /vip/ (ask for a role with readwrite on the prefix)`},
		{"wrong password", (&store.Client{Endpoints: []string{"http://192.0.2.5:2379"}}).Explain(rpctypes.ErrGRPCAuthFailed), ExitBadInput, "wrong user or password"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, shown := exitCode(tt.err)
			if code != tt.want || !strings.Contains(shown.Error(), tt.text) || strings.Contains(shown.Error(), "\n") {
				t.Errorf("got exit %d, %q; want exit %d, one sentence with %q", code, shown, tt.want, tt.text)
			}
		})
	}
}
