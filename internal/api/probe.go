package api

// ProbeResponse is what vip probe --json prints (see the package comment).
type ProbeResponse struct {
	Results []ProbeResult `json:"results"`
}

// ProbeResult lists who answered for one address: empty, never null, when
// no one did.
type ProbeResult struct {
	Addr      string    `json:"addr"`
	Interface string    `json:"interface"`
	Claimers  []Claimer `json:"claimers"`
}
