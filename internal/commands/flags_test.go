package commands

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/announce/bpfresp"
	"github.com/vipctl/vip/internal/agent"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/hook"
	"github.com/vipctl/vip/internal/metrics"
	"github.com/vipctl/vip/internal/store"
)

// parse runs the command's flag parsing and returns what its run function
// was given, without running anything.
func parse[O any](t *testing.T, build func(*deps, func(context.Context, *O) error) *cobra.Command, args ...string) O {
	t.Helper()
	var got *O
	c := build(&deps{}, func(_ context.Context, o *O) error { got = o; return nil })
	c.SetArgs(args)
	if err := c.Execute(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return *got
}

func TestAgentFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want agentOptions
	}{
		{"defaults", nil, agentOptions{Rate: announce.DefaultRate, Responder: responderOptions{Mode: "auto", Hook: "tcx"}, Metrics: metricsOptions{MaxAddrs: metrics.DefaultMaxAddrs},
			Store: agentStoreOptions{storeOptions: storeOptions{Prefix: store.DefaultPrefix}, LeaseTTL: fleet.DefaultTTL, Failsafe: true, FailsafeListen: defaultFailsafeListen}, OnStop: "keep", Linger: agent.DefaultLinger, Hooks: hookOptions{Timeout: hook.DefaultTimeout}}},
		{"every flag", []string{"--group", "vip", "--clean", "--rate", "100", "--log-file", "/tmp/vip.log", "--filter", "vlan",
			"--watch-all", "--metrics", ":9469", "--metrics-max-addrs", "8", "--autostarted", "--cpuprofile", "/tmp/cpu",
			"--responder", "ebpf", "--responder-hook", "xdp-generic", "--on-stop", "hand-over", "--linger", "30s",
			"--on-change", "/usr/local/bin/on-change", "--on-change-timeout", "30s"}, agentOptions{
			Group: "vip", Clean: true, Autostarted: true, Rate: 100, LogFile: "/tmp/vip.log", CPUProfile: "/tmp/cpu", Capture: captureOptions{Filter: "vlan", WatchAll: true},
			Responder: responderOptions{Mode: "ebpf", Hook: "xdp-generic", given: true},
			Metrics:   metricsOptions{Addr: ":9469", MaxAddrs: 8, given: true},
			Store:     agentStoreOptions{storeOptions: storeOptions{Prefix: store.DefaultPrefix}, LeaseTTL: fleet.DefaultTTL, Failsafe: true, FailsafeListen: defaultFailsafeListen}, OnStop: "hand-over", Linger: 30 * time.Second,
			Hooks: hookOptions{Program: "/usr/local/bin/on-change", Timeout: 30 * time.Second, timeoutGiven: true}}},
		{"the old name of --watch-all", []string{"--all-traffic"}, agentOptions{Rate: announce.DefaultRate, Capture: captureOptions{WatchAll: true},
			Responder: responderOptions{Mode: "auto", Hook: "tcx"}, Metrics: metricsOptions{MaxAddrs: metrics.DefaultMaxAddrs},
			Store: agentStoreOptions{storeOptions: storeOptions{Prefix: store.DefaultPrefix}, LeaseTTL: fleet.DefaultTTL, Failsafe: true, FailsafeListen: defaultFailsafeListen}, OnStop: "keep", Linger: agent.DefaultLinger, Hooks: hookOptions{Timeout: hook.DefaultTimeout}}},
		{"store flags", []string{"--store", "etcds://192.0.2.5:2379,192.0.2.6:2379", "--node", "a", "--store-prefix", "/lab/",
			"--store-ca", "ca.pem", "--store-cert", "a.pem", "--store-key", "a-key.pem", "--lease-ttl", "10s",
			"--failsafe", "--failsafe-listen", "192.0.2.5:7371", "--failsafe-advertise", "192.0.2.5"}, agentOptions{
			Rate: announce.DefaultRate, Responder: responderOptions{Mode: "auto", Hook: "tcx"}, Metrics: metricsOptions{MaxAddrs: metrics.DefaultMaxAddrs},
			Store: agentStoreOptions{storeOptions: storeOptions{URL: "etcds://192.0.2.5:2379,192.0.2.6:2379", Prefix: "/lab/", CA: "ca.pem", Cert: "a.pem", Key: "a-key.pem",
				given: []string{"node", "lease-ttl", "failsafe", "failsafe-listen", "failsafe-advertise", "store-prefix", "store-ca", "store-cert", "store-key"}}, Node: "a", LeaseTTL: 10 * time.Second,
				Failsafe: true, failsafeAsked: true, FailsafeListen: "192.0.2.5:7371", FailsafeAdvertise: "192.0.2.5"}, OnStop: "keep", Linger: agent.DefaultLinger, Hooks: hookOptions{Timeout: hook.DefaultTimeout}}},
	}
	// --store's default comes from the environment: keep it out.
	t.Setenv(storeEnv, "")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parse(t, newAgentCmd, tt.args...); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestResponderFlags: --responder and --responder-hook take their names
