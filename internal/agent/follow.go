package agent

import (
	"context"
	"log/slog"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/ifwatch"
)

// FollowInterfaces tells eng about every interface change until ctx is done.
// A broken subscription (the kernel drops messages when it overflows) is
// opened again, which replays the current state of every interface. The
// returned function waits until following has stopped.
func FollowInterfaces(ctx context.Context, eng *announce.Engine, log *slog.Logger) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			err := ifwatch.Watch(ctx, ifwatch.Options{Log: log}, func(c ifwatch.Change) {
				eng.InterfaceChanged(announce.InterfaceChange(c))
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
