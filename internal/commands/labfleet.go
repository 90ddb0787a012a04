package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/vipctl/vip/internal/agent"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/lab"
)

// The fleet lab (vip lab up --fleet): the lab's hosts, a third agent host
// c, and a host of its own for the store, Debian's etcd. The store runs as
// its own program rather than inside vip: embedding etcd's server
// (go.etcd.io/etcd/server/v3/embed) made the vip binary 10.6 MB larger (34.8
// to 45.4 MB), every vip process 7.7 MB larger at start (28.5 to 36.2 MB:
// this kernel maps a binary's pages whole) and its start 2 ms slower, for a
// lab a newcomer runs a few times.
const (
	labStoreHost = "store"
	labStoreURL  = "etcd://192.0.2.5:2379"
	// labFleetReady bounds how long vip lab up --fleet waits for the store
	// and for the agents to join it.
	labFleetReady = 30 * time.Second
)

var labFleetHosts = []lab.HostConfig{
	{Name: "c", IPv4: netip.MustParsePrefix("192.0.2.4/24"), IPv6: netip.MustParsePrefix("2001:db8::4/64")},
	{Name: labStoreHost, IPv4: netip.MustParsePrefix("192.0.2.5/24")},
}

// labAgents are the hosts whose guarded agents vip lab up --fleet starts.
var labAgents = []string{"a", "b", "c"}

// allLabHosts are the hosts of either lab: what down cleans and exec may
// name.
func allLabHosts() []lab.HostConfig { return append(slices.Clone(labHosts), labFleetHosts...) }

// isFleet says whether the lab that is up has a store.
func (e *labEnv) isFleet() bool {
	_, err := os.Stat(filepath.Join("/run/netns", lab.NetnsName(e.prefix, labStoreHost)))
	return err == nil
}

// storeDir is where the lab's etcd keeps its data; its log is beside it.
func (e *labEnv) storeDir() string { return filepath.Join(e.dir, e.prefix+"-etcd") }

// upFleet builds the fleet lab: the hosts, etcd in the store host, and a
// guarded agent on a, b and c, and returns once vip fleet lists the three.
func (e *labEnv) upFleet(ctx context.Context, d *deps) error {
	etcd, err := exec.LookPath("etcd")
	if err != nil {
		return errors.New("the fleet lab runs Debian's etcd as its store, and no etcd is installed: install it with \"sudo apt-get install etcd-server\" (make deps does), then run vip lab up --fleet again")
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the vip binary to start the lab's agents: %w", err)
	}
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		return fmt.Errorf("the lab's directory: %w", err)
	}
	if _, err := lab.Up(ctx, lab.Config{Prefix: e.prefix, Hosts: allLabHosts()}); err != nil {
		return err
	}
	start := time.Now()
	url := "http://192.0.2.5:"
	if err := e.spawn(labStoreHost, e.storeDir()+".log", etcd, "--name", "lab", "--data-dir", e.storeDir(),
		"--listen-client-urls", url+"2379", "--advertise-client-urls", url+"2379",
		"--listen-peer-urls", url+"2380", "--initial-advertise-peer-urls", url+"2380",
		"--initial-cluster", "lab="+url+"2380"); err != nil {
		return fmt.Errorf("start the lab's etcd: %w", err)
	}
	if err := e.waitFleet(ctx, exe, nil); err != nil {
		return fmt.Errorf("the lab's etcd did not answer within %v (see %s): %w", labFleetReady, e.storeDir()+".log", err)
	}
	storeUp := time.Since(start)
	for _, h := range labAgents {
		if err := e.spawn(h, agent.PathsFor(e.socket(h)).Log, exe, "agent", "--socket", e.socket(h), "--node", h, "--store", labStoreURL); err != nil {
			return fmt.Errorf("start lab host %s's agent: %w", h, err)
		}
	}
	if err := e.waitFleet(ctx, exe, labAgents); err != nil {
		return fmt.Errorf("the lab's agents did not all join the store within %v (see their logs in %s): %w", labFleetReady, e.dir, err)
	}
	fmt.Fprintf(d.io.Out, "fleet lab up: etcd on host store (192.0.2.5, ready in %.1f s), guarded agents on a 192.0.2.1, b 192.0.2.2 and c 192.0.2.4; client 192.0.2.3\n", storeUp.Seconds())
	fmt.Fprintf(d.io.Out, "inside the lab VIP_STORE is %s: try %s, %s, then %s; remove it all, the store's data too, with: %s\n",
		labStoreURL, labHint("exec a -- vip claim 192.0.2.10"), labHint("exec b -- vip claim 192.0.2.10 --standby"), labHint("exec client -- vip fleet"), labHint("down"))
	return nil
}

// spawn starts name in host's namespace, in a session of its own with its
// output in logPath, and leaves it running: down stops it.
func (e *labEnv) spawn(host, logPath, name string, args ...string) error {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command("ip", append([]string{"netns", "exec", lab.NetnsName(e.prefix, host), name}, args...)...)
	cmd.Env = append(os.Environ(), "VIP_SOCKET="+e.socket(host))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	return cmd.Process.Release()
}

// waitFleet waits until vip fleet, run in the client host, reads the
// store and lists every node of nodes.
func (e *labEnv) waitFleet(ctx context.Context, exe string, nodes []string) error {
	deadline := time.Now().Add(labFleetReady)
	var last string
	for {
		cmd, err := e.command(ctx, "client", exe, "fleet", "--json", "--store", labStoreURL)
		if err != nil {
			return err
		}
		out, err := cmd.CombinedOutput()
		if err == nil {
			var f api.FleetResponse
			if jerr := json.Unmarshal(out, &f); jerr != nil {
				return fmt.Errorf("vip fleet --json: %w", jerr)
			}
			missing := slices.DeleteFunc(slices.Clone(nodes), func(n string) bool {
				return slices.ContainsFunc(f.Nodes, func(fn api.FleetNode) bool { return fn.Node == n })
			})
			if len(missing) == 0 {
				return nil
			}
			last = "not joined yet: " + strings.Join(missing, ", ")
		} else {
			last = strings.TrimSpace(string(out))
		}
		if time.Now().After(deadline) {
			return errors.New(last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
