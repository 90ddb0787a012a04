package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vipctl/vip/announce"
	"github.com/vipctl/vip/internal/netcheck"
)

// Version is the format version this package writes and reads. A file with
// another version is treated as damaged: its claims may mean something else.
const Version = 1

// File is an announce.Book kept in a JSON state file. It is safe for
// concurrent use.
//
// A change (Put, Delete) is applied in memory only after the new book is on
// disk; when writing fails, the change returns the error and the book stays
// as it was, in memory and on disk. List never waits for a write.
type File struct {
	path string
	log  *slog.Logger

	// writeMu serializes changes: each builds the next book from the
	// current one, writes it, and only then publishes it under mu.
	writeMu sync.Mutex
	writes  int // files written, for tests; guarded by writeMu
	// unsynced says the file at path was written by PutUnsynced and not
	// yet synced (Sync); guarded by writeMu.
	unsynced bool

	mu sync.Mutex
	// book is sorted by address with each address once. It is replaced on
	// every change, never modified in place, so a reader may keep it.
	book []entry

	recovery *Recovery // set by Open, read-only after
}

var _ announce.Book = (*File)(nil)

// entry is one claim of the book and its line in the file. Keeping the line
// means a change encodes only the claims it touches: a refresh of one claim
// among 10,000 encodes one and copies the rest.
type entry struct {
	claim announce.Claim
	line  []byte
}

// Recovery reports a state file that Open could not read whole. It is an
// error so that a caller can log it or pass it on, but Open has dealt with
// it: the book holds what was kept and is ready for use.
type Recovery struct {
	// Path is the state file.
	Path string
	// Moved is where the damaged file was moved, path + ".corrupt-" + a UTC
	// time stamp; empty when it could not be moved (see SaveErr).
	Moved string
	// Kept is the number of claims recovered from the damaged file.
	Kept int
	// Dropped is the number of entries found in the file and discarded as
	// invalid. Claims lost to a file that was cut short are not counted:
	// nothing says how many there were.
	Dropped int
	// Problem is what was wrong with the file.
	Problem error
	// SaveErr, when set, is why the damaged file could not be moved aside or
	// the kept claims not written back; the book then lives in memory only
	// until a change is written successfully.
	SaveErr error
}

func (r *Recovery) Error() string {
	var s strings.Builder
	fmt.Fprintf(&s, "state file %s was damaged (%v): kept %d claims, dropped %d entries", r.Path, r.Problem, r.Kept, r.Dropped)
	if r.Moved != "" {
		fmt.Fprintf(&s, "; the damaged file is now %s", r.Moved)
	}
	if r.SaveErr != nil {
		fmt.Fprintf(&s, "; %v", r.SaveErr)
	}
	return s.String()
}

// Unwrap returns the problem found in the file.
func (r *Recovery) Unwrap() error { return r.Problem }

// Open returns the book kept at path. A missing file (or one that cannot
// exist, because a part of the path is not a directory) is an empty book; the
// file is only written at the first change, and Open does not create its
// directory. Open fails only when the file exists but cannot be read at all
// (permissions, a directory at path).
//
// A file that is damaged (not JSON, cut short, another format version,
// invalid entries) does not make Open fail: it keeps every valid claim it can
// read, moves the file aside to path + ".corrupt-<time>", writes the kept
// claims back to path, logs a warning naming the moved file, and reports all
// of that through Recovery. A nil log discards the warning.
func Open(path string, log *slog.Logger) (*File, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &File{path: path, log: log}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		// No file can be there. If the directory cannot be made or
		// written to, the first change says so.
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state file: %w", err)
	}
	claims, dropped, problem := decode(data)
	if f.book, err = entries(claims); err != nil {
		return nil, fmt.Errorf("read state file %s: %w", path, err)
	}
	if problem != nil {
		f.recover(dropped, problem, time.Now())
	}
	return f, nil
}

