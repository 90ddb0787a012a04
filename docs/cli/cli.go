// Package cli holds vip's command reference in Markdown, one page per
// command, generated from the cobra commands by `go generate ./docs/cli`
// (cobra/doc's GenMarkdownTree) so that it never drifts from the flags and
// help; a test fails when it is stale, as the man pages' does.
package cli

//go:generate go run ./gen

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// Write renders the page of root and of every subcommand into dir, and
// removes the pages of commands that are gone. The pages carry no date
// (DisableAutoGenTag), so the same commands give the same files.
func Write(root *cobra.Command, dir string) error {
	tmp, err := os.MkdirTemp("", "vip-cli-docs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	pages, err := Pages(root, tmp)
	if err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(dir, "*.md"))
	for _, f := range old {
		if _, ok := pages[filepath.Base(f)]; !ok {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	for name, b := range pages {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// Pages renders every page into tmp, an empty directory, and returns them
// by file name (vip.md, vip_claim.md, vip_lab_up.md, ...).
func Pages(root *cobra.Command, tmp string) (map[string][]byte, error) {
	root.DisableAutoGenTag = true
	if err := doc.GenMarkdownTree(root, tmp); err != nil {
		return nil, fmt.Errorf("render the command reference: %w", err)
	}
	files, err := filepath.Glob(filepath.Join(tmp, "*.md"))
	if err != nil {
		return nil, err
	}
	pages := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		pages[filepath.Base(f)] = b
	}
	return pages, nil
}
