package agent

import (
	"fmt"
	"net/http"
	"net/netip"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/store"
)

// history answers with the store's history of an address (?addr=) or of
// the addresses of a group (?group=), the latest maxHistoryAnswer changes:
// what the live view shows of the selected claim.
func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	if s.noStore(w) {
		return
	}
	var q store.HistoryQuery
	addr, group := r.URL.Query().Get("addr"), r.URL.Query().Get("group")
	switch {
	case addr != "" && group != "":
		writeError(w, http.StatusBadRequest, api.CodeBadInput, "give addr or group, not both")
		return
	case addr != "":
		a, err := netip.ParseAddr(addr)
		if err != nil {
			writeError(w, http.StatusBadRequest, api.CodeBadInput, fmt.Sprintf("addr=%q is not an IP address", addr))
			return
		}
		q.Addr = a.Unmap()
	case group != "":
		if err := api.CheckGroup(group); err != nil {
			s.fail(w, err)
			return
		}
		v, err := s.cfg.Fleet.Fleet(r.Context())
		if err != nil {
			s.fail(w, err)
			return
		}
		for _, cv := range v.Claims {
			if cv.Claim.Group == group {
				q.Addrs = append(q.Addrs, cv.Claim.Addr)
			}
		}
		if len(q.Addrs) == 0 {
			writeJSON(w, api.HistoryResponse{Revision: v.Revision, Changes: []api.HistoryChange{}})
			return
		}
	default:
		writeError(w, http.StatusBadRequest, api.CodeBadInput, "give addr=ADDR or group=NAME")
		return
	}
	changes, rev, err := s.cfg.Fleet.History(r.Context(), q)
	if err != nil {
		s.fail(w, err)
		return
	}
	changes = changes[max(len(changes)-maxHistoryAnswer, 0):]
	resp := api.HistoryResponse{Revision: rev, Changes: make([]api.HistoryChange, len(changes))}
	for i, ch := range changes {
		resp.Changes[i] = ch.API()
	}
	writeJSON(w, resp)
}

// maxHistoryAnswer bounds the changes GET /v1/history answers with.
const maxHistoryAnswer = 200
