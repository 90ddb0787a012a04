// Command gen writes vip's completion scripts into the current directory;
// `go generate ./completions` runs it.
package main

import (
	"fmt"
	"os"

	"github.com/vipctl/vip/cmd"
	"github.com/vipctl/vip/completions"
)

func main() {
	if err := completions.Write(cmd.Command(), "."); err != nil {
		fmt.Fprintln(os.Stderr, "generate completions:", err)
		os.Exit(1)
	}
}
