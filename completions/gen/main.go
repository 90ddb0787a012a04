// Command gen writes vip's completion scripts into the current directory;
// `go generate ./completions` runs it.
package main

import (
	"fmt"
	"os"

	"github.com/vipctl/vip/completions"
	"github.com/vipctl/vip/internal/commands"
)

func main() {
	if err := completions.Write(commands.Command(), "."); err != nil {
		fmt.Fprintln(os.Stderr, "generate completions:", err)
		os.Exit(1)
	}
}
