package cmd

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at link time by the Makefile and goreleaser (-X); empty in a plain
// go build, where the module's build information fills in.
var (
	version string
	commit  string
)

// versionString describes this build: version, commit and Go version.
func versionString() string {
	v, c := version, commit
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && c == "" {
				c = s.Value
			}
		}
	}
	if v == "" {
		v = "dev"
	}
	if c == "" {
		c = "unknown"
	}
	return fmt.Sprintf("%s (commit %s, %s)", v, c, runtime.Version())
}