// only, and a hook beside --responder socket is a contradiction.
func TestResponderFlags(t *testing.T) {
	tests := []struct {
		name    string
		opts    responderOptions
		want    agent.ResponderConfig
		wantErr string
	}{
		{"defaults", responderOptions{Mode: "auto", Hook: "tcx"}, agent.ResponderConfig{Mode: agent.ResponderAuto, Hook: bpfresp.TCX}, ""},
		{"ebpf on native XDP", responderOptions{Mode: "ebpf", Hook: "xdp-native"}, agent.ResponderConfig{Mode: agent.ResponderEBPF, Hook: bpfresp.XDPNative}, ""},
		{"socket", responderOptions{Mode: "socket", Hook: "tcx"}, agent.ResponderConfig{Mode: agent.ResponderSocket}, ""},
		{"unknown mode", responderOptions{Mode: "kernel", Hook: "tcx"}, agent.ResponderConfig{}, `--responder: unknown responder "kernel": use auto, ebpf or socket`},
		{"unknown hook", responderOptions{Mode: "auto", Hook: "xdp"}, agent.ResponderConfig{}, `--responder-hook: unknown eBPF hook "xdp": use tcx, xdp-generic or xdp-native`},
		{"hook with socket", responderOptions{Mode: "socket", Hook: "xdp-generic"}, agent.ResponderConfig{}, "--responder-hook places the eBPF responder"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.opts.config()
			if tt.wantErr != "" {
				var in *inputError
				if !errors.As(err, &in) || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an input error (exit 2) starting %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestProbeFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want probeOptions
	}{
		{"defaults", []string{"192.0.2.10"}, probeOptions{Addrs: []string{"192.0.2.10"}, Count: 2, Wait: time.Second, Store: storeOptions{Prefix: store.DefaultPrefix}}},
		{"every flag", []string{"192.0.2.10", "2001:db8::10", "-i", "eth0", "--count", "5", "--wait", "3s", "--json", "--expect", "b", "--store", "etcd://192.0.2.5:2379", "--store-prefix", "/lab/"}, probeOptions{
			Addrs: []string{"192.0.2.10", "2001:db8::10"}, Interface: "eth0", Count: 5, Wait: 3 * time.Second, JSON: true,
			Expect: "b", Store: storeOptions{URL: "etcd://192.0.2.5:2379", Prefix: "/lab/", given: []string{"store-prefix"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parse(t, newProbeCmd, tt.args...); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestVersionFlags(t *testing.T) {
	if got := parse(t, newVersionCmd); got.JSON {
		t.Errorf("defaults: got %+v, want plain output", got)
	}
	if got := parse(t, newVersionCmd, "--json"); !got.JSON {
		t.Errorf("--json: got %+v, want JSON", got)
	}
}

func TestManageFlags(t *testing.T) {
	for _, tt := range []struct {
		name string
		got  any
		want any
	}{
		{"release", parse(t, newReleaseCmd, "192.0.2.10", "--strict", "--json"), addrsOptions{Addrs: []string{"192.0.2.10"}, Strict: true, JSON: true}},
		{"release --all", parse(t, newReleaseCmd, "--all"), addrsOptions{All: true}},
		{"refresh", parse(t, newRefreshCmd, "192.0.2.10", "2001:db8::10"), addrsOptions{Addrs: []string{"192.0.2.10", "2001:db8::10"}}},
		{"refresh --all --json", parse(t, newRefreshCmd, "--all", "--json"), addrsOptions{All: true, JSON: true}},
		{"status", parse(t, newStatusCmd), statusOptions{}},
		{"status --json --check", parse(t, newStatusCmd, "--json", "--check"), statusOptions{JSON: true, Check: true}},
		{"events --json", parse(t, newEventsCmd, "--json"), eventsOptions{JSON: true}},
	} {
		if fmt.Sprint(tt.got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: got %+v, want %+v", tt.name, tt.got, tt.want)
		}
	}
}

func TestLabFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want labOptions
	}{
		{[]string{"up"}, labOptions{Dir: "/run/vip", Name: defaultLabName, Action: "up"}},
		{[]string{"down", "--dir", "/tmp/lab", "--name", "other"}, labOptions{Dir: "/tmp/lab", Name: "other", Action: "down"}},
		{[]string{"exec", "a", "--", "vip", "status", "--json"}, labOptions{Dir: "/run/vip", Name: defaultLabName, Action: "exec", Host: "a", Argv: []string{"vip", "status", "--json"}}},
		{[]string{"demo"}, labOptions{Dir: "/run/vip", Name: defaultLabName, Action: "demo"}},
	} {
		if got := parse(t, newLabCmd, tt.args...); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("vip lab %v: got %+v, want %+v", tt.args, got, tt.want)
		}
	}
}

// TestHookFlags: --on-change takes a program that can run, made absolute,
// and --on-change-timeout a bound in range, beside --on-change only.
func TestHookFlags(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "on-change")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	notExec := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	tests := []struct {
		name     string
		opts     hookOptions
		wantProg string
		wantErr  string
	}{
		{"off", hookOptions{Timeout: hook.DefaultTimeout}, "", ""},
		{"a path", hookOptions{Program: prog, Timeout: time.Second}, prog, ""},
		{"a relative path is made absolute", hookOptions{Program: "./on-change", Timeout: time.Minute}, prog, ""},
		{"the longest timeout", hookOptions{Program: prog, Timeout: hook.MaxTimeout}, prog, ""},
		{"missing", hookOptions{Program: filepath.Join(dir, "missing"), Timeout: time.Second}, "", "cannot run"},
		{"not executable", hookOptions{Program: notExec, Timeout: time.Second}, "", "give the path of an executable program"},
		{"not in PATH", hookOptions{Program: "vip-no-such-hook", Timeout: time.Second}, "", "cannot run"},
		{"no timeout", hookOptions{Program: prog}, "", "--on-change-timeout 0s: give how long a hook may run, more than 0 and at most 10m0s"},
		{"too long", hookOptions{Program: prog, Timeout: hook.MaxTimeout + time.Second}, "", "at most 10m0s"},
		{"a timeout alone", hookOptions{Timeout: time.Second, timeoutGiven: true}, "", "give --on-change too"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts
			err := o.check()
			if tt.wantErr == "" {
				if err != nil || o.Program != tt.wantProg {
					t.Fatalf("got program %q, error %v; want %q and no error", o.Program, err, tt.wantProg)
				}
				return
			}
			if code, _ := exitCode(err); code != ExitBadInput || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got exit %d, error %v; want exit 2 saying %q", code, err, tt.wantErr)
			}
		})
	}
}
