package bpfresp

import (
	"errors"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// zeroBatch is how many addresses' counters zeroCounters writes in one
// batch: its zero values are a responderCounters for every possible CPU
// of each, which on a machine of 256 CPUs and 10,000 addresses at once
// would be 60 MB.
const zeroBatch = 1024

// zeroCounters puts zero counters for keys, zeroBatch at a time, and
// returns how many it put.
func (r *Responder) zeroCounters(keys []responderHeldKey) (int, error) {
	zero := make([]responderCounters, min(len(keys), zeroBatch)*r.cpus)
	done := 0
	for done < len(keys) {
		end := min(done+zeroBatch, len(keys))
		n, err := batchUpdate(r.maps.Counters, keys[done:end], zero[:(end-done)*r.cpus], r.cpus)
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// batchUpdate puts keys and their values in m, a batch at a time (per
// values for each key: a per-CPU map's CPUs), and returns how many it
// put. A kernel without batch updates gets them one by one. An update the
// kernel refuses for want of memory is tried again a little later (see
// update).
func batchUpdate[K, V any](m *ebpf.Map, keys []K, vals []V, per int) (int, error) {
	done := 0
	wait := 50 * time.Microsecond
	for done < len(keys) {
		n, err := m.BatchUpdate(keys[done:], vals[done*per:], nil)
		done += n
		switch {
		case err == nil:
			if n == 0 {
				return done, errors.New("the kernel updated none of a batch")
			}
		case errors.Is(err, ebpf.ErrNotSupported):
			for ; done < len(keys); done++ {
				var v any = vals[done*per : (done+1)*per]
				if per == 1 {
					v = vals[done]
				}
				if err := update(m, keys[done], v); err != nil {
					return done, err
				}
			}
		case errors.Is(err, unix.ENOMEM) && wait <= maxRefillWait:
			time.Sleep(wait) // the caches refill from an interrupt: nothing to wait on
			wait *= 4
			if n > 0 {
				wait = 50 * time.Microsecond // progress: a fresh budget of retries
			}
		default:
			return done, err
		}
	}
	return done, nil
}

// batchDelete deletes keys from m, a batch at a time, and returns how many
// of keys it went past: deleted, or not there.
func batchDelete[K any](m *ebpf.Map, keys []K) (int, error) {
	done := 0
	for done < len(keys) {
		n, err := m.BatchDelete(keys[done:], nil)
		done += n
		switch {
		case err == nil:
			if n == 0 {
				return done, errors.New("the kernel deleted none of a batch")
			}
		case errors.Is(err, ebpf.ErrKeyNotExist):
			done++ // the key at done is not there
		case errors.Is(err, ebpf.ErrNotSupported):
			for ; done < len(keys); done++ {
				if err := m.Delete(keys[done]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
					return done, err
				}
			}
		default:
			return done, err
		}
	}
	return done, nil
}

// maxRefillWait is the longest wait before the last try of an update the
// kernel refused for want of memory: the waits grow fourfold from 50 µs, so
// the tries span about 270 ms in all. 17 ms in all was not enough for CI's
// loaded machine, where a hold of two addresses failed so (TestSnapshot).
const maxRefillWait = 250 * time.Millisecond

// update puts k and v in m. The maps are not preallocated, and the
// kernel refills their per-CPU element caches asynchronously: thousands of
// updates in a row on a busy machine can find the cache empty (ENOMEM)
// before the refill ran, so an update that fails so is tried again a few
// times, a little later each time.
func update(m *ebpf.Map, k, v any) error {
	err := m.Update(k, v, ebpf.UpdateAny)
	for wait := 50 * time.Microsecond; errors.Is(err, unix.ENOMEM) && wait <= maxRefillWait; wait *= 4 {
		time.Sleep(wait) // the refill runs from an interrupt: nothing to wait on
		err = m.Update(k, v, ebpf.UpdateAny)
	}
	return err
}
