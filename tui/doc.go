// Package tui is vip's full-screen view: a bubbletea program that watches
// an agent and steers its claims from the keyboard.
//
// The program is a client of the agent through Backend (ClientBackend adapts
// an *api.Client), so its model is tested against a fake. Model holds the
// latest snapshot of the agent (its claims with their competing claimers,
// the who-has traffic) polled on a tick, and a bounded log of the events the
// agent streams. Events arrive through a command that waits on a channel fed
// by one pump goroutine per connection, and is re-armed after each message.
//
// Messages only mark the view dirty; a 100 ms render tick turns a dirty
// model into a frame, so however fast events come the screen is drawn at
// most ten times a second. Keys and resizes draw at once, since they come at
// the operator's pace. When the agent stops answering, the view says so and
// reconnects with backoff, subscribing to events again once it answers,
// from the events the agent kept since the stream ended.
//
// The parts: backend.go (the agent as the model sees it), keys.go (the
// keymap that also feeds the help bar), styles.go (every style, from one
// lipgloss renderer so NO_COLOR and tests' ASCII profile apply), msgs.go
// (message types and the commands that produce them), eventlog.go (the
// bounded log), model.go (Update), actions.go (what keys do: prompts,
// claims, releases and refreshes), view.go (panes and layout) and run.go
// (the program).
package tui
