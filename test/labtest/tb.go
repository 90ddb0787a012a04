package labtest

// TB is what the lab helpers of this package and of etcdlab ask of a test:
// *testing.T and testing.TB have it, and so has vipbench's driver, which runs
// the same helpers outside a test (so there is one way of running etcd in a
// lab). It holds only the methods the helpers call; a helper that needs
// another adds it here, and the driver must then give it too.
type TB interface {
	Helper()
	Cleanup(fn func())
	TempDir() string
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Failed() bool
	Fatalf(format string, args ...any)
	Skip(args ...any)
}
