// Package completions holds vip's shell completion scripts, generated from
// the cobra commands by `go generate ./completions` so that they never drift
// from the flags; a test fails when they are stale.
package completions

//go:generate go run ./gen

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// Files maps each completion file name to the function that renders it.
func Files(root *cobra.Command) map[string]func() ([]byte, error) {
	render := func(f func(*bytes.Buffer) error) func() ([]byte, error) {
		return func() ([]byte, error) {
			var b bytes.Buffer
			err := f(&b)
			return b.Bytes(), err
		}
	}
	return map[string]func() ([]byte, error){
		"vip.bash": render(func(b *bytes.Buffer) error { return root.GenBashCompletionV2(b, true) }),
		"vip.zsh":  render(func(b *bytes.Buffer) error { return root.GenZshCompletion(b) }),
		"vip.fish": render(func(b *bytes.Buffer) error { return root.GenFishCompletion(b, true) }),
		"vip.ps1":  render(func(b *bytes.Buffer) error { return root.GenPowerShellCompletionWithDesc(b) }),
	}
}

// Write renders every completion file into dir.
func Write(root *cobra.Command, dir string) error {
	for name, render := range Files(root) {
		b, err := render()
		if err != nil {
			return fmt.Errorf("render %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}