// recover moves the damaged file aside and writes the claims kept from it
// back to the path, so that a crash right now still finds them. The damaged
// file is hard-linked to its new name first and then replaced, so there is no
// moment without a state file at path.
func (f *File) recover(dropped int, problem error, now time.Time) {
	r := &Recovery{Path: f.path, Kept: len(f.book), Dropped: dropped, Problem: problem}
	f.recovery = r
	moved, err := moveAside(f.path, now)
	if err != nil {
		r.SaveErr = fmt.Errorf("cannot move it aside: %w", err)
	} else {
		r.Moved = moved
		if err := f.write(encode(f.book), true); err != nil {
			r.SaveErr = fmt.Errorf("cannot write the kept claims back: %w", err)
		}
	}
	args := []any{"path", f.path, "moved_to", r.Moved, "kept", r.Kept, "dropped", r.Dropped, "problem", problem.Error()}
	if r.SaveErr != nil {
		args = append(args, "err", r.SaveErr.Error())
	}
	f.log.Warn("state file damaged: kept the claims that could be read and moved the file aside", args...)
}

// moveAside gives the file at path the name path + ".corrupt-<time>" and
// returns that name. path keeps naming the file too, until it is replaced.
func moveAside(path string, now time.Time) (string, error) {
	base := path + ".corrupt-" + now.UTC().Format("20060102T150405.000000000Z")
	for i := 0; ; i++ {
		name := base
		if i > 0 {
			name = fmt.Sprintf("%s-%d", base, i)
		}
		err := os.Link(path, name)
		if err == nil {
			return name, nil
		}
		if errors.Is(err, fs.ErrExist) && i < 100 {
			continue
		}
		if errors.Is(err, fs.ErrExist) {
			return "", err
		}
		// A file system without hard links: rename instead, and leave
		// path missing until the kept claims are written.
		if rerr := os.Rename(path, name); rerr != nil {
			return "", rerr
		}
		return name, nil
	}
}

// Recovery returns what Open found wrong with the state file and what it did
// about it, or nil if the file was read whole (or did not exist).
func (f *File) Recovery() *Recovery { return f.recovery }

// Path returns the path of the state file.
func (f *File) Path() string { return f.path }

// Put records claims, replacing any recorded claim of the same address; of
// two claims of one address in claims, the last one counts. It writes the
// book once, whatever the number of claims. An invalid claim (an address vip
// cannot claim, a bad interface name) fails the whole call, and a failed
// write too; nothing is recorded then.
func (f *File) Put(ctx context.Context, claims ...announce.Claim) error {
	return f.put(ctx, true, claims)
}

func (f *File) put(ctx context.Context, synced bool, claims []announce.Claim) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(claims) == 0 {
		return nil
	}
	for _, c := range claims {
		if err := validate(c); err != nil {
			return fmt.Errorf("record claim of %s on %q: %w", c.Addr, c.Interface, err)
		}
	}
	batch, err := entries(claims)
	if err != nil {
		return err
	}
	f.writeMu.Lock()
	defer f.writeMu.Unlock()
	return f.commit(merge(f.current(), batch), synced)
}

// PutUnsynced records claims as Put does, in a file that an agent started
// after this process dies reads whole, but not yet synced to the disk: a
// power cut may lose it until Sync. The engine sends a new claim's first
// round between the two, so that the disk's flush (a millisecond, tens on
// a busy disk) is not on the way to the first frame.
func (f *File) PutUnsynced(ctx context.Context, claims ...announce.Claim) error {
	return f.put(ctx, false, claims)
}

// Sync makes what PutUnsynced wrote survive a power cut: the file and its
// directory synced. Nothing to sync is not an error.
func (f *File) Sync(ctx context.Context) error {
	f.writeMu.Lock()
	defer f.writeMu.Unlock()
	if !f.unsynced {
		return nil
	}
	if err := syncFile(f.path); err != nil {
		return fmt.Errorf("sync state file %s: %w", f.path, err)
	}
	f.unsynced = false
	return nil
}

// Delete forgets the claims of addrs. Unknown addresses are ignored; when
// none of addrs is recorded, nothing is written.
func (f *File) Delete(ctx context.Context, addrs ...netip.Addr) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(addrs) == 0 {
		return nil
	}
	f.writeMu.Lock()
	defer f.writeMu.Unlock()
	cur := f.current()
	gone := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		gone[a] = true
	}
	next := make([]entry, 0, len(cur))
	for _, e := range cur {
		if !gone[e.claim.Addr] {
			next = append(next, e)
		}
	}
	if len(next) == len(cur) {
		return nil
	}
	return f.commit(next, true)
}

