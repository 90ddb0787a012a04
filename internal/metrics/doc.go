// Package metrics serves what the agent does as Prometheus metrics, for
// `vip agent --metrics HOST:PORT` and `vip claim --foreground --metrics`.
//
// A Collector reads the claim engine (announce.Engine's Status and Totals)
// and the sniffer's captures when it is scraped and keeps nothing of its own,
// so a scrape always shows the state of that moment and costs nothing
// between scrapes. Agent-wide counters (vip_requests_answered_total, ...)
// are the engine's totals and only grow; per-address series
// (vip_claim_*) exist for at most Config.MaxAddrs held addresses, the
// lowest first, so that a claim of 10,000 addresses cannot make 40,000
// series; vip_claims_without_series says how many were left out. Listen
// serves them over HTTP with promhttp.
package metrics
