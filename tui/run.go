package tui

import (
	"context"
	"errors"
	"os"
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// Run shows the view of the agent behind b until the operator quits or ctx
// ends. Quitting only closes the view: the agent keeps every claim.
func Run(ctx context.Context, b Backend, o Options) error {
	if o.Out == nil {
		o.Out = os.Stdout
	}
	m := New(ctx, b, o)
	defer m.Close()
	input := tea.WithInputTTY()
	if o.In != nil {
		input = tea.WithInput(o.In)
	}
	p := tea.NewProgram(m,
		tea.WithContext(ctx),
		input,
		tea.WithOutput(o.Out),
		tea.WithAltScreen(),
		// The model draws at most this often anyway; the renderer need
		// not look more often.
		tea.WithFPS(int(time.Second/frameEvery)),
	)
	_, err := p.Run()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil // stopped by a signal: an ordinary end
	}
	return err
}
