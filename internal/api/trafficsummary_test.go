package api

import "testing"

func TestTrafficSummary(t *testing.T) {
	tests := []struct {
		name string
		t    *ClaimTraffic
		want string
	}{
		{"unknown", nil, "-"},
		{"nothing yet", &ClaimTraffic{}, "0.0/s 0 B/s (0 pkts, 0 B)"},
		{"a ping", &ClaimTraffic{Packets: 3, Bytes: 294, PacketsPerSecond: 1, BytesPerSecond: 98}, "1.0/s 98 B/s (3 pkts, 294 B)"},
		{"busy", &ClaimTraffic{Packets: 1234567, Bytes: 1_100_000_000, PacketsPerSecond: 12345.4, BytesPerSecond: 9_400}, "12,345/s 9.4 kB/s (1,234,567 pkts, 1.1 GB)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.t.Summary(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
