// Command gen writes vip's man pages into the current directory; `go
// generate ./man` runs it.
package main

import (
	"fmt"
	"os"

	"github.com/vipctl/vip/internal/commands"
	"github.com/vipctl/vip/man"
)

func main() {
	if err := man.Write(commands.Command(), "."); err != nil {
		fmt.Fprintln(os.Stderr, "generate man pages:", err)
		os.Exit(1)
	}
}
