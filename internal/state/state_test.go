package state

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vipctl/vip/announce"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var (
	claimedAt   = time.Date(2025, 3, 4, 5, 6, 7, 890000000, time.UTC)
	refreshedAt = claimedAt.Add(90 * time.Second)
)

// claim returns a claim of addr on eth0 with fixed times.
func claim(addr string) announce.Claim {
	return announce.Claim{
		Addr:        netip.MustParseAddr(addr),
		Interface:   "eth0",
		ClaimedAt:   claimedAt,
		RefreshedAt: refreshedAt,
	}
}

// sample is a small book with every field of a claim set somewhere.
func sample() []announce.Claim {
	a := claim("192.0.2.10")
	b := claim("2001:db8::10")
	b.Interface = "eth1"
	b.Options = announce.ClaimOptions{
		Window:       5 * time.Second,
		Interval:     1100 * time.Millisecond,
		Frames:       announce.FrameNA | announce.FrameNARouters,
		RefreshEvery: time.Minute,
		Assign:       true,
	}
	b.AddedAddress = true
	c := claim("198.51.100.7")
	c.Options.Assign = true // asked for, but the address was there already
	return []announce.Claim{a, b, c}
}

// sorted returns claims ordered by address, as List returns them, the last
// of two claims of one address counting.
func sorted(claims ...announce.Claim) []announce.Claim {
	book := merge(nil, mustEntries(claims))
	out := make([]announce.Claim, len(book))
	for i, e := range book {
		out[i] = e.claim
	}
	return out
}

func mustEntries(claims []announce.Claim) []entry {
	book, err := entries(claims)
	if err != nil {
		panic(err)
	}
	return book
}

// many returns n claims of distinct documentation addresses: first the
// hosts of 192.0.2.0/24, 198.51.100.0/24 and 203.0.113.0/24 (762 of them),
// then 2001:db8::1:1 upwards.
func many(n int) []announce.Claim {
	var pool []netip.Addr
	for _, p := range []string{"192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"} {
		for a := netip.MustParsePrefix(p).Addr().Next(); a.As4()[3] != 255; a = a.Next() {
			pool = append(pool, a)
		}
	}
	out := make([]announce.Claim, n)
	a6 := netip.MustParseAddr("2001:db8::1:0")
	for i := range out {
		var a netip.Addr
		if i < len(pool) {
			a = pool[i]
		} else {
			a6 = a6.Next()
			a = a6
		}
		out[i] = claim(a.String())
		out[i].Options.Assign = i%2 == 0
	}
	return out
}

func open(t testing.TB, path string) *File {
	t.Helper()
	f, err := Open(path, nil)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	return f
}

func list(t testing.TB, f *File) []announce.Claim {
	t.Helper()
	got, err := f.List(context.Background())
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	return got
}