// List returns every recorded claim, ordered by address.
func (f *File) List(context.Context) ([]announce.Claim, error) {
	book := f.current()
	out := make([]announce.Claim, len(book))
	for i, e := range book {
		out[i] = e.claim
	}
	return out, nil
}

// Remove deletes the state file, for an agent that exits holding nothing. It
// refuses while the book still records claims, since a later agent would
// need them to clean up. A missing file is not an error.
func (f *File) Remove() error {
	f.writeMu.Lock()
	defer f.writeMu.Unlock()
	if n := len(f.current()); n > 0 {
		return fmt.Errorf("remove state file %s: it still records %d claims", f.path, n)
	}
	if err := os.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove state file: %w", err)
	}
	if err := syncDir(filepath.Dir(f.path)); err != nil {
		return fmt.Errorf("remove state file %s: %w", f.path, err)
	}
	return nil
}

func (f *File) current() []entry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.book
}

// commit writes next to disk (synced, or left for Sync) and, once it is
// there, makes it the book. The caller holds writeMu.
func (f *File) commit(next []entry, synced bool) error {
	start := time.Now()
	data := encode(next)
	if err := f.write(data, synced); err != nil {
		return fmt.Errorf("save state file %s: %w", f.path, err)
	}
	f.mu.Lock()
	f.book = next
	f.mu.Unlock()
	f.log.Debug("state file saved", "path", f.path, "claims", len(next), "bytes", len(data), "took", time.Since(start))
	return nil
}

// merge returns cur with batch put in: sorted, each address once, a claim in
// batch replacing one of the same address in cur and a later claim in batch
// an earlier one.
func merge(cur, batch []entry) []entry {
	b := slices.Clone(batch)
	byAddr := func(x, y entry) int { return x.claim.Addr.Compare(y.claim.Addr) }
	if !slices.IsSortedFunc(b, byAddr) { // callers often pass sorted batches
		slices.SortStableFunc(b, byAddr)
	}
	uniq := b[:0]
	for i, e := range b {
		if i+1 < len(b) && b[i+1].claim.Addr == e.claim.Addr {
			continue // a later claim of the same address wins
		}
		uniq = append(uniq, e)
	}
	out := make([]entry, 0, len(cur)+len(uniq))
	i, j := 0, 0
	for i < len(cur) && j < len(uniq) {
		switch cur[i].claim.Addr.Compare(uniq[j].claim.Addr) {
		case -1:
			out = append(out, cur[i])
			i++
		case 1:
			out = append(out, uniq[j])
			j++
		default:
			out = append(out, uniq[j])
			i++
			j++
		}
	}
	out = append(out, cur[i:]...)
	return append(out, uniq[j:]...)
}

// validate checks what a claim needs to be re-adopted: an address vip can
// claim and an interface name the kernel could have given.
func validate(c announce.Claim) error {
	if !c.Addr.IsValid() {
		return errors.New("no address")
	}
	if _, err := netcheck.ParseAddr(c.Addr.String()); err != nil {
		return err
	}
	if c.Interface == "" || len(c.Interface) > 15 || c.Interface == "." || c.Interface == ".." ||
		strings.ContainsAny(c.Interface, "/: \t\n\r\v\f") {
		return fmt.Errorf("%q is not an interface name", c.Interface)
	}
	return nil
}

// upgradeOptions reads options as an earlier vip wrote them: before it said
// "one round" and "no probes" in so many words (single_round, probes_off),
// it recorded them as a window of 1 ns and a negative probe period.
func upgradeOptions(o announce.ClaimOptions) announce.ClaimOptions {
	if o.Window == time.Nanosecond {
		o.Window, o.SingleRound = 0, true
	}
	if o.ProbeEvery < 0 {
		o.ProbeEvery, o.ProbesOff = 0, true
	}
	return o
}

// parallelFrom is the batch size from which entries encodes on every CPU:
// encoding is most of the cost of a large batch.
const parallelFrom = 1024

