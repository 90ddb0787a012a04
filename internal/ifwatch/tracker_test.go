package ifwatch

import (
	"net"
	"net/netip"
	"reflect"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

var (
	mac1 = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
	mac2 = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x02}
)

// msg describes one link message for the table.
type msg struct {
	del    bool
	family uint8
	name   string
	index  int
	mac    net.HardwareAddr
	admin  bool // IFF_UP
	oper   netlink.LinkOperState
	mtu    int // a field Watch ignores
	master int
}

func (m msg) update() netlink.LinkUpdate {
	typ := uint16(unix.RTM_NEWLINK)
	if m.del {
		typ = unix.RTM_DELLINK
	}
	var flags uint32
	if m.admin {
		flags |= unix.IFF_UP
	}
	return netlink.LinkUpdate{
		IfInfomsg: nl.IfInfomsg{IfInfomsg: unix.IfInfomsg{Family: m.family, Index: int32(m.index), Flags: flags}},
		Header:    unix.NlMsghdr{Type: typ},
		Link: &netlink.Device{LinkAttrs: netlink.LinkAttrs{
			Name: m.name, Index: m.index, HardwareAddr: m.mac, RawFlags: flags, OperState: m.oper, MTU: m.mtu, MasterIndex: m.master,
		}},
	}
}

