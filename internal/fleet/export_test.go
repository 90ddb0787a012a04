package fleet

// Crash stops the member as kill -9 would: no release, no revoke, so its
// lease runs out in the store.
func (m *Member) Crash() {
	m.halt()
}
