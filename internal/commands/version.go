package commands

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Set at link time by the Makefile and goreleaser (-X); empty in a plain
// go build, where the module's build information fills in.
var (
	version string
	commit  string
)

// versionString describes this build: version, commit and Go version.
func versionString() string {
	b := currentBuild()
	return fmt.Sprintf("%s (commit %s, %s)", b.Version, b.Commit, b.Go)
}

// buildInfo is what vip version --json prints.
type buildInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Go      string `json:"go"`
}

func currentBuild() buildInfo {
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
	return buildInfo{Version: v, Commit: c, Go: runtime.Version()}
}

// versionOptions are the flags of vip version.
type versionOptions struct {
	JSON bool
}

// newVersionCmd builds vip version; runF, when set, runs instead, so tests
// check the flags apart.
func newVersionCmd(d *deps, runF func(context.Context, *versionOptions) error) *cobra.Command {
	o := &versionOptions{}
	c := &cobra.Command{
		Use:               "version",
		Short:             "Print vip's version, commit and Go version",
		Args:              cobra.NoArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runVersion(d, o)
		},
	}
	c.Flags().BoolVar(&o.JSON, "json", false, "print the version as JSON")
	return c
}

func runVersion(d *deps, o *versionOptions) error {
	if o.JSON {
		return writeJSON(d, currentBuild())
	}
	_, err := fmt.Fprintf(d.io.Out, "vip %s\n", versionString())
	return err
}
