// Package labtest runs tests against a lab: a layer-2 segment of network
// namespaces built by package lab.
//
// New builds a lab for one test and removes it when the test ends. Start runs
// a program (vip, arping, ndisc6) inside a host and collects its output line
// by line; Capture runs tcpdump inside a host and decodes what it saw with
// gopacket. DialIn lets the test process, which lives in the root network
// namespace, open TCP connections from inside a host; Isolate cuts hosts off
// from one another on the bridge, as a partition would. Eventually polls a
// condition against a deadline, so tests wait for what they expect instead of
// sleeping.
//
// The helpers, and etcdlab's, take a TB: the few methods of a test they call,
// which *testing.T has, and so has vipbench's driver, which runs them
// outside a test.
//
// Tests that need a lab skip themselves when not run as root or when a tool is
// missing, saying why; with CI=true in the environment they fail instead, so a
// CI machine that cannot run them does not pass quietly. In short mode (go test
// -short, make unit) they skip, CI=true or not (SkipShort): the unit loop
// asks for no lab.
package labtest
