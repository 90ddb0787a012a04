package agent

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/ifwatch"
	"github.com/vipctl/vip/internal/netcheck"
)

// FollowInterfaces tells eng about every interface change until ctx is done.
// A broken subscription (the kernel drops messages when it overflows) is
// opened again, which replays the current state of every interface. An
// interface made a port of a bridge or bond is told as such (sys names its
// master), so that its claims wait: the master receives its frames now.
// changed, when set, is called after each interface change and each
// address added to an interface or removed from it, from the watch's own
// goroutine: it must not block. The returned function waits until
// following has stopped.
func FollowInterfaces(ctx context.Context, eng *announce.Engine, sys netcheck.System, changed func(), log *slog.Logger) (wait func()) {
	opts := ifwatch.Options{Log: log}
	if changed != nil {
		opts.Addrs = func(ifwatch.AddrChange) { changed() }
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			err := ifwatch.Watch(ctx, opts, func(c ifwatch.Change) {
				eng.InterfaceChanged(interfaceChange(c, sys, log))
				if changed != nil {
					changed()
				}
			})
			if ctx.Err() != nil {
				return
			}
			log.Warn("interface subscription broke: following again", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() { <-done }
}

// interfaceChange is c as the engine takes it.
func interfaceChange(c ifwatch.Change, sys netcheck.System, log *slog.Logger) announce.InterfaceChange {
	out := announce.InterfaceChange{Name: c.Name, Index: c.Index, MAC: c.MAC, Up: c.Up, Deleted: c.Deleted}
	if c.MasterIndex == 0 || c.Deleted {
		return out
	}
	// The change itself says the interface has a master: only what kind
	// is looked up (a VRF takes no frames; a bridge or bond does).
	var err error
	out.Master, _, err = netcheck.MasterOf(sys, netcheck.Interface{Name: c.Name, Index: c.Index, MasterIndex: c.MasterIndex})
	if err != nil {
		// The master could not be read (gone again, or a lookup that
		// failed): the interface is taken as a port all the same, so
		// that its claims wait rather than answer with a MAC whose
		// frames the master may take; the next change tells again.
		out.Master = fmt.Sprintf("a port of the interface of index %d", c.MasterIndex)
		log.Warn("look up the master of an interface: its claims wait as on a port until the next change", "interface", c.Name, "master_index", c.MasterIndex, "err", err)
	}
	return out
}
