package commands

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	systemd "github.com/coreos/go-systemd/v22/journal"
	"github.com/spf13/cobra"

	"github.com/vipctl/vip/internal/api"
	"github.com/vipctl/vip/internal/hostnet"
	"github.com/vipctl/vip/internal/journal"
	"github.com/vipctl/vip/internal/netcheck"
)

// IO is where a command reads and writes.
type IO struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// StdIO returns the process's standard streams.
func StdIO() IO { return IO{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr} }

// deps are what commands share: streams, the view of the host's network,
// and the global flags.
type deps struct {
	io  IO
	sys netcheck.System
	// ctx is the parent of every command's context; tests cancel it.
	ctx context.Context

	logFormat string
	logLevel  string
	socket    string
}

// client returns a client of the agent on the --socket.
func (d *deps) client() *api.Client { return api.NewClient(d.socket) }

// logger builds the slog logger the global flags ask for, writing to the
// error stream so that standard output stays for results. When that
// stream is the systemd journal, the lines go without their time and with
// their priority (internal/journal); a --log-file, which replaces the
// error stream, never is.
func (d *deps) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(d.logLevel)); err != nil {
		return nil, badInput("--log-level %q is not a level: use debug, info, warn or error", d.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	var handler func(io.Writer) slog.Handler
	switch strings.ToLower(d.logFormat) {
	case "text":
		handler = func(w io.Writer) slog.Handler { return slog.NewTextHandler(w, opts) }
	case "json":
		handler = func(w io.Writer) slog.Handler { return slog.NewJSONHandler(w, opts) }
	default:
		return nil, badInput("--log-format %q is not a format: use text or json", d.logFormat)
	}
	if d.io.ErrOut == os.Stderr {
		// A $JOURNAL_STREAM it cannot read names no stream (false).
		if ok, _ := systemd.StderrIsJournalStream(); ok {
			return slog.New(journal.NewHandler(d.io.ErrOut, handler)), nil
		}
	}
	return slog.New(handler(d.io.ErrOut)), nil
}

// newRootCmd returns the vip command with every subcommand.
func newRootCmd(d *deps) *cobra.Command {
	root := &cobra.Command{
		Use:   "vip",
		Short: "Steer virtual IPs by hand on a layer-2 network",
		Long: `vip makes this host the owner of virtual IP addresses on a layer-2 segment:
it answers ARP requests and IPv6 neighbor solicitations for them with the
interface's MAC address, and sends bursts of gratuitous advertisements so that
switches and neighbours learn the new owner at once.`,
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("vip {{.Version}}\n")
	root.SetIn(d.io.In)
	root.SetOut(d.io.Out)
	root.SetErr(d.io.ErrOut)
	root.PersistentFlags().StringVar(&d.logFormat, "log-format", "text", "log format: text or json")
	root.PersistentFlags().StringVar(&d.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	defSocket := os.Getenv(api.SocketEnv)
	if defSocket == "" {
		defSocket = api.DefaultSocket
	}
	root.PersistentFlags().StringVar(&d.socket, "socket", defSocket, "the agent's unix socket (env "+api.SocketEnv+")")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &inputError{err: fmt.Errorf("%w; run '%s --help' for usage", err, c.CommandPath())}
	})
	root.AddCommand(
		newClaimCmd(d, nil),
		newReleaseCmd(d, nil),
		newRefreshCmd(d, nil),
		newStatusCmd(d, nil),
		newEventsCmd(d, nil),
		newAgentCmd(d, nil),
		newWatchCmd(d, nil),
		newMoveCmd(d, nil),
		newFleetCmd(d, nil),
		newCordonCmd(d, nil),
		newUncordonCmd(d, nil),
		newDrainCmd(d, nil),
		newStandbyCmd(d, nil),
		newProbeCmd(d, nil),
		newHistoryCmd(d, nil),
		newFailsafeCmd(d, nil, nil),
		newVersionCmd(d, nil),
		newLabCmd(d, nil),
	)
	addExitStatus(root)
	return root
}

// Main runs vip with args and returns its exit code.
func Main(args []string, streams IO) ExitCode {
	return run(context.Background(), args, streams, hostnet.System{})
}

func run(ctx context.Context, args []string, streams IO, sys netcheck.System) ExitCode {
	d := &deps{io: streams, sys: sys, ctx: ctx}
	root := newRootCmd(d)
	root.SetArgs(args)
	c, err := root.ExecuteContextC(ctx)
	if err != nil && strings.HasPrefix(err.Error(), "unknown command") {
		// The message is one line, as every other: the fix follows it.
		err = &inputError{err: fmt.Errorf("%w; run '%s --help' for usage", err, c.CommandPath())}
	}
	code, shown := exitCode(err)
	if shown != nil {
		fmt.Fprintf(streams.ErrOut, "vip: %v\n", shown)
	}
	return code
}

// Command returns vip's root command, for the tools that generate shell
// completions and man pages from it.
func Command() *cobra.Command {
	return newRootCmd(&deps{io: StdIO(), sys: hostnet.System{}, ctx: context.Background()})
}
