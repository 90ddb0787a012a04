//go:build race

package state

// raceEnabled reports whether the race detector is on; it slows encoding
// several times, so timing budgets are not checked under it.
const raceEnabled = true
