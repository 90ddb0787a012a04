package lab

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// InNetns runs fn on a thread inside the network namespace at path (such as
// /run/netns/NAME) and returns its error; an empty path runs fn in the
// caller's namespace. Sockets fn opens stay in that namespace whichever
// thread uses them later, and a process fn starts is born in it.
//
// The thread enters the namespace and never leaves: its goroutine ends
// still locked, so the Go runtime ends the thread rather than hand it to
// another goroutine, and nothing else in the process runs in the namespace
// by accident.
func InNetns(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked; see above
		f, err := os.Open(path)
		if err != nil {
			done <- fmt.Errorf("open network namespace: %w", err)
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("enter network namespace %s: %w", path, err)
			return
		}
		done <- fn()
	}()
	return <-done
}
