// Command vip steers virtual IPs by hand on a layer-2 network.
package main

import (
	"os"

	"github.com/vipctl/vip/internal/commands"
)

func main() { os.Exit(int(commands.Main(os.Args[1:], commands.StdIO()))) }
