//go:build linux

package sniff

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// putCmsg appends a control message to b as the kernel lays it out.
func putCmsg(b []byte, level, typ int32, data []byte) []byte {
	h := make([]byte, unix.CmsgSpace(len(data)))
	hdr := (*unix.Cmsghdr)(unsafe.Pointer(&h[0]))
	hdr.Level, hdr.Type = level, typ
	hdr.SetLen(unix.CmsgLen(len(data)))
	copy(h[unix.CmsgLen(0):], data)
	return append(b, h...)
}

// TestPacketSourceFrame checks what a read makes of the kernel's control
// messages: the arrival time, and the VLAN tag put back in the frame where
// the kernel took it off, with its TPID when the kernel gives one.
func TestPacketSourceFrame(t *testing.T) {
	frame := make([]byte, 42) // an untagged ARP frame, as the socket gets it
	for i := range frame {
		frame[i] = byte(i)
	}
	binary.BigEndian.PutUint16(frame[12:], 0x0806)
	at := time.Unix(1700000000, 123456789)
	ts := unix.NsecToTimespec(at.UnixNano())
	tsData := unsafe.Slice((*byte)(unsafe.Pointer(&ts)), unsafe.Sizeof(ts))
	aux := func(status uint32, tci, tpid uint16) []byte {
		a := unix.TpacketAuxdata{Status: status, Len: uint32(len(frame)), Snaplen: uint32(len(frame)), Vlan_tci: tci, Vlan_tpid: tpid}
		return unsafe.Slice((*byte)(unsafe.Pointer(&a)), unsafe.Sizeof(a))
	}
	tagged := func(tpid, tci uint16) []byte {
		b := append([]byte{}, frame[:12]...)
		b = binary.BigEndian.AppendUint16(b, tpid)
		b = binary.BigEndian.AppendUint16(b, tci)
		return append(b, frame[12:]...)
	}
	tests := []struct {
		name     string
		ctrl     []byte
		want     []byte
		wantTime bool
	}{
		{"untagged", putCmsg(putCmsg(nil, unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, tsData), unix.SOL_PACKET, unix.PACKET_AUXDATA, aux(0, 0, 0)), frame, true},
		{"802.1Q tag", putCmsg(putCmsg(nil, unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, tsData), unix.SOL_PACKET, unix.PACKET_AUXDATA, aux(unix.TP_STATUS_VLAN_VALID, 7, 0)), tagged(0x8100, 7), true},
		{"802.1ad tag with its TPID", putCmsg(nil, unix.SOL_PACKET, unix.PACKET_AUXDATA, aux(unix.TP_STATUS_VLAN_VALID|unix.TP_STATUS_VLAN_TPID_VALID, 0x2005, 0x88a8)), tagged(0x88a8, 0x2005), false},
		{"tag on an older kernel, a TCI alone", putCmsg(nil, unix.SOL_PACKET, unix.PACKET_AUXDATA, aux(0, 9, 0)), tagged(0x8100, 9), false},
		{"no control messages", nil, frame, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &packetSource{snaplen: 64}
			s.initBatch()
			copy(s.bufs[vlanLen:], frame)
			got, gotTime, err := s.restore(0, len(frame), tt.ctrl)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tt.want) {
				t.Errorf("frame: got % x, want % x", got, tt.want)
			}
			if tt.wantTime && !gotTime.Equal(at) {
				t.Errorf("time: got %v, want the kernel's %v", gotTime, at)
			}
			if !tt.wantTime && gotTime.IsZero() {
				t.Error("time: got none, want the time of the read")
			}
		})
	}
}
