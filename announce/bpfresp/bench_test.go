package bpfresp

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/internal/wire"
	"github.com/vipctl/vip/test/labtest"
	"github.com/vipctl/vip/test/wiretest"
	"github.com/vipctl/vip/tools/loadgen"
)

// BenchmarkProgram times the program on one request in the kernel
// (BPF_PROG_TEST_RUN repeated), answer built and counted.
func BenchmarkProgram(b *testing.B) {
	labtest.RequireRoot(b, "loading eBPF programs")
	for _, hook := range []Hook{TCX, XDPGeneric} {
		me, _ := wire.MACOf(wiretest.CorpusMAC)
		r, err := loadDetached("lo", testIfindex, me, hook, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		if err := r.Hold(wiretest.CorpusHeld4, wiretest.CorpusHeld6); err != nil {
			b.Fatal(err)
		}
		for _, name := range []string{"ARP who-has", "solicitation"} {
			var frame []byte
			for _, c := range wiretest.Corpus() {
				if c.Name == name {
					frame = c.Frame
				}
			}
			b.Run(hook.String()+"/"+name, func(b *testing.B) {
				// One repetition a call: a repeated run would answer the
				// reply the first one wrote (which passes on, faster).
				var total time.Duration
				for b.Loop() {
					_, per, err := r.prog.Benchmark(frame, 1, nil)
					if err != nil {
						b.Fatal(err)
					}
					total += per
				}
				b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/request")
			})
		}
	}
}

// BenchmarkLabLatency measures, on a lab segment, how fast requests are
// answered by the kernel (for its own address, on host a), by the program
// on tcx and on XDP generic (for a held address, on host b), with the load
// generator the vipbench runs use. Each iteration is one run of two
// seconds; run it with -benchtime=1x.
func BenchmarkLabLatency(b *testing.B) {
	l := labtest.New(b,
		lab.HostConfig{Name: "a", IPv4: netip.MustParsePrefix("192.0.2.1/24"), IPv6: netip.MustParsePrefix("2001:db8::1/64")},
		lab.HostConfig{Name: "b"},
		lab.HostConfig{Name: "client", IPv4: netip.MustParsePrefix("192.0.2.3/24"), IPv6: netip.MustParsePrefix("2001:db8::3/64")},
	)
	host, client := l.Host("b"), l.Host("client")
	eth0 := labtest.Link(host, "eth0")
	senders := map[bool]netip.Addr{true: netip.MustParseAddr("192.0.2.3"), false: netip.MustParseAddr("2001:db8::f000:0")}
	kernel := map[bool]netip.Addr{true: netip.MustParseAddr("192.0.2.1"), false: netip.MustParseAddr("2001:db8::1")}
	var run uint8
	measure := func(b *testing.B, target netip.Addr, rate int) {
		for b.Loop() {
			run++
			res, err := loadgen.Run(context.Background(), loadgen.Config{
				Netns: filepath.Join("/run/netns", client.Netns), Interface: "eth0",
				Target: target, Sender: senders[target.Is4()],
				Rate: rate, Count: 2 * rate, Run: run, TxTimestamps: rate < 100_000,
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(res.Median().Nanoseconds())/1e3, "median-µs")
			b.ReportMetric(float64(res.P99().Nanoseconds())/1e3, "p99-µs")
			b.ReportMetric(float64(res.Lost), "lost")
		}
		b.ReportMetric(0, "ns/op")
	}
	for _, rate := range []int{1000, 20_000, 100_000} {
		for _, is4 := range []bool{true, false} {
			family := map[bool]string{true: "ipv4", false: "ipv6"}[is4]
			b.Run(fmt.Sprintf("kernel/%s/%d", family, rate), func(b *testing.B) { measure(b, kernel[is4], rate) })
			for _, hook := range []Hook{TCX, XDPGeneric} {
				b.Run(fmt.Sprintf("%s/%s/%d", hook, family, rate), func(b *testing.B) {
					var r *Responder
					if err := labtest.Do(host, func() (err error) {
						r, err = Open("eth0", eth0.Index, eth0.MAC, hook, nil)
						return err
					}); err != nil {
						b.Fatal(err)
					}
					defer r.Close()
					if err := r.Hold(labVIP4, labVIP6); err != nil {
						b.Fatal(err)
					}
					target := labVIP6
					if is4 {
						target = labVIP4
					}
					measure(b, target, rate)
				})
			}
		}
	}
}
