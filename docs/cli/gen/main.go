// Command gen writes vip's command reference into the current directory;
// `go generate ./docs/cli` runs it.
package main

import (
	"fmt"
	"os"

	"github.com/vipctl/vip/docs/cli"
	"github.com/vipctl/vip/internal/commands"
)

func main() {
	if err := cli.Write(commands.Command(), "."); err != nil {
		fmt.Fprintln(os.Stderr, "generate the command reference:", err)
		os.Exit(1)
	}
}
