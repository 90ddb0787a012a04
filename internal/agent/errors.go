package agent

import (
	"context"
	"errors"
	"net/http"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/fleet"
	"github.com/vipctl/vip/internal/netcheck"
	"github.com/vipctl/vip/internal/store"
)

// fail answers an engine or validation error with the right status.
func (s *Server) fail(w http.ResponseWriter, err error) {
	status, code, msg := s.classify(err)
	switch {
	case status == http.StatusInternalServerError:
		s.cfg.Log.Error("request failed", "err", err)
	case code == api.CodeCredentials || code == api.CodeDenied:
		// The store's refusal of this agent lasts until an operator
		// fixes it: said once, not for every request (vip watch asks
		// every second), and again if it changes. The store's own
		// sentence, whatever the request wrapped it in.
		why := innermost(err, store.ErrCredentials, store.ErrDenied).Error()
		if old := s.refusal.Swap(&why); old == nil || *old != why {
			s.cfg.Log.Error("the store refuses this agent", "err", why)
		}
	}
	writeError(w, status, code, msg)
}

// innermost is the last error of err's chain that is still one of targets.
func innermost(err error, targets ...error) error {
	is := func(e error) bool {
		for _, t := range targets {
			if errors.Is(e, t) {
				return true
			}
		}
		return false
	}
	for {
		next := errors.Unwrap(err)
		if next == nil || !is(next) {
			return err
		}
		err = next
	}
}

// classify says how an error is answered: its HTTP status, its code and
// its sentence.
func (s *Server) classify(err error) (status int, code, msg string) {
	switch {
	case errors.Is(err, netcheck.ErrInvalid), errors.Is(err, announce.ErrNoAssigner):
		return http.StatusBadRequest, api.CodeBadInput, err.Error()
	case errors.Is(err, announce.ErrHeldElsewhere):
		return http.StatusConflict, api.CodeOtherInterface, err.Error()
	case errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable, api.CodeShutdown, "the agent is shutting down: try again"
	case errors.As(err, new(*fleet.HeldError)):
		return http.StatusConflict, api.CodeHeld, err.Error()
	case errors.Is(err, fleet.ErrFenced):
		return http.StatusServiceUnavailable, api.CodeFenced, err.Error()
	case errors.Is(err, store.ErrRefused), errors.Is(err, fleet.ErrOwnAddress):
		return http.StatusBadRequest, api.CodeBadInput, err.Error()
	case errors.Is(err, store.ErrCredentials):
		return http.StatusBadGateway, api.CodeCredentials, err.Error()
	case errors.Is(err, store.ErrDenied):
		return http.StatusBadGateway, api.CodeDenied, err.Error()
	case errors.Is(err, store.ErrUnreachable):
		return http.StatusGatewayTimeout, api.CodeStoreUnreachable, err.Error()
	}
	return http.StatusInternalServerError, api.CodeInternal, err.Error()
}
