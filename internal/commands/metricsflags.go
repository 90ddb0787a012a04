package commands

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/vipctl/vip/internal/agent"
	"github.com/vipctl/vip/internal/metrics"
)

// metricsOptions are the flags that serve Prometheus metrics, the same on
// vip agent and vip claim --foreground.
type metricsOptions struct {
	Addr     string
	MaxAddrs int
	// given says whether any of the flags was on the command line.
	given bool
}

func (m *metricsOptions) addFlags(c *cobra.Command, where string) {
	f := c.Flags()
	f.StringVar(&m.Addr, "metrics", "", "serve Prometheus metrics at http://HOST:PORT/metrics, such as 127.0.0.1:9469 (default: off)"+where)
	f.IntVar(&m.MaxAddrs, "metrics-max-addrs", metrics.DefaultMaxAddrs, "held addresses with metrics of their own, the lowest first; the others count in the totals only (0: none)"+where)
	_ = c.RegisterFlagCompletionFunc("metrics", cobra.NoFileCompletions)
	_ = c.RegisterFlagCompletionFunc("metrics-max-addrs", cobra.NoFileCompletions)
}

// parsed notes which of the flags c's command line gave.
func (m *metricsOptions) parsed(c *cobra.Command) {
	m.given = c.Flags().Changed("metrics") || c.Flags().Changed("metrics-max-addrs")
}

// check refuses a malformed address or bound before anything is claimed.
func (m *metricsOptions) check() error {
	switch {
	case m.MaxAddrs < 0:
		return badInput("--metrics-max-addrs %d is negative: give how many addresses get series of their own, or 0 for none", m.MaxAddrs)
	case m.Addr == "" && m.given:
		return badInput("--metrics-max-addrs shapes the metrics that --metrics HOST:PORT serves: give --metrics too")
	case m.Addr == "":
		return nil
	}
	return metrics.CheckAddr(m.Addr)
}

func (m *metricsOptions) config() agent.MetricsConfig {
	b := currentBuild()
	return agent.MetricsConfig{Addr: m.Addr, MaxAddrs: m.MaxAddrs, Version: b.Version, Commit: b.Commit}
}

// serve serves the runtime's metrics as the flags say.
func (m *metricsOptions) serve(rt *agent.Runtime, log *slog.Logger) (stop func(), err error) {
	return agent.ServeMetrics(rt, m.config(), log)
}
