package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// vipBin is the vip binary the lab tests run, built once by TestMain.
var vipBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "vip-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "make a directory for the vip binary:", err)
		os.Exit(1)
	}
	// World-readable, so tests can run the binary as an unprivileged user.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	vipBin = filepath.Join(dir, "vip")
	build := exec.Command("go", "build", "-o", vipBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build vip:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
