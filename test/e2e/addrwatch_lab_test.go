package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/labtest"
)

// addrWatch records the changes of the addresses on one lab host's
// interface as the kernel announces them (ip monitor address: each
// addition, lifetime lengthened and removal, the kernel's own at a
// lifetime's end included), each with the time it was read. On a
// violation, the accused node's changes around it say whether the address
// was on its interface then, and with what lifetime: the evidence a rare
// failure in CI otherwise leaves none of.
type addrWatch struct {
	mu    sync.Mutex
	lines []watchedLine
}

type watchedLine struct {
	at   time.Time
	line string
}

// watchAddrs starts an addrWatch of ifname on h, until the test ends.
func watchAddrs(t *testing.T, h *lab.Host, ifname string) *addrWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := h.Command(ctx, "ip", "-o", "monitor", "address", "dev", ifname)
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatalf("watch the addresses of %s on %s: %v", ifname, h.Name, err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("watch the addresses of %s on %s: %v", ifname, h.Name, err)
	}
	w := &addrWatch{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.mu.Lock()
			w.lines = append(w.lines, watchedLine{at: time.Now(), line: strings.Join(strings.Fields(sc.Text()), " ")})
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = cmd.Wait()
	})
	return w
}

// around returns the changes of a read from from to to, each with its
// time.
func (w *addrWatch) around(a netip.Addr, from, to time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	prefix := fmt.Sprintf(" %s/", a)
	var out []string
	for _, l := range w.lines {
		if l.at.Before(from) || l.at.After(to) || !strings.Contains(l.line, prefix) {
			continue
		}
		out = append(out, l.at.Format("15:04:05.000")+" "+l.line)
	}
	return out
}

// TestAddrWatchSeesALifetimeEnd: the watch the nemesis keeps records an
// address added with a lifetime and the kernel's removal of it when the
// lifetime ends, which is what a violation's evidence rests on.
func TestAddrWatchSeesALifetimeEnd(t *testing.T) {
	t.Parallel()
	labtest.RequireRoot(t, "the address watch")
	l := labtest.New(t, lab.HostConfig{Name: "h", IPv4: pfx("192.0.2.11/24"), IPv6: pfx("2001:db8::11/64")})
	h := l.Host("h")
	w := watchAddrs(t, h, "eth0")
	// ip monitor subscribes some time after it starts, which a loaded
	// machine draws out: a marker address, added until the watch has
	// seen it, says it listens.
	marker := netip.MustParseAddr("2001:db8::99")
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		_, _ = h.Run(context.Background(), "ip", "addr", "replace", marker.String()+"/128", "dev", "eth0", "nodad")
		return len(w.around(marker, time.Time{}, time.Now())) > 0, "the watch never saw the marker address"
	})
	if _, err := h.Run(context.Background(), "ip", "addr", "del", marker.String()+"/128", "dev", "eth0"); err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddr("2001:db8::51")
	start := time.Now()
	if _, err := h.Run(context.Background(), "ip", "addr", "add", a.String()+"/128", "dev", "eth0", "nodad", "valid_lft", "1", "preferred_lft", "1"); err != nil {
		t.Fatal(err)
	}
	labtest.Eventually(t, 10*time.Second, func() (bool, string) {
		lines := w.around(a, start, time.Now())
		return len(lines) >= 2 && strings.Contains(lines[0], "valid_lft") && strings.HasPrefix(strings.Fields(lines[len(lines)-1])[1], "Deleted"),
			fmt.Sprintf("want the addition and the kernel's removal of %s, got %q", a, lines)
	})
	if lines := w.around(netip.MustParseAddr("2001:db8::5"), start, time.Now()); len(lines) != 0 {
		t.Errorf("changes of 2001:db8::5 read as %q: another address's", lines)
	}
}
