package batchio

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// TestCloseAllAtOnce: every close runs before any returns (each waits for
// all to have started), each error is returned, and CloseAll returns only
// once all have.
func TestCloseAllAtOnce(t *testing.T) {
	const n = 5
	var started sync.WaitGroup
	started.Add(n)
	all := make(chan struct{})
	go func() { started.Wait(); close(all) }()
	errA, errB := errors.New("a failed"), errors.New("b failed")
	var mu sync.Mutex
	returned := 0
	closes := make([]func() error, n)
	for i := range closes {
		closes[i] = func() error {
			started.Done()
			select {
			case <-all:
			case <-time.After(10 * time.Second):
				return errors.New("the other closes did not start while this one waited: run one after another")
			}
			mu.Lock()
			returned++
			mu.Unlock()
			switch i {
			case 1:
				return errA
			case 3:
				return errB
			}
			return nil
		}
	}
	err := CloseAll(closes...)
	if !errors.Is(err, errA) || !errors.Is(err, errB) {
		t.Errorf("CloseAll: %v, want both %v and %v", err, errA, errB)
	}
	if returned != n {
		t.Errorf("CloseAll returned after %d of %d closes, want all", returned, n)
	}
}

func TestCloseAllNone(t *testing.T) {
	if err := CloseAll(); err != nil {
		t.Errorf("CloseAll(): %v, want nil", err)
	}
}
