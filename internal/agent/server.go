package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/netcheck"
	"github.com/vipctl/vip/internal/store"
	"github.com/vipctl/vip/sniff"
)

// Engine is what the server needs of the claim engine.
type Engine interface {
	Claim(ctx context.Context, reqs []announce.Request, opts announce.ClaimOptions) ([]announce.Status, error)
	Refresh(ctx context.Context, addrs []netip.Addr) (refreshed, notHeld []netip.Addr, err error)
	Release(ctx context.Context, addrs []netip.Addr) (released, notHeld []netip.Addr, err error)
	Status(addrs ...netip.Addr) []announce.Status
	Held() []netip.Addr
	// SubscribeSince is the engine's events, starting with those it
	// keeps from after since (none for a zero since).
	SubscribeSince(n int, since time.Time) (<-chan announce.Event, func())
	Config() announce.EngineConfig
}

// Peer is the identity of a client, from SO_PEERCRED.
type Peer struct {
	PID, UID, GID int
}

type peerKey struct{}

// connKey holds a request's connection in its context.
type connKey struct{}

// PeerFrom returns the peer a request came from, if known.
func PeerFrom(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(peerKey{}).(Peer)
	return p, ok
}

// withActor carries who asked for a change, and why, to the history: a
// client running as root names the user behind it (by, which the CLI takes
// from sudo), any other is named by its socket's credentials.
func withActor(r *http.Request, reason, by string) (context.Context, error) {
	if err := store.CheckReason(reason); err != nil {
		return nil, netcheck.Invalidf("%v", err)
	}
	a := store.Actor{Reason: reason}
	if p, ok := PeerFrom(r.Context()); ok {
		a.By = store.UserAt(p.UID)
		if p.UID == 0 && by != "" && len(by) <= 256 {
			a.By = by
		}
	}
	return store.WithActor(r.Context(), a), nil
}

// Watcher reports what the captures saw: who-has traffic and capture
// statistics. Sniffer is one.
type Watcher interface {
	WhoHas(order sniff.Order) api.WhoHasResponse
	Captures() []api.CaptureStat
}

// Fleet is what the server needs of the agent's place in the store, when
// its claims are guarded by one (fleet.Member).
type Fleet interface {
	Standby(ctx context.Context, reqs []announce.Request, opts announce.ClaimOptions) ([]announce.Status, error)
	// TakeOver moves the addresses here; force moves them even while
	// this node is cordoned.
	TakeOver(ctx context.Context, reqs []announce.Request, opts announce.ClaimOptions, force bool) ([]announce.Status, error)
	Fleet(ctx context.Context) (store.View, error)
	Move(ctx context.Context, req store.MoveRequest) ([]store.MoveResult, error)
	// Notes says what the store says of claims that need it.
	Notes() map[netip.Addr]string
	// Info describes the agent's place in the store.
	Info() api.Store
	// History reads the store's history of ownership as q asks.
	History(ctx context.Context, q store.HistoryQuery) ([]store.Change, int64, error)
}

// ServerConfig configures a Server.
type ServerConfig struct {
	Engine Engine
	// Fleet, if set, is the store guarding the claims: it serves
	// standbys, take-overs, /v1/fleet and /v1/move.
	Fleet Fleet
	// Watcher, if set, serves /v1/whohas and capture statistics.
	Watcher Watcher
	Sys     netcheck.System
	Info    api.Agent
	// Allow decides whether a peer may use the agent; nil allows root only.
	Allow func(Peer) error
	Log   *slog.Logger
}

// Server serves the agent's HTTP API.
type Server struct {
	cfg      ServerConfig
	inflight atomic.Int64
	served   atomic.Int64
	events   atomic.Int64
	// refusal is the store's last refusal of this agent (its
	// credentials, a permission), logged once.
	refusal atomic.Pointer[string]
}

// NewServer returns a Server for cfg.
func NewServer(cfg ServerConfig) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Allow == nil {
		cfg.Allow = RootOnly
	}
	return &Server{cfg: cfg}
}

// RootOnly allows root alone.
func RootOnly(p Peer) error {
	if p.UID == 0 {
		return nil
	}
	return fmt.Errorf("uid %d may not use the vip agent: run vip as root (sudo), or start the agent with --group GROUP and add the user to that group", p.UID)
}

