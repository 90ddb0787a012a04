package commands

import (
	"net"
	"slices"

	"github.com/spf13/cobra"
)

// interfaceCompletion completes the interfaces vip can claim on: up, not
// loopback, with an Ethernet address, each described by its MAC.
func interfaceCompletion(list func() ([]net.Interface, error)) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		ifs, err := list()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, ifi := range ifs {
			if ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagLoopback != 0 || len(ifi.HardwareAddr) != 6 {
				continue
			}
			out = append(out, ifi.Name+"\t"+ifi.HardwareAddr.String())
		}
		slices.Sort(out)
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
