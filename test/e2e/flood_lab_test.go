package e2e_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdlayher/ndp"
	"github.com/mdlayher/packet"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/internal/wire"
	"github.com/vipctl/vip/test/labtest"
	"github.com/vipctl/vip/test/wiretest"
	"github.com/vipctl/vip/tools/loadgen"
)

// floodFor is how long the random flood lasts: a minute, as the design
// asks, or a few seconds with -short.
func floodFor() time.Duration {
	if testing.Short() {
		return 5 * time.Second
	}
	return time.Minute
}

// rssKB reads a process's resident set from /proc.
func rssKB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.Fields(rest)[0])
			return kb
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// randomFlood sends ARP requests and neighbor solicitations for random targets in
// the documentation prefixes, from random askers (random MACs and sender
// addresses), at about rate frames a second, until ctx ends. It returns how
// many it sent.
func randomFlood(ctx context.Context, t *testing.T, h *lab.Host, rate int) (int64, error) {
	var sent atomic.Int64
	err := lab.InNetns("/run/netns/"+h.Netns, func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		c, err := packet.Listen(ifi, packet.Raw, wire.EtherTypeARP, nil)
		if err != nil {
			return err
		}
		defer c.Close()
		r := rand.New(rand.NewPCG(1, 2))
		bcast := &packet.Addr{HardwareAddr: wire.Broadcast}
		prefixes := [][3]byte{{192, 0, 2}, {198, 51, 100}, {203, 0, 113}}
		const batch = 100
		tick := time.NewTicker(time.Second * batch / time.Duration(rate))
		defer tick.Stop()
		for ctx.Err() == nil {
			for range batch {
				asker := net.HardwareAddr{0x02, byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())}
				var frame []byte
				if r.IntN(2) == 0 {
					p := prefixes[r.IntN(3)]
					target := netip.AddrFrom4([4]byte{p[0], p[1], p[2], byte(20 + r.IntN(230))})
					sender := netip.AddrFrom4([4]byte{p[0], p[1], p[2], byte(20 + r.IntN(230))})
					frame, err = wiretest.ARPFrame(wire.Broadcast, asker, 1, asker, sender, net.HardwareAddr{0, 0, 0, 0, 0, 0}, target)
				} else {
					var tb, sb [16]byte
					copy(tb[:], []byte{0x20, 0x01, 0x0d, 0xb8, 0, 0x77})
					copy(sb[:], []byte{0x20, 0x01, 0x0d, 0xb8})
					binary.BigEndian.PutUint64(tb[8:], r.Uint64())
					binary.BigEndian.PutUint64(sb[8:], r.Uint64())
					frame, err = solicitation(asker, netip.AddrFrom16(sb), netip.AddrFrom16(tb))
				}
				if err != nil {
					return err
				}
				if _, err := c.WriteTo(frame, bcast); err == nil {
					sent.Add(1)
				}
			}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
		return nil
	})
	return sent.Load(), err
}

func solicitation(asker net.HardwareAddr, src, target netip.Addr) ([]byte, error) {
	group := netip.AddrFrom16([16]byte{0xff, 0x02, 11: 1, 12: 0xff, 13: target.As16()[13], 14: target.As16()[14], 15: target.As16()[15]})
	ns := &ndp.NeighborSolicitation{TargetAddress: target, Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: asker}}}
	return wiretest.NDPFrame(wiretest.MulticastMAC(group), asker, src, group, ns)
}

