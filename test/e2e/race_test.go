//go:build race

package e2e_test

// With -race the vip binary that the lab tests run is built with the race
// detector too, since the agent is where the concurrency is; TestMain fails
// the run if any of its processes reported a race.
func init() { raceBuild = true }
