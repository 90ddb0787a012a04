package main

import (
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
)

// profileFleet starts the agents' CPU profile into dir/cpu.pprof, if dir
// is set, and returns what ends it and writes their heap to
// dir/heap.pprof (once; nothing without a dir).
func profileFleet(dir string, logf func(string, ...any)) func() {
	if dir == "" {
		return func() {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		logf("  profile: %v", err)
		return func() {}
	}
	cpu, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err == nil {
		err = pprof.StartCPUProfile(cpu)
	}
	if err != nil {
		logf("  profile: %v", err)
		return func() {}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			cpu.Close()
			heap, err := os.Create(filepath.Join(dir, "heap.pprof"))
			if err == nil {
				err = pprof.WriteHeapProfile(heap)
				heap.Close()
			}
			if err != nil {
				logf("  profile: %v", err)
				return
			}
			logf("  profiles of the agents in %s", dir)
		})
	}
}