// TestRandomFloodKeepsHeldAnswered floods a host holding two VIPs with
// 100,000 requests a second for random targets from random askers, for a
// minute: the agent's memory stays bounded, its who-has table (the agent
// takes all traffic in, --watch-all) evicts and says so, and the held VIPs are still answered, once per request.
func TestRandomFloodKeepsHeldAnswered(t *testing.T) {
	t.Parallel()
	if raceBuild {
		t.Skip("the flood measures a normal build; under -race the agent is several times slower by design")
	}
	l := labtest.New(t,
		lab.HostConfig{Name: "b", IPv4: pfx("192.0.2.2/24"), IPv6: pfx("2001:db8::2/64")},
		lab.HostConfig{Name: "flooder"},
		lab.HostConfig{Name: "client", IPv4: pfx("192.0.2.3/24"), IPv6: pfx("2001:db8::3/64")},
	)
	b, flooder, client := l.Host("b"), l.Host("flooder"), l.Host("client")
	sock := filepath.Join(sockDir(t), "b.sock")
	// The whole flood reaches the who-has table: the agent's worst case
	// for memory. (By default it would not even see it.)
	agent := startAgent(t, b, sock, "--watch-all")
	mustVip(t, b, sock, "claim", "192.0.2.10", "2001:db8::10")
	rssBefore := rssKB(t, agent.Pid())

	d := floodFor()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	floodDone := make(chan int64, 1)
	go func() {
		n, err := randomFlood(ctx, t, flooder, 100_000)
		if err != nil {
			t.Errorf("flood: %v", err)
		}
		floodDone <- n
	}()
	// Meanwhile, 200 requests a second for each held VIP from the client.
	type res struct {
		r   *loadgen.Result
		err error
	}
	results := make(chan res, 2)
	for i, target := range []netip.Addr{vip4, vip6} {
		sender := netip.MustParseAddr("192.0.2.3")
		if target.Is6() {
			sender = netip.MustParseAddr("2001:db8::3:0")
		}
		n := int(d.Seconds()) * 200
		go func() {
			r, err := loadgen.Run(context.Background(), loadgen.Config{
				Netns: "/run/netns/" + client.Netns, Interface: "eth0", Target: target, Sender: sender,
				Rate: 200, Count: n, Run: uint8(i + 1), Sources: 16,
			})
			results <- res{r, err}
		}()
	}
	var peak int
	for ctx.Err() == nil {
		peak = max(peak, rssKB(t, agent.Pid()))
		select {
		case <-ctx.Done():
		case <-time.After(time.Second): // sampling the agent's memory once a second
		}
	}
	sent := <-floodDone
	for range 2 {
		r := <-results
		if r.err != nil {
			t.Fatalf("load on the held VIPs: %v", r.err)
		}
		answered := float64(r.r.Answered) / float64(r.r.Sent)
		t.Logf("%s: %d of %d answered (%.3f%%), %d duplicates", r.r.Target, r.r.Answered, r.r.Sent, 100*answered, r.r.Duplicates)
		if answered < 0.999 || r.r.Duplicates != 0 {
			t.Errorf("%s during the flood: %d of %d answered, %d duplicates; want at least 99.9%% and one reply each", r.r.Target, r.r.Answered, r.r.Sent, r.r.Duplicates)
		}
	}
	rate := float64(sent) / d.Seconds()
	t.Logf("flood: %d frames in %v (%.0f/s); agent RSS %d kB before, %d kB at most", sent, d, rate, rssBefore, peak)
	if rate < 30_000 {
		t.Errorf("the flood reached only %.0f frames/s, want a flood (100,000 asked for)", rate)
	}
	if peak > rssBefore+30*1024 {
		t.Errorf("agent RSS grew from %d kB to %d kB under the flood, want it bounded (under 30 MB more)", rssBefore, peak)
	}
	tr, err := api.NewClient(sock).WhoHas(ctxFor(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if tr.Evicted == 0 || len(tr.Entries) > 4096 {
		t.Errorf("who-has table: %d entries, %d evicted; want at most 4096 kept and evictions reported", len(tr.Entries), tr.Evicted)
	}
	t.Logf("who-has table: %d entries kept, %d evicted", len(tr.Entries), tr.Evicted)
	if st := status(t, b, sock); len(st.Claims) != 2 {
		t.Errorf("after the flood: %d claims, want both", len(st.Claims))
	}
}
