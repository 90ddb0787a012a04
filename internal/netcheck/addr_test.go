package netcheck_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vipctl/vip/internal/netcheck"
)

// checkInvalid fails unless err is an input error whose text holds every
// fragment and reads as one sentence.
func checkInvalid(t *testing.T, err error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", fragments)
	}
	if !errors.Is(err, netcheck.ErrInvalid) {
		t.Errorf("errors.Is(%q, ErrInvalid): got false, want true", err)
	}
	msg := err.Error()
	for _, f := range fragments {
		if !strings.Contains(msg, f) {
			t.Errorf("error %q: want it to contain %q", msg, f)
		}
	}
	if strings.HasSuffix(msg, ".") || strings.Contains(msg, "\n") {
		t.Errorf("error %q: want one line without a trailing period", msg)
	}
}

func TestParseAddr(t *testing.T) {
	tests := []struct {
		in   string
		want string   // the address, when valid
		frag []string // fragments of the error, when not
	}{
		{in: "192.0.2.10", want: "192.0.2.10"},
		{in: "198.51.100.255", want: "198.51.100.255"}, // broadcast only on some link: CheckAddrOnLink's job
		{in: "2001:db8::10", want: "2001:db8::10"},
		{in: "2001:DB8:0:0::10", want: "2001:db8::10"},
		{in: "fd00::1", want: "fd00::1"},

		{in: "192.0.2.10/32", frag: []string{"prefix length", "give the address alone, 192.0.2.10"}},
		{in: "192.0.2.10/24", frag: []string{"prefix length", "192.0.2.10"}},
		{in: "2001:db8::10/64", frag: []string{"prefix length", "2001:db8::10"}},
		{in: "", frag: []string{`"" is not an IP address`, "192.0.2.10", "2001:db8::10"}},
		{in: "vip.example", frag: []string{`"vip.example" is not an IP address`}},
		{in: "192.0.2.256", frag: []string{"not an IP address"}},
		{in: "192.0.2", frag: []string{"not an IP address"}},
		{in: " 192.0.2.10", frag: []string{"not an IP address"}},
		{in: "2001:db8::10%eth0", frag: []string{"has a zone", "%eth0", "-i"}},
		{in: "fe80::1%eth0", frag: []string{"has a zone", "%eth0"}},
		{in: "::ffff:192.0.2.10", frag: []string{"IPv4-mapped", "write it as 192.0.2.10"}},
		{in: "0.0.0.0", frag: []string{"0.0.0.0 is the unspecified address", "cannot be claimed"}},
		{in: "::", frag: []string{":: is the unspecified address"}},
		{in: "255.255.255.255", frag: []string{"255.255.255.255 is the broadcast address"}},
		{in: "224.0.0.1", frag: []string{"224.0.0.1 is a multicast address"}},
		{in: "239.255.255.250", frag: []string{"is a multicast address"}},
		{in: "ff02::1", frag: []string{"ff02::1 is a multicast address"}},
		{in: "ff05::1:3", frag: []string{"is a multicast address"}},
		{in: "127.0.0.1", frag: []string{"127.0.0.1 is a loopback address"}},
		{in: "127.1.2.3", frag: []string{"is a loopback address"}},
		{in: "::1", frag: []string{"::1 is a loopback address"}},
		{in: "169.254.10.1", frag: []string{"169.254.10.1 is a link-local address"}},
		{in: "fe80::1", frag: []string{"fe80::1 is a link-local address"}},
		{in: "0.1.2.3", frag: []string{"0.1.2.3 is in 0.0.0.0/8"}},
		{in: "240.0.0.1", frag: []string{"240.0.0.1 is in the reserved range 240.0.0.0/4"}},
		{in: "254.255.255.254", frag: []string{"240.0.0.0/4"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := netcheck.ParseAddr(tt.in)
			if tt.frag == nil {
				if err != nil {
					t.Fatalf("got error %v, want %s", err, tt.want)
				}
				if got.String() != tt.want {
					t.Errorf("got %v, want %s", got, tt.want)
				}
				return
			}
			checkInvalid(t, err, tt.frag...)
			if got.IsValid() {
				t.Errorf("got address %v with the error, want the zero Addr", got)
			}
		})
	}
}

func TestParseAddrs(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want []string
		frag []string
	}{
		{name: "one of each family", in: []string{"192.0.2.10", "2001:db8::10"}, want: []string{"192.0.2.10", "2001:db8::10"}},
		{name: "order kept", in: []string{"203.0.113.9", "192.0.2.10"}, want: []string{"203.0.113.9", "192.0.2.10"}},
		{name: "spaces trimmed", in: []string{" 192.0.2.10 "}, want: []string{"192.0.2.10"}},
		{name: "none", in: []string{}, frag: []string{"no address given"}},
		{name: "nil", in: nil, frag: []string{"no address given"}},
		{name: "same spelling twice", in: []string{"192.0.2.10", "192.0.2.10"}, frag: []string{"192.0.2.10 is given twice"}},
		{name: "IPv6 in two spellings", in: []string{"2001:db8::1", "2001:DB8:0::1"}, frag: []string{"2001:db8::1 and 2001:DB8:0::1 are the same address"}},
		{name: "IPv6 with leading zeros", in: []string{"2001:db8::10", "192.0.2.10", "2001:0db8:0000::0010"}, frag: []string{"2001:db8::10 and 2001:0db8:0000::0010 are the same address"}},
		{name: "one bad among good", in: []string{"192.0.2.10", "224.0.0.1"}, frag: []string{"224.0.0.1 is a multicast address"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := netcheck.ParseAddrs(tt.in)
			if tt.frag != nil {
				checkInvalid(t, err, tt.frag...)
				if got != nil {
					t.Errorf("got %v with the error, want nil", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want %v", err, tt.want)
			}
			var gotS []string
			for _, a := range got {
				gotS = append(gotS, a.String())
			}
			if !slices.Equal(gotS, tt.want) {
				t.Errorf("got %v, want %v", gotS, tt.want)
			}
		})
	}
}

func TestParseAddrAcceptsWhatItPrints(t *testing.T) {
	// Whatever ParseAddr accepts, it accepts again in its canonical form:
	// the form status and the control API show back to the operator.
	for _, s := range []string{"192.0.2.10", "2001:DB8::0:10", "2001:db8:0:0:0:0:0:10"} {
		a, err := netcheck.ParseAddr(s)
		if err != nil {
			t.Fatalf("ParseAddr(%q): %v", s, err)
		}
		b, err := netcheck.ParseAddr(a.String())
		if err != nil || b != a {
			t.Errorf("ParseAddr(%q) = %v, %v; want %v", a.String(), b, err, a)
		}
	}
}

func TestParseAddrRefusesIPv4Compatible(t *testing.T) {
	_, err := netcheck.ParseAddr("::192.0.2.10")
	if !errors.Is(err, netcheck.ErrInvalid) || !strings.Contains(err.Error(), "claim 192.0.2.10 for IPv4") {
		t.Errorf("got %v, want an invalid-input error pointing at 192.0.2.10", err)
	}
}
