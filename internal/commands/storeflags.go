package commands

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vip/internal/agent"
	"github.com/vipctl/vip/internal/failsafe"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/store"
)

// storeEnv names the environment variable that gives --store its default,
// so that an agent started by vip claim, which inherits the environment,
// is guarded by the same store as one started by hand.
const storeEnv = "VIP_STORE"

// The environment variables that give the store user and its password
// when --store-user and --store-password-file are not given. No flag
// carries the password itself: the command line of every process is
// every user's to read.
const (
	storeUserEnv     = "VIP_STORE_USER"
	storePasswordEnv = "VIP_STORE_PASSWORD"
)

// storeOptions are the flags that reach the store, the same on vip agent,
// vip move and vip fleet.
type storeOptions struct {
	URL    string
	Prefix string
	CA     string
	Cert   string
	Key    string
	// User is the etcd user; PasswordFile holds its password.
	User         string
	PasswordFile string
	// password is the user's, read by check from PasswordFile or the
	// environment.
	password string
	// given lists the store flags the command line gave, for the check
	// that they come with a store.
	given []string
}

// storeFlagNames are the flags addFlags adds; agentStoreOptions adds more.
var storeFlagNames = []string{"store-prefix", "store-ca", "store-cert", "store-key", "store-user", "store-password-file"}

func (s *storeOptions) addFlags(c *cobra.Command) {
	f := c.Flags()
	// The default is read from the environment when the command runs
	// (parsed), not here: help, man pages and completions say the same
	// whatever the environment of whoever generated them.
	f.StringVar(&s.URL, "store", "", "the etcd store that guards claims: etcd://HOST:PORT[,HOST:PORT...], etcds:// for TLS (default $"+storeEnv+")")
	f.StringVar(&s.Prefix, "store-prefix", store.DefaultPrefix, "the key prefix of vip's records in the store")
	f.StringVar(&s.CA, "store-ca", "", "PEM file of the CA that signs the store's certificates")
	f.StringVar(&s.Cert, "store-cert", "", "PEM file of this client's certificate for the store (with --store-key)")
	f.StringVar(&s.Key, "store-key", "", "PEM file of the key of --store-cert")
	f.StringVar(&s.User, "store-user", "", "the etcd user vip authenticates as, with --store-password-file (default $"+storeUserEnv+")")
	f.StringVar(&s.PasswordFile, "store-password-file", "", "file holding the password of --store-user, not readable by every user (else $"+storePasswordEnv+" holds it; no flag takes the password itself)")
	_ = c.RegisterFlagCompletionFunc("store-user", cobra.NoFileCompletions)
	_ = c.RegisterFlagCompletionFunc("store", cobra.NoFileCompletions)
	_ = c.RegisterFlagCompletionFunc("store-prefix", cobra.NoFileCompletions)
}

// parsed takes --store from the environment unless the command line gave
// it, and notes which of names the command line gave.
func (s *storeOptions) parsed(c *cobra.Command, names ...string) {
	if !c.Flags().Changed("store") {
		s.URL = os.Getenv(storeEnv)
	}
	if !c.Flags().Changed("store-user") {
		s.User = os.Getenv(storeUserEnv)
	}
	s.given = nil
	for _, n := range names {
		if c.Flags().Changed(n) {
			s.given = append(s.given, n)
		}
	}
}

// check refuses a malformed store address or prefix, and store flags
// without a store, before anything connects.
func (s *storeOptions) check() error {
	if s.URL == "" {
		if len(s.given) > 0 {
			return badInput("--%s shapes how vip reaches the store: give --store etcd://HOST:PORT too (or set %s)", s.given[0], storeEnv)
		}
		return nil
	}
	if _, _, err := store.ParseURL(s.URL); err != nil {
		return badInput("%v: give it as etcd://HOST:PORT[,HOST:PORT...]", err)
	}
	if err := store.CheckPrefix(s.Prefix); err != nil {
		return &inputError{err: err}
	}
	if (s.Cert == "") != (s.Key == "") {
		return badInput("--store-cert and --store-key go together: give both, or neither")
	}
	return s.readPassword()
}

// readPassword reads the password of the store user from
// --store-password-file, else from the environment.
func (s *storeOptions) readPassword() error {
	s.password = ""
	switch {
	case s.PasswordFile != "":
		p, err := readPasswordFile(s.PasswordFile)
		if err != nil {
			return err
		}
		s.password = p
	default:
		s.password = os.Getenv(storePasswordEnv)
	}
	switch {
	case s.User == "" && s.PasswordFile != "":
		return badInput("--store-password-file is the password of a store user: give --store-user too (or set %s)", storeUserEnv)
	case s.User != "" && s.password == "":
		return badInput("store user %q needs its password: give --store-password-file FILE (or set %s)", s.User, storePasswordEnv)
	}
	if s.User == "" {
		// A password in the environment with no user to go with it
		// authenticates nobody.
		s.password = ""
	}
	return nil
}

