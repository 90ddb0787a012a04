package agent

import (
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/api"
)

// ClaimsFromStatus converts the engine's status of claims for clients.
func ClaimsFromStatus(st []announce.Status, now time.Time) []api.Claim {
	cv := newClaimConverter(now)
	out := make([]api.Claim, len(st))
	for i := range st {
		out[i] = cv.claim(&st[i])
	}
	return out
}

// claimConverter formats each frame set once rather than once per claim:
// thousands of claims share a handful.
type claimConverter struct {
	now        time.Time
	frames     announce.FrameKinds
	framesText string
	// kind and hook are the latest responder formatted, as responder.
	kind, hook, responder string
}

// responderString is "kind (hook)", formatted once per kind and hook.
func (cv *claimConverter) responderString(kind, hook string) string {
	if kind != cv.kind || hook != cv.hook {
		cv.kind, cv.hook, cv.responder = kind, hook, kind+" ("+hook+")"
	}
	return cv.responder
}

func newClaimConverter(now time.Time) *claimConverter {
	return &claimConverter{now: now, frames: announce.DefaultFrameKinds, framesText: announce.DefaultFrameKinds.String()}
}

func (cv *claimConverter) framesString(f announce.FrameKinds) string {
	if f != cv.frames {
		cv.frames, cv.framesText = f, f.String()
	}
	return cv.framesText
}

// claim converts s. The engine has filled in its defaults (window,
// interval, frames); the policy's is defend.
func (cv *claimConverter) claim(s *announce.Status) api.Claim {
	c := api.Claim{
		Addr:             s.Addr.String(),
		Interface:        s.Interface,
		MAC:              s.MAC,
		State:            s.State,
		ClaimedAt:        s.ClaimedAt,
		RefreshedAt:      s.RefreshedAt,
		WindowEnd:        s.WindowEnd,
		Answered:         s.Answered,
		GratuitousFrames: s.GratuitousFrames,
		Assigned:         s.AddedAddress,
		Window:           api.Duration(s.Window),
		Interval:         api.Duration(s.Interval),
		Frames:           cv.framesString(s.Frames),
		RefreshEvery:     api.Duration(s.Options.RefreshEvery),
		OnConflict:       string(s.Options.OnConflict),
		Group:            s.Options.Group,
	}
	c.Responder = s.Responder
	if s.Hook != "" {
		c.Responder = cv.responderString(s.Responder, s.Hook)
	}
	if t := s.Traffic; t != nil {
		c.Traffic = &api.ClaimTraffic{Packets: t.Packets, Bytes: t.Bytes, PacketsPerSecond: t.PacketsPerSecond, BytesPerSecond: t.BytesPerSecond}
	}
	if c.OnConflict == "" {
		c.OnConflict = string(announce.PolicyDefend)
	}
	for _, cl := range s.Claimers {
		c.Claimers = append(c.Claimers, api.Claimer{MAC: cl.MAC.String(), Kind: cl.Kind, FirstSeen: cl.FirstSeen, LastSeen: cl.LastSeen, Count: cl.Count})
	}
	if !s.WindowEnd.IsZero() && s.WindowEnd.After(cv.now) {
		c.WindowRemaining = api.Duration(s.WindowEnd.Sub(cv.now).Round(time.Millisecond))
	}
	return c
}
