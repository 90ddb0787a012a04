// Package hostnet reads the running host's interfaces and connected routes
// through rtnetlink, as the netcheck.System that validation asks. It is apart
// from netcheck so that the checks themselves, and the clients that use
// them (the live view, the API's syntax checks), link no netlink code.
package hostnet
