// Package netcheck validates what an operator asks vip to claim: the
// addresses and the interfaces. It is shared by the command line and, later,
// the agent's control API, so both refuse bad input with the same sentence.
//
// Errors about the input (as opposed to failures of the system) satisfy
// errors.Is(err, ErrInvalid); their text is one sentence that says what is
// wrong and how to fix it.
package netcheck