// entries encodes each claim's line.
func entries(claims []announce.Claim) ([]entry, error) {
	out := make([]entry, len(claims))
	workers := min(runtime.GOMAXPROCS(0), len(claims)/(parallelFrom/2))
	if workers <= 1 {
		return out, encodeInto(out, claims)
	}
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*len(claims)/workers, (w+1)*len(claims)/workers
		wg.Go(func() { errs[w] = encodeInto(out[lo:hi], claims[lo:hi]) })
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

func encodeInto(out []entry, claims []announce.Claim) error {
	for i, c := range claims {
		line, err := json.Marshal(c)
		if err != nil {
			return fmt.Errorf("encode claim of %s: %w", c.Addr, err)
		}
		out[i] = entry{claim: c, line: line}
	}
	return nil
}

// encode returns the file contents for a book: one claim per line, so the
// file reads and diffs well, and a file cut short loses whole claims.
func encode(book []entry) []byte {
	n := 64
	for _, e := range book {
		n += len(e.line) + 2
	}
	buf := make([]byte, 0, n)
	buf = fmt.Appendf(buf, `{"version":%d,"claims":[`, Version)
	for i, e := range book {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, '\n')
		buf = append(buf, e.line...)
	}
	return append(buf, "\n]}\n"...)
}

// decode reads a state file. It returns the valid claims it found, sorted,
// the number of entries it dropped as invalid, and, when the file was not
// read whole, what was wrong with it. Claims are kept only from a file of
// this Version: the claims of another version may mean something else.
func decode(data []byte) (claims []announce.Claim, dropped int, problem error) {
	version, entries, err := scan(data)
	switch {
	case version == 0 && err == nil:
		return nil, len(entries), errors.New("no format version")
	case version == 0:
		return nil, len(entries), err
	case version != Version:
		return nil, len(entries), fmt.Errorf("format version %d, this vip reads version %d", version, Version)
	}
	problem = err
	seen := make(map[netip.Addr]bool, len(entries))
	for i, raw := range entries {
		var c announce.Claim
		err := json.Unmarshal(raw, &c)
		if err == nil {
			c.Options = upgradeOptions(c.Options)
			err = validate(c)
		}
		if err == nil && seen[c.Addr] {
			err = fmt.Errorf("%s recorded twice", c.Addr)
		}
		if err != nil {
			dropped++
			if problem == nil {
				problem = fmt.Errorf("claim %d: %w", i+1, err)
			}
			continue
		}
		seen[c.Addr] = true
		claims = append(claims, c)
	}
	slices.SortFunc(claims, func(x, y announce.Claim) int { return x.Addr.Compare(y.Addr) })
	return claims, dropped, problem
}

// scan reads the structure of a state file, stopping at the first error. It
// returns the version (0 if none was read) and the claim entries read before
// the error, unparsed, so that a file cut short still yields the claims
// before the cut.
func scan(data []byte) (version int, entries []json.RawMessage, err error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	unexpected := func(err error) error {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("cut short: %w", io.ErrUnexpectedEOF)
		}
		return err
	}
	if err := expectDelim(dec, '{'); err != nil {
		return 0, nil, fmt.Errorf("not a state file: %w", unexpected(err))
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return version, entries, unexpected(err)
		}
		switch tok {
		case "version":
			if err := dec.Decode(&version); err != nil {
				return 0, entries, fmt.Errorf("format version: %w", unexpected(err))
			}
		case "claims":
			if err := expectDelim(dec, '['); err != nil {
				return version, entries, fmt.Errorf("claims: %w", unexpected(err))
			}
			for dec.More() {
				var raw json.RawMessage
				if err := dec.Decode(&raw); err != nil {
					return version, entries, fmt.Errorf("after %d claims: %w", len(entries), unexpected(err))
				}
				entries = append(entries, raw)
			}
			if err := expectDelim(dec, ']'); err != nil {
				return version, entries, fmt.Errorf("after %d claims: %w", len(entries), unexpected(err))
			}
		default:
			var skip json.RawMessage // a field of a later vip of this version
			if err := dec.Decode(&skip); err != nil {
				return version, entries, unexpected(err)
			}
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return version, entries, unexpected(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return version, entries, errors.New("data after the end")
	}
	return version, entries, nil
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != want {
		return fmt.Errorf("found %v where %q was expected", tok, want)
	}
	return nil
}
