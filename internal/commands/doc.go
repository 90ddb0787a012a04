// Package commands holds vip's cobra commands. Each command has an options struct
// and a constructor that takes the shared dependencies and a run function, so
// flag parsing is tested apart from running; Main maps errors to exit codes
// in one place.
package commands
