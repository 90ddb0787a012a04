package agent

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/api"
)

// TestEventIsTheEngines: the agent streams the engine's events as JSON,
// and clients read them as api.Event, a type of their own: the two must
// name the same fields the same way.
func TestEventIsTheEngines(t *testing.T) {
	sent := announce.Event{
		Time: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), Kind: announce.EventBurstEnd, Addr: netip.MustParseAddr("2001:db8::10"),
		Interface: "eth0", MAC: "02:00:00:00:00:02", State: "holding", Rounds: 5, Frames: 5, Count: 2, Message: "done",
	}
	b, err := json.Marshal(sent)
	if err != nil {
		t.Fatal(err)
	}
	var got api.Event
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(got)
	if string(again) != string(b) {
		t.Errorf("api.Event does not carry announce.Event:\nsent %s\ngot  %s", b, again)
	}
	if n, m := reflect.TypeOf(sent).NumField(), reflect.TypeOf(got).NumField(); n != m {
		t.Errorf("announce.Event has %d fields, api.Event %d: add the new one to both", n, m)
	}
}
