// Command gen writes vip's command reference into the current directory;
// `go generate ./docs/cli` runs it.
package main

import (
	"fmt"
	"os"

	"github.com/vipctl/vip/cmd"
	"github.com/vipctl/vip/docs/cli"
)

func main() {
	if err := cli.Write(cmd.Command(), "."); err != nil {
		fmt.Fprintln(os.Stderr, "generate the command reference:", err)
		os.Exit(1)
	}
}
