package api

import "testing"

func TestTrafficSummary(t *testing.T) {
	tests := []struct {
		name string
		t    *ClaimTraffic
		want string
		rate string
	}{
		{"unknown", nil, "-", "-"},
		{"nothing yet", &ClaimTraffic{}, "0.0/s 0 B/s (0 pkts, 0 B)", "0.0/s"},
		{"a ping", &ClaimTraffic{Packets: 3, Bytes: 294, PacketsPerSecond: 1, BytesPerSecond: 98}, "1.0/s 98 B/s (3 pkts, 294 B)", "1.0/s"},
		{"steady", &ClaimTraffic{Packets: 9000, Bytes: 900_000, PacketsPerSecond: 812.4, BytesPerSecond: 81_240}, "812/s 81.2 kB/s (9,000 pkts, 900.0 kB)", "812/s"},
		{"busy", &ClaimTraffic{Packets: 1234567, Bytes: 1_100_000_000, PacketsPerSecond: 12345.4, BytesPerSecond: 9_400}, "12,345/s 9.4 kB/s (1,234,567 pkts, 1.1 GB)", "12.3k/s"},
		{"a flood", &ClaimTraffic{PacketsPerSecond: 2_500_000}, "2,500,000/s 0 B/s (0 pkts, 0 B)", "2.5M/s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.t.Summary(); got != tt.want {
				t.Errorf("Summary: got %q, want %q", got, tt.want)
			}
			if got := tt.t.Rate(); got != tt.rate {
				t.Errorf("Rate: got %q, want %q", got, tt.rate)
			}
		})
	}
}
