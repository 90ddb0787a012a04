package e2e_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/lab"
	"github.com/vipctl/vip/test/labtest"
)

// metricsPort is where the agents of these tests serve metrics: each lab
// host has a network namespace of its own, so no test collides with another.
const metricsPort = "9469"

// fetch gets url from inside h's network namespace. The connection is
// dialled on the namespace's thread itself: http.Client dials on goroutines
// of its own, which would run in this process's namespace, on the host's
// own network.
func fetch(t *testing.T, h *lab.Host, rawURL string) (string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Close = true
	var conn net.Conn
	if err := labtest.Do(h, func() error {
		var err error
		conn, err = net.DialTimeout("tcp", req.URL.Host, 5*time.Second)
		return err
	}); err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if err := req.Write(conn); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s: %s", rawURL, resp.Status, body)
	}
	return string(body), err
}

// promQuery asks the Prometheus server at base for the instant value of
// query and returns it, or ok=false while the query has no result yet.
func promQuery(t *testing.T, h *lab.Host, base, query string) (v float64, ok bool, why string) {
	t.Helper()
	out, err := fetch(t, h, base+"/api/v1/query?query="+url.QueryEscape(query))
	if err != nil {
		return 0, false, err.Error()
	}
	var resp struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("Prometheus's answer to %s is not its JSON: %v\n%s", query, err, out)
	}
	switch {
	case resp.Status != "success":
		t.Fatalf("Prometheus refused %s: %s", query, out)
	case len(resp.Data.Result) == 0:
		return 0, false, fmt.Sprintf("%s has no value in Prometheus yet", query)
	case len(resp.Data.Result) > 1:
		t.Fatalf("%s: want one series, got %s", query, out)
	}
	s, _ := resp.Data.Result[0].Value[1].(string)
	v, err = strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%s: value %q: %v", query, s, err)
	}
	return v, true, fmt.Sprintf("%s = %v", query, v)
}

// startPrometheus runs Debian's Prometheus server on h, scraping target
// every 500ms, and waits until it serves its API to from, another host.
func startPrometheus(t *testing.T, h, from *lab.Host, target string) string {
	t.Helper()
	bin := labtest.RequireTool(t, "prometheus")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	conf := fmt.Sprintf(`global:
  scrape_interval: 500ms
  scrape_timeout: 400ms
scrape_configs:
  - job_name: vip
    static_configs:
      - targets: [%q]
`, target)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	listen := h.IPv4.Addr().String() + ":9090"
	labtest.Start(t, h, bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+listen, "--log.level=warn")
	base := "http://" + listen
	labtest.Eventually(t, 30*time.Second, func() (bool, string) {
		_, err := fetch(t, from, base+"/-/ready")
		return err == nil, fmt.Sprint("waiting for Prometheus to be ready: ", err)
	})
	return base
}

// TestMetricsScrapedByPrometheus serves an agent's metrics to a real
// Prometheus server in a lab host of its own: after an arping burst from the
// client, Prometheus has the answered counter at the burst's count, and
// promtool finds nothing to say about a scrape.
func TestMetricsScrapedByPrometheus(t *testing.T) {
	t.Parallel()
	promtool := labtest.RequireTool(t, "promtool")
	l := labtest.New(t,
		lab.HostConfig{Name: "a", IPv4: pfx("192.0.2.1/24")},
		lab.HostConfig{Name: "client", IPv4: pfx("192.0.2.3/24")},
		lab.HostConfig{Name: "prom", IPv4: pfx("192.0.2.4/24")},
	)
	a, client, prom := l.Host("a"), l.Host("client"), l.Host("prom")
	target := "192.0.2.1:" + metricsPort
	sock := filepath.Join(sockDir(t), "vip.sock")
	startAgent(t, a, sock, "--metrics", target)
	mustVip(t, a, sock, "claim", vip4.String(), "-i", "eth0")
	base := startPrometheus(t, prom, client, target)

	labtest.Eventually(t, 20*time.Second, func() (bool, string) {
		v, ok, why := promQuery(t, client, base, `up{job="vip"}`)
		return ok && v == 1, why
	})
	const requests = 5
	out, code := arping(t, client, "-c", strconv.Itoa(requests), "-w", "10", vip4.String())
	if code != 0 || len(replyMACs(out)) != requests {
		t.Fatalf("arping -c %d: exit %d, want %d replies:\n%s", requests, code, requests, out)
	}
	for _, q := range []string{
		`vip_requests_answered_total{job="vip"}`,
		fmt.Sprintf(`vip_claim_requests_answered_total{job="vip",addr=%q,interface="eth0"}`, vip4),
	} {
		labtest.Eventually(t, 20*time.Second, func() (bool, string) {
			v, ok, why := promQuery(t, client, base, q)
			if ok && v > requests {
				t.Fatalf("%s: want %d requests answered, got %v", q, requests, v)
			}
			return ok && v == requests, why
		})
	}
	labtest.Eventually(t, 20*time.Second, func() (bool, string) {
		v, ok, why := promQuery(t, client, base, `sum(vip_claims{job="vip",state=~"announcing|holding"})`)
		return ok && v == 1, why
	})

	scrape, err := fetch(t, client, "http://"+target+"/metrics")
	if err != nil {
		t.Fatalf("scrape the agent: %v", err)
	}
	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = strings.NewReader(scrape)
	var lint bytes.Buffer
	check.Stdout, check.Stderr = &lint, &lint
	if err := check.Run(); err != nil || strings.TrimSpace(lint.String()) != "" {
		t.Fatalf("promtool check metrics: %v\n%s", err, lint.String())
	}
	for _, name := range []string{"vip_build_info", "vip_gratuitous_frames_sent_total", "vip_probes_sent_total",
		"vip_competing_claimers", "vip_conflicts_total", "vip_capture_frames_received_total", "vip_capture_frames_dropped_total"} {
		if !strings.Contains(scrape, "\n"+name) {
			t.Errorf("the scrape has no %s", name)
		}
	}
}

// TestForegroundClaimServesMetrics: claim --foreground serves the same
// metrics as the agent, and stops serving when it ends.
func TestForegroundClaimServesMetrics(t *testing.T) {
	t.Parallel()
	l := labtest.New(t,
		lab.HostConfig{Name: "a", IPv4: pfx("192.0.2.1/24"), IPv6: pfx("2001:db8::1/64")},
		lab.HostConfig{Name: "client", IPv4: pfx("192.0.2.3/24")},
	)
	a, client := l.Host("a"), l.Host("client")
	target := "http://192.0.2.1:" + metricsPort + "/metrics"
	p := claim(t, a, vip4.String(), vip6.String(), "-i", "eth0", "--metrics", "192.0.2.1:"+metricsPort, "--metrics-max-addrs", "1")
	scrape, err := fetch(t, client, target)
	if err != nil {
		t.Fatalf("scrape the foreground claim: %v", err)
	}
	for _, want := range []string{
		"\nvip_claims_without_series 1\n",
		fmt.Sprintf("\nvip_claim_requests_answered_total{addr=%q,interface=\"eth0\"} ", vip4),
	} {
		if !strings.Contains(scrape, want) {
			t.Errorf("the scrape has no %q:\n%s", want, scrape)
		}
	}
	if strings.Contains(scrape, fmt.Sprintf("addr=%q", vip6)) {
		t.Errorf("with --metrics-max-addrs 1, %s (the higher address) has series of its own:\n%s", vip6, scrape)
	}
	p.Stop(t)
	if _, err := fetch(t, client, target); err == nil {
		t.Error("the metrics are still served after the claim ended")
	}
}
