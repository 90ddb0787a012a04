package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// labTB lets the driver use the lab helpers written for tests (etcdlab
// runs etcd in a lab host: its flags, its health check, its clean-up),
// rather than keep a second way of running etcd here. Those helpers take a
// testing.TB and end a failed test with Fatalf. labTB gives them one: Do
// runs a helper on a goroutine of its own, as the testing package runs a
// test, so that Fatalf (runtime.Goexit) ends that goroutine alone and Do
// returns the failure as an error; Cleanup's functions run, last first, in
// Close.
//
// The embedded testing.TB is nil: it only makes labTB a testing.TB (the
// interface has unexported methods). Every method the lab helpers call is
// defined below; Attr, ArtifactDir, Setenv and Chdir, which they never
// call, would fault, and say so.
type labTB struct {
	testing.TB

	log func(format string, args ...any)
	ctx context.Context

	mu       sync.Mutex
	failed   bool
	skipped  bool
	msgs     []string
	cleanups []func()
	dirs     int
}

func newLabTB(ctx context.Context, log func(format string, args ...any)) *labTB {
	return &labTB{ctx: ctx, log: log}
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

func (t *labTB) Error(args ...any) { t.record(true, false, fmt.Sprint(args...)) }
func (t *labTB) Errorf(format string, args ...any) {
	t.record(true, false, fmt.Sprintf(format, args...))
}
func (t *labTB) Fail()                             { t.record(true, false, "") }
func (t *labTB) FailNow()                          { t.Fail(); runtime.Goexit() }
func (t *labTB) Fatal(args ...any)                 { t.Error(args...); runtime.Goexit() }
func (t *labTB) Fatalf(format string, args ...any) { t.Errorf(format, args...); runtime.Goexit() }
func (t *labTB) Skip(args ...any)                  { t.record(false, true, fmt.Sprint(args...)); runtime.Goexit() }
func (t *labTB) SkipNow()                          { t.Skip() }
func (t *labTB) Skipf(format string, args ...any)  { t.Skip(fmt.Sprintf(format, args...)) }
func (t *labTB) Helper()                           {}
func (t *labTB) Log(args ...any)                   { t.log("%s", fmt.Sprint(args...)) }
func (t *labTB) Logf(format string, args ...any)   { t.log(format, args...) }
func (t *labTB) Name() string                      { return "vipbench" }
func (t *labTB) Context() context.Context          { return t.ctx }
func (t *labTB) Output() io.Writer                 { return io.Discard }

func (t *labTB) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

func (t *labTB) Skipped() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.skipped
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
