package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/vipctl/vip/test/labtest"
)

// labTB lets the driver use the lab helpers written for tests (etcdlab
// runs etcd in a lab host: its flags, its health check, its clean-up),
// rather than keep a second way of running etcd here. Those helpers take a
// labtest.TB and end a failed test with Fatalf. labTB gives them one: Do
// runs a helper on a goroutine of its own, as the testing package runs a
// test, so that Fatalf (runtime.Goexit) ends that goroutine alone and Do
// returns the failure as an error; Cleanup's functions run, last first, in
// Close.
type labTB struct {
	log func(format string, args ...any)

	mu       sync.Mutex
	failed   bool
	skipped  bool
	msgs     []string
	cleanups []func()
	dirs     int
}

var _ labtest.TB = (*labTB)(nil)

func newLabTB(log func(format string, args ...any)) *labTB {
	return &labTB{log: log}
}

// errLabSkipped marks a helper that skipped: a tool or privilege missing.
var errLabSkipped = errors.New("the lab helper skipped")

// Do runs fn as a test would run it and returns its failure, if any, as an
// error holding what it logged.
func (t *labTB) Do(fn func()) error {
	t.mu.Lock()
	t.failed, t.skipped, t.msgs = false, false, nil
	t.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	<-done
	t.mu.Lock()
	defer t.mu.Unlock()
	msg := strings.Join(t.msgs, "; ")
	switch {
	case t.skipped:
		return fmt.Errorf("%w: %s", errLabSkipped, msg)
	case t.failed:
		return errors.New(msg)
	}
	return nil
}

// Close runs the clean-up functions, last registered first, each as Do
// runs a helper, and logs those that fail.
func (t *labTB) Close() {
	t.mu.Lock()
	fns := slices.Clone(t.cleanups)
	t.cleanups = nil
	t.mu.Unlock()
	for _, fn := range slices.Backward(fns) {
		if err := t.Do(fn); err != nil {
			t.log("clean up the lab: %v", err)
		}
	}
}

func (t *labTB) record(failed, skipped bool, msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = t.failed || failed
	t.skipped = t.skipped || skipped
	if msg != "" {
		t.msgs = append(t.msgs, msg)
	}
}

func (t *labTB) Cleanup(fn func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, fn)
}

func (t *labTB) Errorf(format string, args ...any) {
	t.record(true, false, fmt.Sprintf(format, args...))
}
func (t *labTB) Fatalf(format string, args ...any) { t.Errorf(format, args...); runtime.Goexit() }
func (t *labTB) Skip(args ...any)                  { t.record(false, true, fmt.Sprint(args...)); runtime.Goexit() }
func (t *labTB) Helper()                           {}
func (t *labTB) Logf(format string, args ...any)   { t.log(format, args...) }

func (t *labTB) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

// TempDir returns a new directory, removed in Close.
func (t *labTB) TempDir() string {
	t.mu.Lock()
	t.dirs++
	n := t.dirs
	t.mu.Unlock()
	dir, err := os.MkdirTemp("", fmt.Sprintf("vipbench-tb%d-", n))
	if err != nil {
		t.Fatalf("make a temporary directory: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
