package labtest

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vipctl/vip/internal/lab"
)

// Relay is a TCP relay inside a lab host that passes every chunk of bytes
// on after a delay, in each direction and in order: a slow link, or a
// loaded store, where the kernel has no netem. A client that connects to
// it reaches the target with a round trip of twice the delay.
type Relay struct {
	ln     net.Listener
	h      *lab.Host
	target string
	delay  atomic.Int64

	mu     sync.Mutex
	conns  []net.Conn
	closed bool
	wg     sync.WaitGroup
}

// StartRelay listens on listen (host:port) in h's namespace and relays each
// connection to target, dialled from h's namespace too, with no delay until
// SetDelay. The test's cleanup stops it.
func StartRelay(t TB, h *lab.Host, listen, target string) *Relay {
	t.Helper()
	r := &Relay{h: h, target: target}
	if err := lab.InNetns("/run/netns/"+h.Netns, func() error {
		ln, err := net.Listen("tcp", listen)
		r.ln = ln
		return err
	}); err != nil {
		t.Fatalf("relay on %s in %s: %v", listen, h.Name, err)
	}
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(r.Close)
	return r
}

// Addr is where the relay listens.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// SetDelay sets how long each chunk that arrives from now on waits before
// it is passed on.
func (r *Relay) SetDelay(d time.Duration) { r.delay.Store(int64(d)) }

// Close stops the relay and ends its connections.
func (r *Relay) Close() {
	r.mu.Lock()
	r.closed = true
	for _, c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.ln.Close()
	r.wg.Wait()
}

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		var up net.Conn
		err = lab.InNetns("/run/netns/"+r.h.Netns, func() error {
			var err error
			up, err = net.DialTimeout("tcp", r.target, 5*time.Second)
			return err
		})
		if err != nil {
			c.Close()
			continue
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			c.Close()
			up.Close()
			return
		}
		r.conns = append(r.conns, c, up)
		r.wg.Add(2)
		r.mu.Unlock()
		go r.pipe(up, c)
		go r.pipe(c, up)
	}
}

// chunk is bytes read and when they may go on.
type chunk struct {
	b  []byte
	at time.Time
}

// pipe copies from src to dst, each chunk after the delay set when it
// arrived, then closes both.
func (r *Relay) pipe(dst, src net.Conn) {
	defer r.wg.Done()
	chunks := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ch := range chunks {
			if wait := time.Until(ch.at); wait > 0 {
				time.Sleep(wait) // the chunk's own delay: the point of the relay
			}
			if _, err := dst.Write(ch.b); err != nil {
				break
			}
		}
		// Drain what is left, so that the reader never blocks.
		for range chunks {
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			chunks <- chunk{b: append([]byte(nil), buf[:n]...), at: time.Now().Add(time.Duration(r.delay.Load()))}
		}
		if err != nil {
			// EOF, a reset or a close: each ends the relay's copy.
			break
		}
	}
	close(chunks)
	<-done
	dst.Close()
	src.Close()
}
