package commands

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vipctl/vip/internal/store"
)

func TestHistoryFlags(t *testing.T) {
	for _, tt := range []struct {
		name string
		got  historyOptions
		want historyOptions
	}{
		{"defaults", parse(t, newHistoryCmd), historyOptions{Store: storeOptions{Prefix: store.DefaultPrefix}}},
		{"every flag", parse(t, newHistoryCmd, "192.0.2.10", "--node", "a", "--since", "24h", "-f", "--json", "--store", "etcd://192.0.2.5:2379"),
			historyOptions{Addr: "192.0.2.10", Node: "a", Since: 24 * time.Hour, Follow: true, JSON: true, Store: storeOptions{URL: "etcd://192.0.2.5:2379", Prefix: store.DefaultPrefix}}},
	} {
		if fmt.Sprint(tt.got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: got %+v, want %+v", tt.name, tt.got, tt.want)
		}
	}
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	q, err := (&historyOptions{Addr: "::ffff:192.0.2.10", Node: "a", Since: time.Hour}).query(now)
	if err != nil || q.Addr != netip.MustParseAddr("192.0.2.10") || q.Node != "a" || !q.Since.Equal(now.Add(-time.Hour)) {
		t.Errorf("query: %+v, %v", q, err)
	}
	for _, o := range []historyOptions{{Addr: "192.0.2.300"}, {Addr: "fe80::1%eth0"}, {Node: "a b"}, {Since: -time.Hour}} {
		var in *inputError
		if _, err := o.query(now); !errors.As(err, &in) {
			t.Errorf("%+v: %v, want bad input", o, err)
		}
	}
}

// TestReasonChecked: every changing command refuses a --reason the history
// cannot keep, before anything connects.
func TestReasonChecked(t *testing.T) {
	long := strings.Repeat("x", store.MaxReasonLen+1)
	for _, args := range [][]string{
		{"claim", "192.0.2.10", "--reason", long},
		{"release", "192.0.2.10", "--reason", "two\nlines"},
		{"move", "192.0.2.10", "--to", "b", "--reason", long, "--store", "etcd://192.0.2.5:2379"},
		{"cordon", "a", "--reason", long, "--store", "etcd://192.0.2.5:2379"},
		{"uncordon", "a", "--reason", long, "--store", "etcd://192.0.2.5:2379"},
		{"drain", "a", "--reason", long, "--store", "etcd://192.0.2.5:2379"},
	} {
		var out bytes.Buffer
		d := &deps{}
		d.io.Out, d.io.ErrOut = &out, &out
		c := newRootCmd(d)
		c.SetArgs(args)
		c.SetOut(&out)
		c.SetErr(&out)
		err := c.Execute()
		var in *inputError
		if !errors.As(err, &in) || !strings.Contains(err.Error(), "--reason") {
			t.Errorf("vip %s: %v, want bad input naming --reason", args[0], err)
		}
	}
}
