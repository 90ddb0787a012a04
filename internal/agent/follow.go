package agent

import (
	"context"
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
	l, err := sys.InterfaceByIndex(c.Index)
	if err == nil {
		out.Master, _, err = netcheck.MasterOf(sys, l)
	}
	if err != nil {
		// Gone again, most likely; the next change tells.
		log.Debug("look up the master of an interface", "interface", c.Name, "err", err)
	}
	return out
}
