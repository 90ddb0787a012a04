package api

import "fmt"

// Summary is the traffic in one short cell, as vip status and the live
// view print it: the packet rate, the byte rate and the totals, such as
// "12/s 9.4 kB/s (1,204 pkts, 1.1 MB)". A nil Traffic is unknown: "-".
func (t *ClaimTraffic) Summary() string {
	if t == nil {
		return "-"
	}
	return fmt.Sprintf("%s/s %s/s (%s pkts, %s)", rate(t.PacketsPerSecond), byteSize(t.BytesPerSecond), grouped(t.Packets), byteSize(float64(t.Bytes)))
}

// Rate is the packet rate alone, as the live view's narrow column shows
// it: "12/s", "1.2k/s"; a nil Traffic is unknown: "-".
func (t *ClaimTraffic) Rate() string {
	switch {
	case t == nil:
		return "-"
	case t.PacketsPerSecond >= 999_950_000:
		return fmt.Sprintf("%.1fG/s", t.PacketsPerSecond/1e9)
	case t.PacketsPerSecond >= 999_950:
		return fmt.Sprintf("%.1fM/s", t.PacketsPerSecond/1e6)
	case t.PacketsPerSecond >= 9_999.5:
		return fmt.Sprintf("%.1fk/s", t.PacketsPerSecond/1e3)
	}
	return rate(t.PacketsPerSecond) + "/s"
}

// rate writes a rate with one decimal below 10, whole above.
func rate(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.1f", v)
	}
	return grouped(uint64(v + 0.5))
}

// byteSize writes bytes in B, kB, MB or GB (powers of 1,000).
func byteSize(v float64) string {
	units := []string{"B", "kB", "MB", "GB", "TB"}
	i := 0
	for v >= 1000 && i < len(units)-1 {
		v /= 1000
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", v)
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// grouped writes n with commas between groups of three digits.
func grouped(n uint64) string {
	s := fmt.Sprint(n)
	out := make([]byte, 0, len(s)+len(s)/3)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}