// Busy reports whether a request or an event stream is under way, and
// whether any request was ever served.
func (s *Server) Busy() (busy, servedAny bool) {
	return s.inflight.Load() > 0 || s.events.Load() > 0, s.served.Load() > 0
}

// Handler returns the API's handler. Requests must carry a Peer in their
// context (Serve puts it there) or they are refused.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/claims", s.claims)
	mux.HandleFunc("POST /v1/refresh", s.refresh)
	mux.HandleFunc("POST /v1/release", s.release)
	mux.HandleFunc("GET /v1/status", s.status)
	mux.HandleFunc("GET /v1/whohas", s.whoHas)
	// The who-has table's first name, kept for this release: "traffic"
	// is now the packets arriving for a held address.
	mux.HandleFunc("GET /v1/traffic", s.whoHas)
	mux.HandleFunc("GET /v1/events", s.streamEvents)
	mux.HandleFunc("GET /v1/fleet", s.fleet)
	mux.HandleFunc("POST /v1/move", s.move)
	mux.HandleFunc("GET /v1/history", s.history)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("no endpoint %s %s: see the API in the README", r.Method, r.URL.Path))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inflight.Add(1)
		defer func() {
			s.inflight.Add(-1)
			s.served.Add(1)
		}()
		p, ok := PeerFrom(r.Context())
		if !ok {
			writeError(w, http.StatusForbidden, api.CodeForbidden, "the agent cannot tell who is asking, so it refuses")
			return
		}
		if err := s.cfg.Allow(p); err != nil {
			s.cfg.Log.Warn("refused a client", "pid", p.PID, "uid", p.UID, "gid", p.GID)
			writeError(w, http.StatusForbidden, api.CodeForbidden, err.Error())
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// Serve answers on ln until ctx is done, then shuts down: requests under way
// get a short grace, event streams end.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			ctx = context.WithValue(ctx, connKey{}, c)
			if p, err := peerOf(c); err == nil {
				return context.WithValue(ctx, peerKey{}, p)
			}
			return ctx
		},
		ErrorLog: slog.NewLogLogger(s.cfg.Log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	<-errc
	return nil
}

func peerOf(c net.Conn) (Peer, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return Peer{}, errors.New("not a unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Peer{}, err
	}
	if credErr != nil {
		return Peer{}, credErr
	}
	return Peer{PID: int(cred.Pid), UID: int(cred.Uid), GID: int(cred.Gid)}, nil
}

// growSendBuffer makes room in the socket for an answer of n bytes, so
// that it goes over in one write. With the default of about 200 KB, a
// status of 10,000 claims (5 MB) goes in 25 turns, each waiting for the
// client to be scheduled again: right after a 10,000-address claim, on the
// lab's two busy cores, reading it took 12 ms on average, 6 ms with the
// room. Like the answering sockets, it forces the size as root and asks
// within the system's limit otherwise.
func growSendBuffer(ctx context.Context, n int) {
	c, ok := ctx.Value(connKey{}).(*net.UnixConn)
	if !ok || n <= 256<<10 {
		return
	}
	raw, err := c.SyscallConn()
	if err != nil {
		return
	}
	n = min(n, 64<<20)
	_ = raw.Control(func(fd uintptr) {
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, n) != nil {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, n)
		}
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(api.Error{Error: msg, Code: code})
}

// decode reads a JSON request body of at most api.MaxRequestBytes, refusing
// unknown fields and trailing data.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	r.Body = http.MaxBytesReader(w, r.Body, api.MaxRequestBytes)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value in the body")
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, api.CodeTooLarge, fmt.Sprintf("the request is over %d bytes: send fewer addresses per request", api.MaxRequestBytes))
			return false
		}
		writeError(w, http.StatusBadRequest, api.CodeBadInput, fmt.Sprintf("the request is not valid JSON for this endpoint: %v", err))
		return false
	}
	return true
}