func TestTracker(t *testing.T) {
	up := msg{name: "eth0", index: 2, mac: mac1, admin: true, oper: netlink.OperUp}
	with := func(m msg, f func(*msg)) msg { f(&m); return m }
	eth0 := Change{Name: "eth0", Index: 2, MAC: mac1, Up: true}
	changed := func(c Change, f func(*Change)) Change { f(&c); return c }

	tests := []struct {
		name string
		msgs []msg
		want []Change
	}{{
		name: "first state, then nothing for repeats and ignored fields",
		msgs: []msg{up, up, with(up, func(m *msg) { m.mtu = 9000 })},
		want: []Change{eth0},
	}, {
		name: "admin down, then operstate follows",
		msgs: []msg{up, with(up, func(m *msg) { m.admin = false }), with(up, func(m *msg) { m.admin, m.oper = false, netlink.OperDown })},
		want: []Change{eth0, changed(eth0, func(c *Change) { c.Up = false })},
	}, {
		name: "admin up without carrier is not up",
		msgs: []msg{with(up, func(m *msg) { m.oper = netlink.OperLowerLayerDown }), with(up, func(m *msg) { m.oper = netlink.OperDormant }), up},
		want: []Change{changed(eth0, func(c *Change) { c.Up = false }), eth0},
	}, {
		name: "operstate unknown counts as up",
		msgs: []msg{with(up, func(m *msg) { m.oper = netlink.OperUnknown })},
		want: []Change{eth0},
	}, {
		name: "made a port of a master, then freed",
		msgs: []msg{up, with(up, func(m *msg) { m.master = 7 }), with(up, func(m *msg) { m.master = 7 }), up},
		want: []Change{eth0, changed(eth0, func(c *Change) { c.MasterIndex = 7 }), eth0},
	}, {
		name: "new MAC",
		msgs: []msg{up, with(up, func(m *msg) { m.mac = mac2 })},
		want: []Change{eth0, changed(eth0, func(c *Change) { c.MAC = mac2 })},
	}, {
		name: "deleted, repeat delete ignored, created again with a new index",
		msgs: []msg{up, with(up, func(m *msg) { m.del = true }), with(up, func(m *msg) { m.del = true }),
			with(up, func(m *msg) { m.index, m.mac, m.admin = 7, mac2, false })},
		want: []Change{eth0, changed(eth0, func(c *Change) { c.Deleted, c.Up = true, false }),
			{Name: "eth0", Index: 7, MAC: mac2}},
	}, {
		name: "delete of an unknown interface",
		msgs: []msg{with(up, func(m *msg) { m.del = true })},
	}, {
		name: "renamed: old name deleted, new name appears",
		msgs: []msg{up, with(up, func(m *msg) { m.name = "lan0" })},
		want: []Change{eth0, changed(eth0, func(c *Change) { c.Deleted, c.Up = true, false }),
			changed(eth0, func(c *Change) { c.Name = "lan0" })},
	}, {
		name: "names swapped by two renames",
		msgs: []msg{up, {name: "eth1", index: 3, mac: mac2},
			with(up, func(m *msg) { m.name = "tmp" }),
			{name: "eth0", index: 3, mac: mac2},
			with(up, func(m *msg) { m.name = "eth1" })},
		want: []Change{eth0, {Name: "eth1", Index: 3, MAC: mac2},
			changed(eth0, func(c *Change) { c.Deleted, c.Up = true, false }),
			changed(eth0, func(c *Change) { c.Name = "tmp" }),
			{Name: "eth1", Index: 3, MAC: mac2, Deleted: true},
			{Name: "eth0", Index: 3, MAC: mac2},
			{Name: "tmp", Index: 2, MAC: mac1, Deleted: true},
			changed(eth0, func(c *Change) { c.Name = "eth1" })},
	}, {
		name: "bridge port messages are not about the interface",
		msgs: []msg{up, with(up, func(m *msg) { m.family, m.del = unix.AF_BRIDGE, true }), with(up, func(m *msg) { m.family, m.admin = unix.AF_BRIDGE, false })},
		want: []Change{eth0},
	}, {
		name: "no MAC",
		msgs: []msg{{name: "tun0", index: 9, mac: net.HardwareAddr{}, admin: true}},
		want: []Change{{Name: "tun0", Index: 9, Up: true}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker()
			var got []Change
			for _, m := range tc.msgs {
				got = append(got, tr.update(m.update())...)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("changes:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestTrackerCopiesMAC(t *testing.T) {
	m := msg{name: "eth0", index: 2, mac: net.HardwareAddr{2, 0, 0, 0, 0, 1}}.update()
	got := newTracker().update(m)
	m.Link.Attrs().HardwareAddr[5] = 0xff
	if got[0].MAC[5] != 1 {
		t.Errorf("change shares its MAC with the netlink message: got %v after the message changed", got[0].MAC)
	}
}

func TestTrackerAddrs(t *testing.T) {
	v4 := func(s string, bits int) net.IPNet {
		return net.IPNet{IP: net.ParseIP(s).To4(), Mask: net.CIDRMask(bits, 32)}
	}
	v6 := func(s string, bits int) net.IPNet {
		return net.IPNet{IP: net.ParseIP(s), Mask: net.CIDRMask(bits, 128)}
	}
	add := func(index int, n net.IPNet) netlink.AddrUpdate {
		return netlink.AddrUpdate{LinkIndex: index, LinkAddress: n, NewAddr: true}
	}
	del := func(index int, n net.IPNet) netlink.AddrUpdate {
		return netlink.AddrUpdate{LinkIndex: index, LinkAddress: n}
	}
	tentative := add(2, v6("2001:db8::7", 64))
	tentative.Flags = unix.IFA_F_TENTATIVE
	p4, p6 := netip.MustParsePrefix("192.0.2.7/24"), netip.MustParsePrefix("2001:db8::7/64")
	tests := []struct {
		name string
		msgs []netlink.AddrUpdate
		want []AddrChange
	}{{
		name: "added, told again, removed",
		msgs: []netlink.AddrUpdate{add(2, v4("192.0.2.7", 24)), add(2, v4("192.0.2.7", 24)), del(2, v4("192.0.2.7", 24))},
		want: []AddrChange{{Index: 2, Prefix: p4}, {Index: 2, Prefix: p4, Deleted: true}},
	}, {
		name: "IPv6 tentative, then done with duplicate address detection",
		msgs: []netlink.AddrUpdate{tentative, add(2, v6("2001:db8::7", 64))},
		want: []AddrChange{{Index: 2, Prefix: p6}},
	}, {
		name: "IPv4 in 16 bytes with its mask in 16",
		msgs: []netlink.AddrUpdate{add(2, net.IPNet{IP: net.ParseIP("192.0.2.7"), Mask: net.CIDRMask(96+24, 128)})},
		want: []AddrChange{{Index: 2, Prefix: p4}},
	}, {
		name: "another prefix length, another interface: other addresses",
		msgs: []netlink.AddrUpdate{add(2, v4("192.0.2.7", 24)), add(2, v4("192.0.2.7", 25)), add(3, v4("192.0.2.7", 24))},
		want: []AddrChange{{Index: 2, Prefix: p4}, {Index: 2, Prefix: netip.MustParsePrefix("192.0.2.7/25")}, {Index: 3, Prefix: p4}},
	}, {
		name: "removal of an address never told",
		msgs: []netlink.AddrUpdate{del(2, v4("192.0.2.7", 24))},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker()
			var got []AddrChange
			for _, u := range tc.msgs {
				if c, ok := tr.addr(u); ok {
					got = append(got, c)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("changes:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