// readPasswordFile returns the password in file, less one trailing
// newline. A file every user may read is refused: its password is
// anyone's.
func readPasswordFile(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", badInput("--store-password-file: %v", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", badInput("--store-password-file: %v", err)
	}
	if mode := fi.Mode(); !mode.IsRegular() {
		return "", badInput("--store-password-file %s is not a regular file: give the file that holds the password", file)
	} else if mode.Perm()&0o004 != 0 {
		return "", badInput("--store-password-file %s is readable by every user (mode %04o): make it the owner's alone, chmod 600 %s (or 640 for a group)", file, mode.Perm(), file)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPasswordLen+1))
	if err != nil {
		return "", badInput("--store-password-file: %v", err)
	}
	if len(b) > maxPasswordLen {
		return "", badInput("--store-password-file %s holds more than %d bytes: it holds the password alone", file, maxPasswordLen)
	}
	p := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if p == "" {
		return "", badInput("--store-password-file %s is empty: write the password of --store-user in it", file)
	}
	return p, nil
}

// maxPasswordLen bounds a password file: a password, not a key ring.
const maxPasswordLen = 4096

func (s *storeOptions) config() store.Config {
	return store.Config{URL: s.URL, Prefix: s.Prefix, CA: s.CA, Cert: s.Cert, Key: s.Key, User: s.User, Password: s.password}
}

// open connects to the store for a client command (vip move, vip fleet),
// which needs one.
func (s *storeOptions) open(ctx context.Context, cmd string) (*store.Client, error) {
	if s.URL == "" {
		return nil, badInput("vip %s talks to the store: give --store etcd://HOST:PORT (or set %s)", cmd, storeEnv)
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	return store.Open(ctx, s.config())
}

// defaultFailsafeListen is where an agent answers failsafe questions.
var defaultFailsafeListen = fmt.Sprintf(":%d", failsafe.DefaultPort)

// agentStoreOptions are the agent's store flags: how to reach it, and who
// the agent is there.
type agentStoreOptions struct {
	storeOptions
	Node     string
	LeaseTTL time.Duration
	// Failsafe and where it listens and says it does (agent.StoreConfig);
	// failsafeAsked, whether --failsafe was given.
	Failsafe          bool
	FailsafeListen    string
	FailsafeAdvertise string
	failsafeAsked     bool
}

func (s *agentStoreOptions) addFlags(c *cobra.Command) {
	s.storeOptions.addFlags(c)
	f := c.Flags()
	f.StringVar(&s.Node, "node", "", "this agent's name in the store (default: the host name)")
	f.DurationVar(&s.LeaseTTL, "lease-ttl", fleet.DefaultTTL, "the lease's time to live: how long a dead agent's addresses stay unanswered before a standby takes them")
	f.BoolVar(&s.Failsafe, "failsafe", true, "keep answering through a store outage while every other agent of the fleet, asked over UDP, says it cannot reach the store either and promises to take none of this node's addresses; by default, an agent whose failsafe cannot start (its port taken, no address to advertise) runs without it and says so, and with --failsafe given it does not start")
	f.StringVar(&s.FailsafeListen, "failsafe-listen", defaultFailsafeListen, "where the agent answers the other agents' failsafe questions (UDP ADDR:PORT; open it between the fleet's hosts)")
	f.StringVar(&s.FailsafeAdvertise, "failsafe-advertise", "", "the address the other agents ask this one at, in its record (default: the one this host reaches the store from)")
	_ = c.RegisterFlagCompletionFunc("node", cobra.NoFileCompletions)
	_ = c.RegisterFlagCompletionFunc("lease-ttl", cobra.NoFileCompletions)
	_ = c.RegisterFlagCompletionFunc("failsafe-listen", cobra.NoFileCompletions)
	_ = c.RegisterFlagCompletionFunc("failsafe-advertise", cobra.NoFileCompletions)
}

func (s *agentStoreOptions) parsed(c *cobra.Command) {
	s.storeOptions.parsed(c, append([]string{"node", "lease-ttl", "failsafe", "failsafe-listen", "failsafe-advertise"}, storeFlagNames...)...)
	// Where it listens or says it does, given, asks for it too.
	s.failsafeAsked = s.Failsafe && (c.Flags().Changed("failsafe") || c.Flags().Changed("failsafe-listen") || c.Flags().Changed("failsafe-advertise"))
}

func (s *agentStoreOptions) check() error {
	if err := s.storeOptions.check(); err != nil || s.URL == "" {
		return err
	}
	if s.Node != "" {
		if err := store.CheckNode(s.Node); err != nil {
			return badInput("--node: %v", err)
		}
	}
	if err := fleet.CheckTTL(s.LeaseTTL); err != nil {
		return &inputError{err: err}
	}
	if s.Failsafe {
		listen := s.FailsafeListen
		if strings.HasPrefix(listen, ":") {
			listen = "0.0.0.0" + listen
		}
		if _, err := netip.ParseAddrPort(listen); err != nil {
			return badInput("--failsafe-listen %q is not ADDR:PORT or :PORT", s.FailsafeListen)
		}
	}
	return nil
}

func (s *agentStoreOptions) config() agent.StoreConfig {
	if s.URL == "" {
		return agent.StoreConfig{}
	}
	return agent.StoreConfig{Config: s.storeOptions.config(), Node: s.Node, TTL: s.LeaseTTL,
		Failsafe: s.Failsafe, FailsafeAsked: s.failsafeAsked, FailsafeListen: s.FailsafeListen, FailsafeAdvertise: s.FailsafeAdvertise}
}

// guardedForeground refuses claim --foreground where claims are guarded by
// a store: the guard (the lease, its renewals, fencing) lives in the agent.
func guardedForeground() error {
	return badInput("%s is set, and a claim guarded by the store is held by the agent, which keeps the lease: drop --foreground, or unset %s for an unguarded claim", storeEnv, storeEnv)
}
