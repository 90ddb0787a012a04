package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/vipctl/vip/internal/api"
)

// streamEvents streams the engine's events as NDJSON until the client goes.
// With since=TIME (RFC 3339) it starts with the events later than TIME that
// the engine still keeps, so that a client that lost the agent for a while
// (a view whose agent restarted, vip events --retry) reads what happened
// meanwhile, and is told when some are no longer kept.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) {
	var since time.Time
	if v := r.URL.Query().Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			writeError(w, http.StatusBadRequest, api.CodeBadInput, fmt.Sprintf("since=%q is not a time: give one in RFC 3339, such as 2026-12-03T09:30:00Z", v))
			return
		}
		since = t
	}
	s.events.Add(1)
	defer s.events.Add(-1)
	rc := http.NewResponseController(w)
	// The stream outlives the server's read timeout, which would otherwise
	// cancel the request.
	_ = rc.SetReadDeadline(time.Time{})
	events, cancel := s.cfg.Engine.SubscribeSince(1024, since)
	defer cancel()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	enc := json.NewEncoder(w)
	for {
		select {
		case <-r.Context().Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			// A client that stops reading must not hold a goroutine forever.
			_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if enc.Encode(ev) != nil || rc.Flush() != nil {
				return
			}
		}
	}
}