func (s *Server) claims(w http.ResponseWriter, r *http.Request) {
	var req api.ClaimRequest
	if !decode(w, r, &req) {
		return
	}
	plan, err := PlanClaim(req, s.cfg.Sys)
	if err != nil {
		s.fail(w, err)
		return
	}
	claim := s.cfg.Engine.Claim
	switch {
	case req.Standby && req.TakeOver:
		writeError(w, http.StatusBadRequest, api.CodeBadInput, "a claim is --standby or --take-over, not both")
		return
	case req.Force && !req.TakeOver:
		writeError(w, http.StatusBadRequest, api.CodeBadInput, "--force goes with --take-over (to take addresses to a cordoned node): give both, or neither")
		return
	case (req.Standby || req.TakeOver) && s.cfg.Fleet == nil:
		writeError(w, http.StatusConflict, api.CodeNoStore, "--standby and --take-over need an agent guarded by a store: start it with --store etcd://HOST:PORT (or $VIP_STORE)")
		return
	case req.Standby:
		claim = s.cfg.Fleet.Standby
	case req.TakeOver:
		claim = func(ctx context.Context, reqs []announce.Request, opts announce.ClaimOptions) ([]announce.Status, error) {
			return s.cfg.Fleet.TakeOver(ctx, reqs, opts, req.Force)
		}
	}
	ctx, err := withActor(r, req.Reason, req.By)
	if err != nil {
		s.fail(w, err)
		return
	}
	before := s.cfg.Engine.Status(requestAddrs(plan.Requests)...)
	if err := groupCheck(before, plan.Requests, req.Group); err != nil {
		s.fail(w, err)
		return
	}
	st, err := claim(ctx, plan.Requests, plan.Options)
	var refused *announce.RefusedError
	if req.Group != "" && errors.As(err, &refused) {
		// A group is claimed whole or not at all.
		undoPartial(ctx, s.cfg.Engine, st, before)
		if !allHeld(refused) {
			err = fmt.Errorf("group %s not claimed, nothing changed: %w", req.Group, err)
		}
		st = nil
	}
	if errors.As(err, &refused) && (len(st) > 0 || allHeld(refused)) {
		// Some were claimed: say which were not, each with its reason.
		resp := api.ClaimResponse{Claims: s.claimList(st)}
		for _, rf := range refused.Refused {
			_, code, _ := s.classify(rf.Err)
			ref := api.Refused{Addr: rf.Addr.String(), Error: rf.Err.Error(), Code: code}
			var held *fleet.HeldError
			if errors.As(rf.Err, &held) {
				ref.HeldBy, ref.ClaimedAt, ref.Since = held.Node, held.Since, held.Since
			}
			resp.Refused = append(resp.Refused, ref)
		}
		writeJSON(w, resp)
		return
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, api.ClaimResponse{Claims: s.claimList(st)})
}

// allHeld reports whether every refusal is an address another node holds:
// a claim refused so is answered address by address, as a partial one is,
// so that scripts read which node holds each.
func allHeld(r *announce.RefusedError) bool {
	for _, rf := range r.Refused {
		if !errors.As(rf.Err, new(*fleet.HeldError)) {
			return false
		}
	}
	return len(r.Refused) > 0
}

func (s *Server) claimList(st []announce.Status) []api.Claim {
	return ClaimsFromStatus(st, time.Now())
}

// addrs reads a request of addresses, and the context that carries who
// asked (withActor).
func (s *Server) addrs(w http.ResponseWriter, r *http.Request) ([]netip.Addr, context.Context, bool) {
	var req api.AddrsRequest
	if !decode(w, r, &req) {
		return nil, nil, false
	}
	addrs, err := api.ParseAddrsRequest(req)
	if err != nil {
		s.fail(w, err)
		return nil, nil, false
	}
	ctx, err := withActor(r, req.Reason, req.By)
	if err != nil {
		s.fail(w, err)
		return nil, nil, false
	}
	switch {
	case req.All:
		addrs = s.cfg.Engine.Held()
	case req.Group != "":
		if addrs, err = groupHeld(s.cfg.Engine, req.Group); err != nil {
			s.fail(w, err)
			return nil, nil, false
		}
	}
	return addrs, ctx, true
}

