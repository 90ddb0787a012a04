//go:build linux

package batchio_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/internal/batchio"
)

// pair returns the two ends of a datagram socket pair, which stands for a
// packet socket: each write is one frame.
func pair(t *testing.T) (peer, end int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	return fds[0], fds[1]
}

func wake(t *testing.T) int {
	t.Helper()
	w, err := batchio.NewWake()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(w) })
	return w
}

func buffers(n, size int) [][]byte {
	b := make([][]byte, n)
	for i := range b {
		b[i] = make([]byte, size)
	}
	return b
}

func send(t *testing.T, fd int, frame []byte) {
	t.Helper()
	if _, err := unix.Write(fd, frame); err != nil {
		t.Fatal(err)
	}
}

// TestReaderBatches reads more frames than a batch holds in two batches,
// in order, each of its own length (which a message header laid out for
// another architecture would get wrong past the first), a frame longer
// than its buffer cut to it.
func TestReaderBatches(t *testing.T) {
	peer, end := pair(t)
	const batch, n = 8, 12
	r := batchio.NewReader([]int{end}, wake(t), buffers(batch, 16), 0)
	for i := range n {
		send(t, peer, bytes.Repeat([]byte{byte(i)}, 1+i))
	}
	next := 0
	for _, want := range []int{batch, n - batch} {
		got, err := r.Read()
		if err != nil || got != want {
			t.Fatalf("Read: %d frames (%v), want %d", got, err, want)
		}
		for i := range got {
			if f, want := r.Frame(i), bytes.Repeat([]byte{byte(next)}, min(1+next, 16)); !bytes.Equal(f, want) {
				t.Errorf("frame %d: got %x, want %x", next, f, want)
			}
			next++
		}
	}
}

// TestReaderTakesTurns: with frames waiting on two sockets, reads take
// them in turn.
func TestReaderTakesTurns(t *testing.T) {
	peerA, endA := pair(t)
	peerB, endB := pair(t)
	r := batchio.NewReader([]int{endA, endB}, wake(t), buffers(1, 4), 0)
	for range 2 {
		send(t, peerA, []byte("a"))
		send(t, peerB, []byte("b"))
	}
	var got []byte
	for range 4 {
		if n, err := r.Read(); err != nil || n != 1 {
			t.Fatalf("Read: %d frames (%v), want 1", n, err)
		}
		got = append(got, r.Frame(0)...)
	}
	if string(got) != "abab" {
		t.Errorf("frames in the order %q, want abab", got)
	}
}

// TestReaderWakes: a Read waiting in poll returns ErrWoken once the wake
// is poked, and every Read and Pause after it too until it is drained;
// then a Read waits for a frame again.
func TestReaderWakes(t *testing.T) {
	peer, end := pair(t)
	w := wake(t)
	r := batchio.NewReader([]int{end}, w, buffers(4, 4), 0)
	done := make(chan error, 1)
	go func() {
		_, err := r.Read()
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // in poll by now
	batchio.Poke(w)
	select {
	case err := <-done:
		if !errors.Is(err, batchio.ErrWoken) {
			t.Fatalf("Read after Poke: got %v, want ErrWoken", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Read still waiting 2s after Poke")
	}
	if _, err := r.Read(); !errors.Is(err, batchio.ErrWoken) {
		t.Errorf("Read while poked: got %v, want ErrWoken", err)
	}
	if err := r.Pause(time.Hour); !errors.Is(err, batchio.ErrWoken) {
		t.Errorf("Pause while poked: got %v, want ErrWoken", err)
	}
	batchio.Drain(w)
	start := time.Now()
	if err := r.Pause(10 * time.Millisecond); err != nil {
		t.Errorf("Pause: got %v, want nil", err)
	}
	if d := time.Since(start); d < 10*time.Millisecond {
		t.Errorf("Pause(10ms) returned after %v", d)
	}
	go func() {
		_, err := r.Read()
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	send(t, peer, []byte{1})
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Read of a frame after Drain: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Read still waiting 2s after a frame came")
	}
}

// TestReaderControl: a frame's control messages come with it.
func TestReaderControl(t *testing.T) {
	peer, end := pair(t)
	r := batchio.NewReader([]int{end}, wake(t), buffers(2, 8), 64)
	if err := unix.Sendmsg(peer, []byte("frame"), unix.UnixRights(peer), nil, 0); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Read(); err != nil || n != 1 {
		t.Fatalf("Read: %d frames (%v), want 1", n, err)
	}
	msgs, err := unix.ParseSocketControlMessage(r.Control(0))
	if err != nil || len(msgs) != 1 {
		t.Fatalf("control messages: %d (%v), want 1", len(msgs), err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		t.Fatalf("rights: %v (%v), want one descriptor", fds, err)
	}
	unix.Close(fds[0])
	if string(r.Frame(0)) != "frame" {
		t.Errorf("frame: got %q, want %q", r.Frame(0), "frame")
	}
}

// TestWriter sends the queued frames in one go, and none discarded.
func TestWriter(t *testing.T) {
	peer, end := pair(t)
	w := batchio.NewWriter(end, buffers(4, 8))
	w.Slot()[0] = 9
	w.Queue(1)
	w.Discard()
	for i := range 3 {
		b := w.Slot()
		b[0] = byte(10 + i)
		w.Queue(1 + i)
	}
	if sent, err := w.Flush(); sent != 3 || err != nil {
		t.Fatalf("Flush: %d sent (%v), want 3", sent, err)
	}
	buf := make([]byte, 64)
	for i := range 3 {
		m, err := unix.Read(peer, buf)
		if err != nil || m != 1+i || buf[0] != byte(10+i) {
			t.Fatalf("frame %d: %x (%v), want %d bytes starting %02x", i, buf[:max(m, 0)], err, 1+i, 10+i)
		}
	}
	if m, err := unix.Read(peer, buf); err == nil {
		t.Errorf("a frame more than the 3 queued: %x", buf[:m])
	}
}

// TestNoAllocations: reading a batch and sending one allocate nothing, as
// the answer path needs.
func TestNoAllocations(t *testing.T) {
	peer, end := pair(t)
	r := batchio.NewReader([]int{end}, wake(t), buffers(4, 64), 0)
	w := batchio.NewWriter(end, buffers(4, 64))
	frame, buf := []byte("request"), make([]byte, 64)
	if n := testing.AllocsPerRun(200, func() {
		_, _ = unix.Write(peer, frame)
		if n, err := r.Read(); err != nil || n != 1 || len(r.Frame(0)) != len(frame) {
			t.Fatalf("Read: %d frames (%v)", n, err)
		}
		w.Queue(copy(w.Slot(), r.Frame(0)))
		if sent, err := w.Flush(); sent != 1 || err != nil {
			t.Fatalf("Flush: %d sent (%v)", sent, err)
		}
		_, _ = unix.Read(peer, buf)
	}); n != 0 {
		t.Errorf("got %v allocations per frame read and sent, want 0", n)
	}
}
