package api

// ProbeResponse is what vip probe --json prints (see the package comment).
type ProbeResponse struct {
	// Expect is whom vip probe --expect asked for, a node or a MAC; empty
	// without --expect.
	Expect  string        `json:"expect,omitempty"`
	Results []ProbeResult `json:"results"`
}

// ProbeResult lists who answered for one address: empty, never null, when
// no one did.
type ProbeResult struct {
	Addr      string    `json:"addr"`
	Interface string    `json:"interface"`
	Claimers  []Claimer `json:"claimers"`
	// AsExpected, with --expect, says whether exactly the expected owner
	// answered; Verdict says so in a sentence, naming who did answer.
	AsExpected *bool  `json:"as_expected,omitempty"`
	Verdict    string `json:"verdict,omitempty"`
}
