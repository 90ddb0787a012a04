package api

// DecodeStatusFast is the direct way of DecodeStatus, for tests that check
// it is taken.
var DecodeStatusFast = decodeStatusFast