func addrs(claims []announce.Claim) []string {
	out := make([]string, len(claims))
	for i, c := range claims {
		out[i] = c.Addr.String()
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")

	f := open(t, path)
	if r := f.Recovery(); r != nil {
		t.Fatalf("open of a missing file: got recovery %v, want none", r)
	}
	if got := list(t, f); len(got) != 0 {
		t.Fatalf("missing file: got %d claims, want an empty book", len(got))
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open wrote the file before any change: stat err %v", err)
	}
	if got := f.Path(); got != path {
		t.Errorf("Path: got %q, want %q", got, path)
	}

	if err := f.Put(ctx, sample()...); err != nil {
		t.Fatalf("put: %v", err)
	}
	want := sorted(sample()...)
	if got := list(t, f); !reflect.DeepEqual(got, want) {
		t.Fatalf("list after put:\n got %+v\nwant %+v", got, want)
	}
	if got := list(t, open(t, path)); !reflect.DeepEqual(got, want) {
		t.Fatalf("list after reopen:\n got %+v\nwant %+v", got, want)
	}

	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != 0o600 {
		t.Errorf("file mode: got %v, want 0600", got)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory after writes: got %v, want only state.json (no temporary files left)", names)
	}

	if err := f.Delete(ctx, netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.99")); err != nil {
		t.Fatalf("delete: %v", err)
	}
	want = want[1:] // 192.0.2.10 sorts first
	for _, g := range [][]announce.Claim{list(t, f), list(t, open(t, path))} {
		if !reflect.DeepEqual(g, want) {
			t.Fatalf("after delete:\n got %+v\nwant %+v", g, want)
		}
	}
}

// TestOldOptionsUpgrade: a file of an earlier vip, which wrote a single
// round as a window of 1 ns and probes off as a negative period, reads as
// those options said plainly.
func TestOldOptionsUpgrade(t *testing.T) {
	old := []byte(`{"version":1,"claims":[
{"addr":"192.0.2.10","interface":"eth0","claimed_at":"2025-03-04T05:06:07.89Z","refreshed_at":"2025-03-04T05:07:37.89Z","options":{"window":1,"probe_every":-1}}
]}`)
	claims, dropped, problem := decode(old)
	if problem != nil || dropped != 0 || len(claims) != 1 {
		t.Fatalf("decode: got %+v, dropped %d, %v", claims, dropped, problem)
	}
	want := announce.ClaimOptions{SingleRound: true, ProbesOff: true}
	if got := claims[0].Options; got != want {
		t.Errorf("got options %+v, want %+v", got, want)
	}
	// Written again, they stay as they are said now.
	again, _, problem := decode(encode(mustEntries(claims)))
	if problem != nil || len(again) != 1 || again[0].Options != want {
		t.Errorf("written and read again: got %+v, %v; want options %+v", again, problem, want)
	}
}

func TestGolden(t *testing.T) {
	golden := filepath.Join("testdata", "v1.json")
	got := encode(mustEntries(sorted(sample()...)))
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("encoded book differs from %s (run with -update if the change is meant):\n got %s\nwant %s", golden, got, want)
	}
	// A file of this version written by an earlier vip must still read the
	// same.
	claims, dropped, problem := decode(want)
	if problem != nil || dropped != 0 || !reflect.DeepEqual(claims, sorted(sample()...)) {
		t.Errorf("decode %s: got %+v, dropped %d, problem %v; want the sample book", golden, claims, dropped, problem)
	}
}

func TestPut(t *testing.T) {
	ctx := context.Background()
	f := open(t, filepath.Join(t.TempDir(), "state.json"))
	if err := f.Put(ctx, claim("192.0.2.10"), claim("192.0.2.11")); err != nil {
		t.Fatal(err)
	}

	t.Run("refresh replaces", func(t *testing.T) {
		c := claim("192.0.2.10")
		c.RefreshedAt = refreshedAt.Add(time.Hour)
		if err := f.Put(ctx, c); err != nil {
			t.Fatal(err)
		}
		got := list(t, f)
		if len(got) != 2 || !got[0].RefreshedAt.Equal(c.RefreshedAt) {
			t.Errorf("got %+v, want 2 claims with 192.0.2.10 refreshed at %v", got, c.RefreshedAt)
		}
	})
	t.Run("last of a batch wins", func(t *testing.T) {
		first, last := claim("192.0.2.12"), claim("192.0.2.12")
		first.Interface, last.Interface = "eth1", "eth2"
		if err := f.Put(ctx, first, claim("192.0.2.13"), last); err != nil {
			t.Fatal(err)
		}
		got := list(t, f)
		if want := []string{"192.0.2.10", "192.0.2.11", "192.0.2.12", "192.0.2.13"}; !reflect.DeepEqual(addrs(got), want) {
			t.Fatalf("got %v, want %v", addrs(got), want)
		}
		if got[2].Interface != "eth2" {
			t.Errorf("192.0.2.12 put twice in one batch: got interface %s, want eth2 (the later one)", got[2].Interface)
		}
	})

	bad := []struct {
		name string
		c    announce.Claim
	}{
		{"no address", announce.Claim{Interface: "eth0"}},
		{"multicast", claim("224.0.0.1")},
		{"link-local", claim("fe80::1")},
		{"zone", announce.Claim{Addr: netip.MustParseAddr("2001:db8::1%eth0"), Interface: "eth0"}},
		{"no interface", announce.Claim{Addr: netip.MustParseAddr("192.0.2.20")}},
		{"interface name too long", announce.Claim{Addr: netip.MustParseAddr("192.0.2.20"), Interface: "abcdefghijklmnop"}},
		{"interface name with slash", announce.Claim{Addr: netip.MustParseAddr("192.0.2.20"), Interface: "eth0/1"}},
	}
	for _, tc := range bad {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			before := list(t, f)
			writes := f.writes
			if err := f.Put(ctx, claim("192.0.2.30"), tc.c); err == nil {
				t.Fatalf("put %+v: got no error, want one", tc.c)
			}
			if got := list(t, f); !reflect.DeepEqual(got, before) || f.writes != writes {
				t.Errorf("a refused batch changed the book: got %v (%d writes), want %v (%d writes)", addrs(got), f.writes, addrs(before), writes)
			}
		})
	}

	t.Run("cancelled context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := f.Put(cctx, claim("192.0.2.40")); !errors.Is(err, context.Canceled) {
			t.Errorf("put: got %v, want context.Canceled", err)
		}
		if err := f.Delete(cctx, netip.MustParseAddr("192.0.2.10")); !errors.Is(err, context.Canceled) {
			t.Errorf("delete: got %v, want context.Canceled", err)
		}
	})
}

