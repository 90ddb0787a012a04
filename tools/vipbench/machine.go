package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// machine describes where and on what the benchmarks ran.
type machine struct {
	CPU    string
	Cores  int
	Kernel string
	Go     string
	Date   time.Time
	// Source says which code was measured: the commit and what the working
	// tree changed in the packages the measurements depend on.
	Source string
}

func (m machine) String() string {
	return fmt.Sprintf("%s, %d cores, Linux %s, %s, %s", m.CPU, m.Cores, m.Kernel, m.Go, m.Date.UTC().Format("2006-01-02 15:04 MST"))
}

func describeMachine(ctx context.Context, goTool string) machine {
	m := machine{CPU: "unknown CPU", Cores: runtime.NumCPU(), Kernel: "unknown", Go: runtime.Version(), Date: time.Now()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPU = cpuModel(b)
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	// The vip binary is built by the go on PATH, which may not be the one
	// that built this driver.
	if out, err := exec.CommandContext(ctx, goTool, "env", "GOVERSION").Output(); err == nil {
		if v := strings.TrimSpace(string(out)); v != "" {
			m.Go = v
		}
	}
	m.Source = sourceState(ctx)
	return m
}

// cpuModel returns the first "model name" of /proc/cpuinfo (arm64 kernels
// have none; then the first "CPU part" or "Hardware").
func cpuModel(cpuinfo []byte) string {
	fallback := "unknown CPU"
	sc := bufio.NewScanner(bytes.NewReader(cpuinfo))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "model name":
			return v
		case "Hardware", "CPU part":
			if fallback == "unknown CPU" {
				fallback = k + " " + v
			}
		}
	}
	return fallback
}

// sourceState returns the commit and the uncommitted changes to the code
// the numbers depend on, so that a reader can tell which version of the
// answer path was measured.
func sourceState(ctx context.Context) string {
	head, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "not a git checkout"
	}
	s := "commit " + strings.TrimSpace(string(head))
	out, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--", "announce", "sniff", "internal", "cmd/vip").Output()
	if err != nil {
		return s
	}
	var changed []string
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if len(line) > 3 && !strings.HasSuffix(line, "_test.go") {
			changed = append(changed, strings.TrimSpace(line[3:]))
		}
	}
	if len(changed) == 0 {
		return s + ", no uncommitted changes to non-test code"
	}
	return s + " with uncommitted changes to " + strings.Join(changed, ", ")
}
