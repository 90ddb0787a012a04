package bpfresp

// The program is compiled for little-endian machines (x86-64, arm64) only;
// TestGeneratedFresh fails when the committed object is not what these
// sources compile to.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -target bpfel -cc clang -cflags "-O2 -Wall -Werror" responder responder.c