func TestDeleteWritesOnlyOnChange(t *testing.T) {
	ctx := context.Background()
	f := open(t, filepath.Join(t.TempDir(), "state.json"))
	if err := f.Put(ctx, claim("192.0.2.10")); err != nil {
		t.Fatal(err)
	}
	writes := f.writes
	if err := f.Delete(ctx, netip.MustParseAddr("192.0.2.99")); err != nil {
		t.Fatalf("delete of an unknown address: got %v, want nil", err)
	}
	if err := f.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if f.writes != writes {
		t.Errorf("deletes that changed nothing wrote the file %d times, want 0", f.writes-writes)
	}
}

// TestBatchIsOneWrite shows that a batch of 10,000 claims is one file write,
// and, without the race detector, that it takes under 100 ms (about 30 ms
// on a 2-CPU VM; see BenchmarkPut10k).
func TestBatchIsOneWrite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.json")
	f := open(t, path)
	batch := many(10000)

	start := time.Now()
	if err := f.Put(ctx, batch...); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if f.writes != 1 {
		t.Errorf("put of %d claims: got %d file writes, want 1", len(batch), f.writes)
	}
	// The time is for reading, not asserting: BenchmarkPut10k measures it.
	t.Logf("put of %d claims took %v", len(batch), took)

	start = time.Now()
	if err := f.Delete(ctx, addrsOf(batch[:5000])...); err != nil {
		t.Fatal(err)
	}
	t.Logf("delete of 5000 of them took %v", time.Since(start))
	if f.writes != 2 {
		t.Errorf("delete of 5000 claims: got %d file writes in all, want 2", f.writes)
	}
	if got := len(list(t, open(t, path))); got != 5000 {
		t.Errorf("after reopen: got %d claims, want 5000", got)
	}
}

func addrsOf(claims []announce.Claim) []netip.Addr {
	out := make([]netip.Addr, len(claims))
	for i, c := range claims {
		out[i] = c.Addr
	}
	return out
}

