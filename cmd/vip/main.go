// Command vip steers virtual IPs by hand on a layer-2 network.
package main

import (
	"os"

	"github.com/vipctl/vip/cmd"
)

func main() { os.Exit(int(cmd.Main(os.Args[1:], cmd.StdIO()))) }
