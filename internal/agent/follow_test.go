package agent

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/vipctl/vip/internal/ifwatch"
	"github.com/vipctl/vip/internal/netcheck"
)

// mastersSys knows interfaces by index alone: the masters of the test.
type mastersSys map[int]netcheck.Interface

func (s mastersSys) Interface(string) (netcheck.Interface, error) {
	return netcheck.Interface{}, netcheck.ErrNoInterface
}

func (s mastersSys) InterfaceByIndex(i int) (netcheck.Interface, error) {
	if l, ok := s[i]; ok {
		return l, nil
	}
	return netcheck.Interface{}, errors.New("no interface of that index (a lookup that failed)")
}

func (mastersSys) ConnectedRoutes() ([]netcheck.Route, error) { return nil, nil }

// TestInterfaceChangeMaster: an interface the kernel reports with a master
// is a port when the master takes its frames, not when it is a VRF, and a
// port all the same when the master cannot be looked up, so that its
// claims wait rather than answer (an "up" of a bridge port read as a plain
// up re-armed its claims while the bridge took the frames).
func TestInterfaceChangeMaster(t *testing.T) {
	sys := mastersSys{7: {Name: "brx", Index: 7, Kind: "bridge"}, 8: {Name: "vrf-blue", Index: 8, Kind: "vrf"}}
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name   string
		master int
		want   string
	}{
		{"no master", 0, ""},
		{"a bridge's port", 7, "a port of bridge brx"},
		{"a VRF's member", 8, ""},
		{"a master that cannot be read", 9, "a port of the interface of index 9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := interfaceChange(ifwatch.Change{Name: "eth1", Index: 3, Up: true, MasterIndex: tc.master}, sys, log)
			if got.Master != tc.want || got.Up != true {
				t.Errorf("got master %q, up %v; want %q (the engine parks a port's claims)", got.Master, got.Up, tc.want)
			}
			if tc.want != "" && !strings.HasPrefix(got.Master, "a port of") {
				t.Errorf("master %q does not read as a port", got.Master)
			}
		})
	}
}
