// Package setup holds no code. Its tests check the set-up path that the
// README's first commands take, by running the real Makefile where it can
// go wrong: on a machine without a C compiler, Go would quietly build vip
// without cgo, and so without its capture.
package setup
