// Package man holds vip's man pages, one per command, generated from the
// cobra commands by `go generate ./man` so that they never drift from the
// flags and help; a test fails when they are stale.
package man

//go:generate go run ./gen

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// date is the date printed in the pages. A fixed one keeps the generated
// files the same from one run to the next.
var date = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// Pages renders the man page of root and every subcommand, by file name.
func Pages(root *cobra.Command) (map[string][]byte, error) {
	header := &doc.GenManHeader{Title: "VIP", Section: "1", Source: "vip", Manual: "vip manual", Date: &date}
	out := map[string][]byte{}
	var walk func(c *cobra.Command) error
	walk = func(c *cobra.Command) error {
		for _, sub := range c.Commands() {
			if !sub.IsAvailableCommand() || sub.IsAdditionalHelpTopicCommand() {
				continue
			}
			if err := walk(sub); err != nil {
				return err
			}
		}
		var b bytes.Buffer
		if err := doc.GenMan(c, header, &b); err != nil {
			return fmt.Errorf("render the man page of %s: %w", c.CommandPath(), err)
		}
		out[strings.ReplaceAll(c.CommandPath(), " ", "-")+".1"] = b.Bytes()
		return nil
	}
	root.DisableAutoGenTag = true
	return out, walk(root)
}

// Write renders every page into dir, removing pages of commands that are gone.
func Write(root *cobra.Command, dir string) error {
	pages, err := Pages(root)
	if err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(dir, "*.1"))
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