func BenchmarkPut10k(b *testing.B) {
	ctx := context.Background()
	f := open(b, filepath.Join(b.TempDir(), "state.json"))
	batch := many(10000)
	b.ReportAllocs()
	for b.Loop() {
		if err := f.Put(ctx, batch...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRefreshOneOf10k is the cost of a refresh of one claim while
// 10,000 are held: the whole book is written again.
func BenchmarkRefreshOneOf10k(b *testing.B) {
	ctx := context.Background()
	f := open(b, filepath.Join(b.TempDir(), "state.json"))
	batch := many(10000)
	if err := f.Put(ctx, batch...); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := f.Put(ctx, batch[1234]); err != nil {
			b.Fatal(err)
		}
	}
}

// goodFile is a valid version 1 file of the sample claims.
func goodFile(t *testing.T) []byte {
	t.Helper()
	return encode(mustEntries(sorted(sample()...)))
}

func TestOpenRecovers(t *testing.T) {
	all := addrs(sorted(sample()...)) // 192.0.2.10 198.51.100.7 2001:db8::10
	tests := []struct {
		name        string
		data        func(t *testing.T) []byte
		wantKept    []string
		wantDropped int
		wantProblem string
	}{{
		name:        "garbage",
		data:        func(*testing.T) []byte { return []byte("\x00\x17garbage\xff") },
		wantProblem: "not a state file",
	}, {
		name:        "empty file",
		data:        func(*testing.T) []byte { return nil },
		wantProblem: "cut short",
	}, {
		name: "truncated half-way",
		data: func(t *testing.T) []byte {
			good := goodFile(t)
			// Cut inside the third claim: the first two are whole.
			cut := bytes.Index(good, []byte(`"2001:db8::10"`))
			return good[:cut]
		},
		wantKept:    all[:2],
		wantProblem: "after 2 claims: cut short",
	}, {
		name: "truncated after a whole claim",
		data: func(t *testing.T) []byte {
			good := goodFile(t)
			return good[:bytes.Index(good, []byte(`{"addr":"198.51.100.7"`))]
		},
		wantKept:    all[:1],
		wantProblem: "after 1 claims",
	}, {
		name: "one bad address among good entries",
		data: func(t *testing.T) []byte {
			return bytes.Replace(goodFile(t), []byte(`"198.51.100.7"`), []byte(`"198.51.100.300"`), 1)
		},
		wantKept:    []string{all[0], all[2]},
		wantDropped: 1,
		wantProblem: "claim 2",
	}, {
		name: "unclaimable and empty addresses",
		data: func(t *testing.T) []byte {
			d := bytes.Replace(goodFile(t), []byte(`"198.51.100.7"`), []byte(`"224.0.0.5"`), 1)
			return bytes.Replace(d, []byte(`"2001:db8::10"`), []byte(`""`), 1)
		},
		wantKept:    all[:1],
		wantDropped: 2,
		wantProblem: "multicast",
	}, {
		name: "entry of the wrong shape",
		data: func(t *testing.T) []byte {
			return bytes.Replace(goodFile(t), []byte(`"claims":[`), []byte(`"claims":[42,["x"],{"addr":"192.0.2.77","interface":"eth0","claimed_at":"yesterday"},`), 1)
		},
		wantKept:    all,
		wantDropped: 3,
		wantProblem: "claim 1",
	}, {
		name: "address twice",
		data: func(t *testing.T) []byte {
			return bytes.Replace(goodFile(t), []byte(`"198.51.100.7"`), []byte(`"192.0.2.10"`), 1)
		},
		wantKept:    []string{all[0], all[2]},
		wantDropped: 1,
		wantProblem: "recorded twice",
	}, {
		name: "other version",
		data: func(t *testing.T) []byte {
			return bytes.Replace(goodFile(t), []byte(`"version":1`), []byte(`"version":2`), 1)
		},
		wantDropped: 3,
		wantProblem: "format version 2",
	}, {
		name: "no version",
		data: func(t *testing.T) []byte {
			return bytes.Replace(goodFile(t), []byte(`"version":1,`), nil, 1)
		},
		wantDropped: 3,
		wantProblem: "no format version",
	}, {
		name:        "data after the end",
		data:        func(t *testing.T) []byte { return append(goodFile(t), "}}"...) },
		wantKept:    all,
		wantProblem: "data after the end",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "state.json")
			damaged := tc.data(t)
			if err := os.WriteFile(path, damaged, 0o600); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			f, err := Open(path, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatalf("open: got error %v, want the file recovered", err)
			}
			if got := addrs(list(t, f)); !reflect.DeepEqual(got, tc.wantKept) && len(got)+len(tc.wantKept) > 0 {
				t.Errorf("kept claims: got %v, want %v", got, tc.wantKept)
			}

			r := f.Recovery()
			if r == nil {
				t.Fatal("Recovery: got nil, want a report of the damaged file")
			}
			if r.Kept != len(tc.wantKept) || r.Dropped != tc.wantDropped {
				t.Errorf("Recovery: got kept %d, dropped %d; want kept %d, dropped %d", r.Kept, r.Dropped, len(tc.wantKept), tc.wantDropped)
			}
			if r.Problem == nil || !strings.Contains(r.Problem.Error(), tc.wantProblem) {
				t.Errorf("Recovery.Problem: got %v, want it to mention %q", r.Problem, tc.wantProblem)
			}
			if r.SaveErr != nil {
				t.Errorf("Recovery.SaveErr: got %v, want nil", r.SaveErr)
			}
			if !strings.HasPrefix(r.Moved, path+".corrupt-") {
				t.Fatalf("Recovery.Moved: got %q, want %s.corrupt-<time>", r.Moved, path)
			}
			moved, err := os.ReadFile(r.Moved)
			if err != nil || !bytes.Equal(moved, damaged) {
				t.Errorf("moved file %s: got %q (err %v), want the damaged file unchanged", r.Moved, moved, err)
			}
			if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), r.Moved) {
				t.Errorf("log: got %q, want a warning naming %s", logs.String(), r.Moved)
			}
			var asErr *Recovery
			if !errors.As(error(r), &asErr) || !strings.Contains(r.Error(), r.Moved) {
				t.Errorf("Recovery as an error: got %q, want it to name %s", r.Error(), r.Moved)
			}

			// What was kept is on disk already: a crash now loses nothing
			// more, and the next agent finds a clean file.
			again := open(t, path)
			if again.Recovery() != nil {
				t.Errorf("second open: got recovery %v, want a clean file", again.Recovery())
			}
			if got, want := list(t, again), list(t, f); !reflect.DeepEqual(got, want) {
				t.Errorf("second open: got %v, want %v", addrs(got), addrs(want))
			}
		})
	}
}

