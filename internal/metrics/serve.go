package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vipctl/vip/internal/netcheck"
)

// Server serves /metrics over HTTP until it is closed.
type Server struct {
	ln   net.Listener
	srv  *http.Server
	done chan error
}

// CheckAddr checks that addr is a HOST:PORT to serve metrics on: HOST an
// IP address of this host, or empty for all of them; PORT 0 picks a free
// one. Its errors satisfy errors.Is(err, netcheck.ErrInvalid).
func CheckAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return netcheck.Invalidf("--metrics %q is not HOST:PORT: give one such as 127.0.0.1:9469, or :9469 for every address", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return netcheck.Invalidf("--metrics %q has no port number: give one such as 127.0.0.1:9469", addr)
	}
	if host != "" && host != "localhost" {
		if _, err := netip.ParseAddr(host); err != nil {
			return netcheck.Invalidf("--metrics %q: give an IP address of this host (or none, for every address), not a name", addr)
		}
	}
	return nil
}

// Listen serves the registry's metrics at /metrics on addr (see CheckAddr).
// It listens before it returns, so that a busy or foreign address is the
// caller's error before anything is claimed.
func Listen(addr string, reg *prometheus.Registry, log *slog.Logger) (*Server, error) {
	if err := CheckAddr(addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve metrics on %s: %w: give --metrics a free port, or an address of this host", addr, err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:          slogErrorLog{log},
		Registry:          reg, // promhttp_metric_handler_errors_total
		EnableOpenMetrics: true,
		Timeout:           10 * time.Second,
	}))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "vip: metrics are at /metrics")
	})
	s := &Server{
		ln: ln,
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 5 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       2 * time.Minute,
		},
		done: make(chan error, 1),
	}
	go func() {
		err := s.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	log.Info("serving metrics", "addr", s.Addr().String(), "path", "/metrics")
	return s, nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the server, letting a scrape under way finish for up to
// ctx's deadline, and waits for it.
func (s *Server) Close(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
	}
	return errors.Join(err, <-s.done)
}

// slogErrorLog lets promhttp report errors of a scrape through slog.
type slogErrorLog struct{ log *slog.Logger }

func (l slogErrorLog) Println(v ...any) { l.log.Warn("metrics: " + fmt.Sprint(v...)) }
