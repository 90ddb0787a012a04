package api

// The names the next release writes for the wire values renamed in this
// one (docs/api.md, "Names changed in this release"). This release still
// writes the old names, which scripts may match, and reads both, so that
// its clients understand an agent of the next release in a fleet being
// upgraded; the next release writes these and still reads the old.
const (
	NextCodeOtherInterface = "other-interface"
	NextFleetHolding       = "holding"
	NextFleetUnrenewed     = "unrenewed"
	// NextHistoryFailover is the history's kind of a standby's take of
	// an address whose owner's lease expired, written "standby-takeover"
	// (HistoryFailover) until the next release ("take-over" is vip claim
	// --take-over's).
	NextHistoryFailover = "failover"
	HistoryFailover     = "standby-takeover"
)

// FleetState returns a FleetClaim's state under this release's name, for
// one written by an agent of this release or of the next.
func FleetState(s string) string {
	switch s {
	case NextFleetHolding:
		return FleetHolding
	case NextFleetUnrenewed:
		return FleetUnrenewed
	}
	return s
}

// Code returns an error code under this release's name, for one written
// by an agent of this release or of the next.
func Code(c string) string {
	if c == NextCodeOtherInterface {
		return CodeOtherInterface
	}
	return c
}
