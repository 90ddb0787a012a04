package probe

import (
	"net"
	"strings"
	"testing"

	"github.com/vipctl/vip/internal/api"
)

// TestExpectedJudge: an address is as expected only when exactly the
// expected owner answers; nobody, somebody else, or the owner beside
// another MAC are not, each said in a sentence that names who answered.
func TestExpectedJudge(t *testing.T) {
	a1, _ := net.ParseMAC("02:00:00:00:00:a1")
	a2, _ := net.ParseMAC("02:00:00:00:00:a2")
	exp := Expected{Name: "a", MACs: []net.HardwareAddr{a1, a2}}
	nodes := map[string]string{"02:00:00:00:00:a1": "a", "02:00:00:00:00:b1": "b"}
	claim := func(macs ...string) api.ProbeResult {
		r := api.ProbeResult{Addr: "192.0.2.10", Interface: "eth0", Claimers: []api.Claimer{}}
		for _, m := range macs {
			r.Claimers = append(r.Claimers, api.Claimer{MAC: m})
		}
		return r
	}
	tests := []struct {
		name    string
		r       api.ProbeResult
		ok      bool
		verdict string
	}{
		{"the owner alone", claim("02:00:00:00:00:a1"), true, "answered by 02:00:00:00:00:a1 (node a), as expected"},
		{"its other interface, written in capitals", claim("02:00:00:00:00:A2"), true, "as expected"},
		{"nobody", claim(), false, "nobody answered; expected a"},
		{"another node", claim("02:00:00:00:00:b1"), false, "answered by 02:00:00:00:00:b1 (node b), not by a as expected"},
		{"a MAC no node has", claim("02:00:00:00:00:c1"), false, "answered by 02:00:00:00:00:c1, not by a"},
		{"the owner and another", claim("02:00:00:00:00:a1", "02:00:00:00:00:b1"), false, "a split brain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := []api.ProbeResult{tt.r}
			n := exp.Judge(rs, nodes)
			r := rs[0]
			if r.AsExpected == nil || *r.AsExpected != tt.ok || (n == 0) != tt.ok || !strings.Contains(r.Verdict, tt.verdict) {
				t.Errorf("got as expected %v (%d unexpected), %q; want %v, %q", r.AsExpected, n, r.Verdict, tt.ok, tt.verdict)
			}
		})
	}
}