func TestOpenMovesAsideWithoutOverwriting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var moved []string
	for i := range 2 {
		if err := os.WriteFile(path, []byte(fmt.Sprint("garbage ", i)), 0o600); err != nil {
			t.Fatal(err)
		}
		f := &File{path: path, log: slog.New(slog.DiscardHandler)}
		f.recover(0, errors.New("test"), now) // the same time both times
		if f.recovery.SaveErr != nil {
			t.Fatal(f.recovery.SaveErr)
		}
		moved = append(moved, f.recovery.Moved)
	}
	if moved[0] == moved[1] {
		t.Fatalf("two recoveries at the same time moved both files to %s", moved[0])
	}
	for i, m := range moved {
		if got, _ := os.ReadFile(m); string(got) != fmt.Sprint("garbage ", i) {
			t.Errorf("%s: got %q, want %q", m, got, fmt.Sprint("garbage ", i))
		}
	}
}

func TestOpenUnreadable(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(dir, nil); err == nil {
		t.Errorf("open of a directory: got no error, want one")
	}
}

// TestUnwritableDirectory checks that a write that fails says where and why,
// and changes nothing in memory. Root can write to a mode 0500 directory, so
// the test puts a regular file where the directory should be instead.
func TestUnwritableDirectory(t *testing.T) {
	ctx := context.Background()

	t.Run("parent is a regular file", func(t *testing.T) {
		parent := filepath.Join(t.TempDir(), "run")
		if err := os.WriteFile(parent, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(parent, "state.json")
		f := open(t, path) // nothing can be there: an empty book
		err := f.Put(ctx, claim("192.0.2.10"))
		checkWriteErr(t, err, path, parent)
		if got := list(t, f); len(got) != 0 {
			t.Errorf("after a failed put: got %v, want the book unchanged (empty)", addrs(got))
		}
	})

	t.Run("directory replaced after open", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "run")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "state.json")
		f := open(t, path)
		if err := f.Put(ctx, claim("192.0.2.10"), claim("192.0.2.11")); err != nil {
			t.Fatal(err)
		}
		before := list(t, f)
		if err := os.Rename(dir, dir+".away"); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir, nil, 0o600); err != nil {
			t.Fatal(err)
		}

		checkWriteErr(t, f.Put(ctx, claim("192.0.2.12")), path, dir)
		checkWriteErr(t, f.Delete(ctx, netip.MustParseAddr("192.0.2.10")), path, dir)
		if got := list(t, f); !reflect.DeepEqual(got, before) {
			t.Errorf("after failed writes: got %v, want the book unchanged %v", addrs(got), addrs(before))
		}
		if err := f.Remove(); err == nil {
			t.Errorf("remove while claims are recorded: got no error, want one")
		}
	})
}

