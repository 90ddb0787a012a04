package api_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/vipctl/vip/internal/api"
)

// stdDecode is what the client did before DecodeStatus: encoding/json's
// Decoder reading the first value.
func stdDecode(b []byte) (api.StatusResponse, error) {
	var st api.StatusResponse
	err := json.NewDecoder(bytes.NewReader(b)).Decode(&st)
	return st, err
}

// checkDecode holds DecodeStatus to encoding/json for b.
func checkDecode(t *testing.T, b []byte) {
	t.Helper()
	want, werr := stdDecode(b)
	got, err := api.DecodeStatus(b)
	if (err != nil) != (werr != nil) {
		t.Fatalf("%q: got error %v, encoding/json's %v", b, err, werr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\ngot  %+v\nwant %+v (encoding/json)", b, got, want)
	}
}

func TestDecodeStatus(t *testing.T) {
	varied := variedStatus()
	ascii := variedStatus()
	ascii.Claims[2].Interface = "eth1" // no escapes, nothing beyond ASCII
	ascii.Captures[1].Error = "capture eth1: permission denied"
	ascii.Agent = api.Agent{PID: -1, Version: "dev", Started: varied.Agent.Started, Socket: "/run/vip/vip.sock"}
	tests := []struct {
		name string
		st   api.StatusResponse
		fast bool // read directly, not by encoding/json
	}{
		{"plain ASCII", ascii, true},
		{"no claims", api.StatusResponse{Agent: ascii.Agent, Claims: []api.Claim{}}, true},
		{"nil claims", api.StatusResponse{Agent: ascii.Agent}, true},
		{"empty captures", api.StatusResponse{Agent: ascii.Agent, Claims: ascii.Claims[:1], Captures: []api.CaptureStat{}}, true},
		{"escapes and UTF-8", varied, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := api.AppendStatus(nil, &tt.st, false)
			if err != nil {
				t.Fatal(err)
			}
			checkDecode(t, b)
			if _, ok := api.DecodeStatusFast(b); ok != tt.fast {
				t.Errorf("read directly: got %v, want %v", ok, tt.fast)
			}
		})
	}
	// What encoding/json reads alike, or refuses alike, however it is
	// written.
	for _, b := range []string{
		``, `null`, `{}`, `[]`, `{"agent":{"pid":1}}`, `{"claims":[{"addr":"x"}]} trailing`,
		`{"agent":{"pid":01,"version":"","started":"2026-11-30T01:00:00Z","socket":"","state_file":"","autostarted":false},"claims":[]}`,
		`{"agent":{"pid":1.5,"version":"","started":"2026-11-30T01:00:00Z","socket":"","state_file":"","autostarted":false},"claims":[]}`,
		`{"agent":{"pid":1,"version":"","started":"yesterday","socket":"","state_file":"","autostarted":false},"claims":[]}`,
		`{"agent":{"pid":1,"version":"","started":"2026-11-30T01:00:00Z","socket":"","state_file":"","autostarted":false},"claims":[]}` + "\n{}",
		`{"agent":{"pid":1,"version":"","started":"2026-11-30T01:00:00Z","socket":"","state_file":"","autostarted":false},"claims":[],"captures":null}`,
	} {
		checkDecode(t, []byte(b))
	}
}

// FuzzDecodeStatus holds DecodeStatus to encoding/json for any bytes.
func FuzzDecodeStatus(f *testing.F) {
	st := variedStatus()
	for _, s := range []api.StatusResponse{st, {Agent: st.Agent, Claims: st.Claims[:1]}, {}} {
		b, err := api.AppendStatus(nil, &s, false)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"agent":{"pid":1,"version":"","started":"2026-11-30T01:00:00Z","socket":"","state_file":"","autostarted":false},"claims":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecode(t, b)
	})
}
