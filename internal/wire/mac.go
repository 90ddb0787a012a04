package wire

import (
	"fmt"
	"net"
)

// MACFrom converts hw to a MAC. It fails unless hw is 6 bytes long.
func MACFrom(hw net.HardwareAddr) (MAC, error) {
	if len(hw) != 6 {
		return MAC{}, fmt.Errorf("hardware address %v: want 6 bytes, got %d", hw, len(hw))
	}
	return MAC(hw), nil
}

// HardwareAddr returns m as a net.HardwareAddr.
func (m MAC) HardwareAddr() net.HardwareAddr {
	return net.HardwareAddr(m[:])
}

// IsZero reports whether m is 00:00:00:00:00:00.
func (m MAC) IsZero() bool {
	return m == MAC{}
}

// String returns m in the form 00:00:5e:00:53:01.
func (m MAC) String() string {
	return m.HardwareAddr().String()
}

// MarshalText returns m as String does, so that JSON shows the usual form.
func (m MAC) MarshalText() ([]byte, error) {
	return []byte(m.String()), nil
}

// UnmarshalText parses a MAC in any form net.ParseMAC accepts, as long as
// it is 6 bytes long.
func (m *MAC) UnmarshalText(b []byte) error {
	hw, err := net.ParseMAC(string(b))
	if err != nil {
		return err
	}
	v, err := MACFrom(hw)
	if err != nil {
		return err
	}
	*m = v
	return nil
}