func (s *Server) refresh(w http.ResponseWriter, r *http.Request) {
	addrs, ctx, ok := s.addrs(w, r)
	if !ok {
		return
	}
	refreshed, notHeld, err := s.cfg.Engine.Refresh(ctx, addrs)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, api.RefreshResponse{Refreshed: api.Strings(refreshed), NotHeld: api.Strings(notHeld)})
}

func (s *Server) release(w http.ResponseWriter, r *http.Request) {
	addrs, ctx, ok := s.addrs(w, r)
	if !ok {
		return
	}
	released, notHeld, err := s.cfg.Engine.Release(ctx, addrs)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, api.ReleaseResponse{Released: api.Strings(released), NotHeld: api.Strings(notHeld)})
}

// status answers with every claim, indented when asked with ?indent=true
// so that vip status --json can print the answer as it comes. The answer
// goes in pieces as it is encoded (see EngineStatus.WriteJSON).
func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	indent := false
	if v := r.URL.Query().Get("indent"); v != "" {
		var err error
		if indent, err = strconv.ParseBool(v); err != nil {
			writeError(w, http.StatusBadRequest, api.CodeBadInput, fmt.Sprintf("indent=%q is not true or false", v))
			return
		}
	}
	st := EngineStatus{Agent: s.cfg.Info, Claims: s.cfg.Engine.Status(), Now: time.Now()}
	if s.cfg.Fleet != nil {
		info := s.cfg.Fleet.Info()
		st.Agent.Store = &info
		st.Notes = s.cfg.Fleet.Notes()
	}
	if s.cfg.Watcher != nil {
		st.Captures = s.cfg.Watcher.Captures()
	}
	w.Header().Set("Content-Type", "application/json")
	// About 420 bytes a claim indented, 320 compact.
	growSendBuffer(r.Context(), 1024+420*len(st.Claims))
	written, err := st.WriteJSON(w, indent)
	switch {
	case err == nil:
	case !written:
		s.fail(w, fmt.Errorf("write the status: %w", err))
	default:
		// Part of the answer is out (or the client went away): cut the
		// connection, net/http's way, rather than end the answer well
		// but short, so that the client sees it fail.
		s.cfg.Log.Warn("status answer cut short", "err", err)
		panic(http.ErrAbortHandler)
	}
}

func (s *Server) whoHas(w http.ResponseWriter, r *http.Request) {
	sortBy := r.URL.Query().Get("sort")
	if sortBy == "" {
		sortBy = "rate"
	}
	order, err := sniff.ParseOrder(sortBy)
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadInput, err.Error())
		return
	}
	if s.cfg.Watcher == nil {
		writeJSON(w, api.WhoHasResponse{Entries: []api.WhoHas{}})
		return
	}
	writeJSON(w, s.cfg.Watcher.WhoHas(order))
}

func (s *Server) noStore(w http.ResponseWriter) bool {
	if s.cfg.Fleet != nil {
		return false
	}
	writeError(w, http.StatusConflict, api.CodeNoStore, "this agent has no store: start it with --store etcd://HOST:PORT (or $VIP_STORE), or run vip fleet and vip move with --store")
	return true
}

func (s *Server) fleet(w http.ResponseWriter, r *http.Request) {
	if s.noStore(w) {
		return
	}
	v, err := s.cfg.Fleet.Fleet(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	f := v.API(time.Now())
	fleet.Annotate(&f)
	writeJSON(w, f)
}

func (s *Server) move(w http.ResponseWriter, r *http.Request) {
	var req api.MoveRequest
	if !decode(w, r, &req) || s.noStore(w) {
		return
	}
	mr, err := fleet.ParseMoveRequest(req)
	if err != nil {
		s.fail(w, err)
		return
	}
	ctx, err := withActor(r, req.Reason, req.By)
	if err != nil {
		s.fail(w, err)
		return
	}
	mr.Actor = store.ActorOf(ctx)
	res, err := s.cfg.Fleet.Move(ctx, mr)
	if err != nil {
		s.fail(w, err)
		return
	}
	out := api.MoveResponse{Moves: make([]api.MoveResult, len(res))}
	for i, m := range res {
		out.Moves[i] = m.API()
	}
	writeJSON(w, out)
}
