package sniff

import (
	"net/netip"

	"golang.org/x/net/bpf"
)

// ScopeProgram is scopeProgram over raw instructions, for the tests.
func ScopeProgram(addrs []netip.Addr, next []bpf.RawInstruction) ([]bpf.RawInstruction, error) {
	in := make([]bpf.Instruction, len(next))
	for i, r := range next {
		in[i] = r
	}
	prog, err := scopeProgram(Scope{Addrs: addrs}, in)
	if err != nil {
		return nil, err
	}
	return bpf.Assemble(prog)
}

// ScopeProgramOf is scopeProgram of a whole Scope over raw instructions.
func ScopeProgramOf(sc Scope, next []bpf.RawInstruction) ([]bpf.RawInstruction, error) {
	in := make([]bpf.Instruction, len(next))
	for i, r := range next {
		in[i] = r
	}
	prog, err := scopeProgram(sc, in)
	if err != nil {
		return nil, err
	}
	return bpf.Assemble(prog)
}

// BaseProgram is baseProgram assembled, for the tests.
func BaseProgram(snaplen uint32) ([]bpf.RawInstruction, error) {
	prog, err := baseProgram(snaplen)
	if err != nil {
		return nil, err
	}
	return bpf.Assemble(prog)
}
