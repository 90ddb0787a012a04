package assign

import (
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

func TestHostPrefix(t *testing.T) {
	tests := []struct {
		addr  netip.Addr
		want  string // empty: refused
		nodad bool
	}{
		{netip.MustParseAddr("192.0.2.10"), "192.0.2.10/32", false},
		{netip.MustParseAddr("2001:db8::10"), "2001:db8::10/128", true},
		{netip.Addr{}, "", false},
		{netip.MustParseAddr("2001:db8::10%eth0"), "", false},
		{netip.MustParseAddr("::ffff:192.0.2.10"), "", false},
	}
	for _, tc := range tests {
		t.Run(tc.addr.String(), func(t *testing.T) {
			p, err := hostPrefix(tc.addr)
			if tc.want == "" {
				if err == nil {
					t.Errorf("got %s, want a refusal", p)
				}
				return
			}
			if err != nil || p.String() != tc.want {
				t.Fatalf("got %s, %v; want %s", p, err, tc.want)
			}
			a := netlinkAddr(p, 0)
			if a.IPNet.String() != tc.want {
				t.Errorf("netlink address: got %s, want %s", a.IPNet, tc.want)
			}
			if got := a.Flags&unix.IFA_F_NODAD != 0; got != tc.nodad {
				t.Errorf("IFA_F_NODAD: got %v, want %v", got, tc.nodad)
			}
		})
	}
}
