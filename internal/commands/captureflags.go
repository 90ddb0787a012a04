package commands

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/vipctl/vip/sniff"
)

// captureOptions are the flags that shape the capture that finds competing
// claimers, the same on vip agent and vip claim --foreground.
type captureOptions struct {
	Filter   string
	WatchAll bool
}

func (o *captureOptions) addFlags(c *cobra.Command, where string) {
	f := c.Flags()
	f.StringVar(&o.Filter, "filter", "", "libpcap expression narrowing the capture that finds competing claimers"+where)
	f.BoolVar(&o.WatchAll, "watch-all", false, "capture the who-has requests for every address on the claimed interfaces, not only the held ones (costs CPU under a flood)"+where)
	// Its name until this release, when traffic also meant these requests.
	f.BoolVar(&o.WatchAll, "all-traffic", false, "the name of --watch-all until this release")
	_ = f.MarkDeprecated("all-traffic", "use --watch-all; --all-traffic goes in the next release")
}

// given reports whether any of the flags was set.
func (o *captureOptions) given() bool { return o.Filter != "" || o.WatchAll }

// check refuses a --filter expression the capture cannot use, before
// anything starts: one that libpcap does not compile, or any in a build
// without libpcap.
func (o *captureOptions) check() error {
	_, err := sniff.Filter(o.Filter)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sniff.ErrNoLibpcap):
		return badInput("--filter needs libpcap, and this vip was built without cgo: build it with CGO_ENABLED=1 and libpcap-dev, or leave --filter out")
	case errors.Is(err, sniff.ErrLibpcapMissing):
		return badInput("--filter needs libpcap, which is not installed: sudo apt-get install libpcap0.8, or leave --filter out")
	default:
		return badInput("--filter: %v", err)
	}
}