func checkWriteErr(t *testing.T, err error, path, dir string) {
	t.Helper()
	if err == nil {
		t.Fatalf("write to %s: got no error, want one", path)
	}
	if !errors.Is(err, syscall.ENOTDIR) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "directory "+dir) {
		t.Errorf("write to %s: got %q, want an error naming the state file, the directory %s and ENOTDIR", path, err, dir)
	}
}

func TestRemove(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.json")
	f := open(t, path)
	if err := f.Remove(); err != nil {
		t.Fatalf("remove with no file: got %v, want nil", err)
	}
	if err := f.Put(ctx, claim("192.0.2.10")); err != nil {
		t.Fatal(err)
	}
	if err := f.Remove(); err == nil || !strings.Contains(err.Error(), "1 claims") {
		t.Errorf("remove while holding a claim: got %v, want a refusal", err)
	}
	if err := f.Delete(ctx, netip.MustParseAddr("192.0.2.10")); err != nil {
		t.Fatal(err)
	}
	if err := f.Remove(); err != nil {
		t.Fatalf("remove of an empty book: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after remove: stat got %v, want the file gone", err)
	}
}

// TestConcurrent runs Put, Delete and List from many goroutines; run it with
// -race. In the end the file holds exactly what memory holds.
func TestConcurrent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.json")
	f := open(t, path)
	const workers, rounds = 8, 20
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				a := netip.AddrFrom4([4]byte{192, 0, 2, byte(w*rounds + r + 1)})
				c := claim(a.String())
				if err := f.Put(ctx, c); err != nil {
					t.Error(err)
					return
				}
				if _, err := f.List(ctx); err != nil {
					t.Error(err)
					return
				}
				if r%2 == 1 {
					if err := f.Delete(ctx, a); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	got := list(t, f)
	if len(got) != workers*rounds/2 {
		t.Errorf("got %d claims, want %d", len(got), workers*rounds/2)
	}
	if onDisk := list(t, open(t, path)); !reflect.DeepEqual(onDisk, got) {
		t.Errorf("file and memory differ: file %v, memory %v", addrs(onDisk), addrs(got))
	}
}

// TestPutUnsyncedThenSync: a claim recorded unsynced is in the file at
// once, whole, for an agent that opens it after this process dies; Sync
// then syncs it once, and a sync with nothing new does nothing. A synced
// write (Delete) leaves nothing to sync.
func TestPutUnsyncedThenSync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	f := open(t, path)
	ctx := context.Background()
	c := claim("192.0.2.10")
	if err := f.PutUnsynced(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got := addrs(list(t, open(t, path))); !slices.Equal(got, []string{"192.0.2.10"}) {
		t.Fatalf("a new agent reads %v from the file, want the unsynced claim", got)
	}
	f.writeMu.Lock()
	unsynced := f.unsynced
	f.writeMu.Unlock()
	if !unsynced {
		t.Fatal("PutUnsynced left nothing to sync")
	}
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if f.unsynced {
		t.Error("Sync left the file unsynced")
	}
	if err := f.PutUnsynced(ctx, claim("192.0.2.11")); err != nil {
		t.Fatal(err)
	}
	if err := f.Delete(ctx, c.Addr); err != nil {
		t.Fatal(err)
	}
	if f.unsynced {
		t.Error("a synced write after an unsynced one left the file unsynced")
	}
	if got := addrs(list(t, open(t, path))); !slices.Equal(got, []string{"192.0.2.11"}) {
		t.Fatalf("a new agent reads %v, want the claim left", got)
	}
}
