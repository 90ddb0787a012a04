package loadgen

import (
	"context"
	"errors"
	"fmt"
	"github.com/vipctl/vip/internal/lab"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vipctl/vip/internal/wire"
)

// Limits that keep every run bounded in memory and time.
const (
	// MaxCount is the most requests one run sends: 2,000,000 take about
	// 50 MB of bookkeeping.
	MaxCount = 2_000_000
	// MaxRate is the highest rate Run accepts.
	MaxRate = 1_000_000
	// MaxWait is the longest a request may wait for its reply.
	MaxWait = 10 * time.Second
	// DefaultWait is how long a request waits for its reply before it
	// counts as lost.
	DefaultWait = time.Second
	// DefaultSources is the size of the pool of NDP source addresses.
	DefaultSources = 64
	// MinTick is the shortest pause between two batches.
	MinTick = 100 * time.Microsecond
	// Linger is how much longer Run listens once every request is
	// answered, for duplicates.
	Linger = 250 * time.Millisecond
)

// Config describes one run: who asks, for what, how fast and how many.
type Config struct {
	// Netns is the path of the network namespace to send from, such as
	// /run/netns/lab-client; empty means the caller's own.
	Netns string
	// Interface is the interface to send on and read replies from.
	Interface string
	// Target is the address asked for: an IPv4 address gets ARP requests,
	// an IPv6 address neighbor solicitations to its solicited-node group.
	Target netip.Addr
	// Sender is, for ARP, the requests' sender IP; for NDP, the first of
	// Sources source addresses, which differ in their last 16 bits. It must
	// be of Target's family.
	Sender netip.Addr
	// Rate is the number of requests per second.
	Rate int
	// Count is the number of requests.
	Count int
	// Wait is how long a request waits for its reply before it counts as
	// lost; DefaultWait when zero. The run ends when the last request has
	// waited this long, or Linger after every request was answered.
	Wait time.Duration
	// Sources is the number of NDP source addresses requests cycle
	// through; DefaultSources when zero. A responder creates a neighbour
	// entry for each, so keep it well under the kernel's gc_thresh3 (1024
	// by default, for the whole machine).
	Sources int
	// Tick is the pause between two batches of requests; zero means
	// max(MinTick, 1/Rate): one request per wake up to 10,000/s, batches
	// of Rate×100µs above.
	Tick time.Duration
	// Run tells this run's requests from another's; replies to another
	// run are ignored. Give each run in a process its own.
	Run uint8
	// TxTimestamps asks the kernel for a software transmit timestamp of
	// each request and uses it as its send time. Requests the kernel gives
	// none for are timed by the clock read right before the write.
	TxTimestamps bool
}

func (c *Config) validate() error {
	switch {
	case c.Interface == "":
		return errors.New("no interface")
	case !c.Target.IsValid() || c.Target.Is4In6():
		return fmt.Errorf("target %v: want an IPv4 or IPv6 address", c.Target)
	case !c.Sender.IsValid() || c.Sender.Is4() != c.Target.Is4():
		return fmt.Errorf("sender %v: want an address of the target's family", c.Sender)
	case c.Rate <= 0 || c.Rate > MaxRate:
		return fmt.Errorf("rate %d: want 1 to %d requests per second", c.Rate, MaxRate)
	case c.Count <= 0 || c.Count > MaxCount:
		return fmt.Errorf("count %d: want 1 to %d requests", c.Count, MaxCount)
	case c.Wait < 0 || c.Wait > MaxWait:
		return fmt.Errorf("wait %v: want up to %v", c.Wait, MaxWait)
	case c.Sources < 0 || c.Sources > 1<<16:
		return fmt.Errorf("sources %d: want up to 65536", c.Sources)
	case c.Tick < 0 || c.Tick > time.Second:
		return fmt.Errorf("tick %v: want up to a second", c.Tick)
	}
	if c.Wait == 0 {
		c.Wait = DefaultWait
	}
	if c.Sources == 0 {
		c.Sources = DefaultSources
	}
	if c.Tick == 0 {
		c.Tick = max(MinTick, time.Second/time.Duration(c.Rate))
	}
	if c.Target.Is6() {
		b := c.Sender.As16()
		if last := int(b[14])<<8 | int(b[15]); last+c.Sources > 1<<16 {
			return fmt.Errorf("sender %s: its last 16 bits leave no room for %d sources", c.Sender, c.Sources)
		}
	}
	return nil
}

// SendClock says where a run's send times come from.
type SendClock string

// The send clocks.
const (
	ClockKernelTx SendClock = "kernel software TX timestamp (SO_TIMESTAMPING)"
	ClockBeforeWr SendClock = "clock read right before write(2)"
	ClockMixed    SendClock = "kernel TX timestamp where given, else the clock before write(2)"
)

// Result is what a run measured.
type Result struct {
	Target netip.Addr
	Rate   int
	// Sent is how many requests went out; SendErrors how many the socket
	// refused (they are not in Sent).
	Sent, SendErrors int
	// Answered counts requests with a reply within Wait; Lost those
	// without (Late of them had one, after Wait).
	Answered, Lost, Late int
	// Duplicates counts replies beyond the first to a request; Duplicated
	// the requests that got them. A correct responder sends none.
	Duplicates, Duplicated int
	// Disagreeing counts replies that named their request differently in
	// two places (see reply.agrees); Stray replies of this run to no
	// request sent.
	Disagreeing, Stray int
	// Latencies holds the latency of each answered request, sorted.
	Latencies []time.Duration
	// Negative counts answered requests whose reply was stamped before
	// their send time: a clock problem, left out of Latencies.
	Negative int
	// Start and Elapsed are when the first request went out and how long
	// sending took; MaxBatch is the most requests sent in one wake.
	Start    time.Time
	Elapsed  time.Duration
	MaxBatch int
	Tick     time.Duration
	// Clock says where send times came from; TxStamped counts requests
	// timed by a kernel transmit timestamp.
	Clock     SendClock
	TxStamped int
	// RecvDrops counts replies the receiving socket dropped for want of
	// buffer (PACKET_STATISTICS). Non-zero means losses may be ours.
	RecvDrops uint32
	// Responders counts replies by the responder's Ethernet address.
	Responders map[string]int
}

// AchievedRate returns the requests per second actually sent.
func (r *Result) AchievedRate() float64 {
	if r.Elapsed <= 0 || r.Sent < 2 {
		return 0
	}
	// Elapsed runs from the first send to the last: Sent-1 intervals.
	return float64(r.Sent-1) / r.Elapsed.Seconds()
}

// Percentile returns the latency below which a fraction p (0 to 1) of the
// answered requests fall, by the nearest-rank method; 0 when none was
// answered.
func (r *Result) Percentile(p float64) time.Duration {
	return percentile(r.Latencies, p)
}

// Median returns the median latency.
func (r *Result) Median() time.Duration { return r.Percentile(0.5) }

// P99 returns the 99th percentile latency.
func (r *Result) P99() time.Duration { return r.Percentile(0.99) }

// Max returns the largest latency.
func (r *Result) Max() time.Duration { return r.Percentile(1) }

// LossRatio returns the fraction of requests sent that got no reply in time.
func (r *Result) LossRatio() float64 {
	if r.Sent == 0 {
		return 0
	}
	return float64(r.Lost) / float64(r.Sent)
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	// Nearest rank: the smallest value with at least p of the values at
	// or below it.
	rank := int(p*float64(len(sorted)) + 0.999999999)
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// run is the state of one Run.
type run struct {
	cfg Config
	req *request

	tx, rx int // sockets

	sendAt []int64 // clock before the write, Unix ns
	txAt   []int64 // kernel transmit timestamp, Unix ns
	recvAt []int64 // first reply's receive timestamp, Unix ns
	nrep   []uint8 // replies per request, saturating

	// issued counts requests about to be written. A reply to request k
	// may come in before k's write returns (the kernel answers inside the
	// write), but never before issued exceeds k.
	issued    atomic.Int64
	sent      atomic.Int64 // requests written
	answered  atomic.Int64 // requests with a first reply
	stray     int
	disagree  int
	responded map[[6]byte]int
	txb       *batch // the error-queue batch, made on first use
}

// Run sends cfg.Count requests at cfg.Rate and collects the replies. It
// returns Linger after every request is answered, when the last one has
// waited cfg.Wait, or when ctx is done (then with ctx's error and what was
// measured so far).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	r := &run{cfg: cfg, tx: -1, rx: -1, responded: map[[6]byte]int{}}
	var mac net.HardwareAddr
	proto := uint16(wire.EtherTypeARP)
	if cfg.Target.Is6() {
		proto = wire.EtherTypeIPv6
	}
	err := lab.InNetns(cfg.Netns, func() error {
		ifindex, m, err := interfaceIn(cfg.Interface)
		if err != nil {
			return err
		}
		mac = m
		if r.rx, err = openReceiver(ifindex, proto, replyFilter(cfg.Target.Is6(), cfg.Run)); err != nil {
			return err
		}
		r.tx, err = openSender(ifindex)
		return err
	})
	defer r.close()
	if err != nil {
		return nil, fmt.Errorf("load on %s: %w", cfg.Interface, err)
	}
	if r.req, err = newRequest(&cfg, mac); err != nil {
		return nil, err
	}
	if cfg.TxTimestamps {
		if err := enableTxTimestamps(r.tx); err != nil {
			return nil, fmt.Errorf("load on %s: %w", cfg.Interface, err)
		}
	}
	n := cfg.Count
	r.sendAt = make([]int64, n)
	r.recvAt = make([]int64, n)
	r.nrep = make([]uint8, n)
	if cfg.TxTimestamps {
		r.txAt = make([]int64, n)
	}

	var stop atomic.Bool
	var wg sync.WaitGroup
	recvErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		recvErr <- r.receive(&stop)
	}()

	res := &Result{Target: cfg.Target, Rate: cfg.Rate, Tick: cfg.Tick}
	sendErr := r.send(ctx, res)

	// Wait for the replies: until every request sent is answered, or the
	// last one has waited cfg.Wait. Then listen a little longer, so that a
	// second responder's reply to the last requests counts too.
	deadline := time.Now().Add(cfg.Wait)
	for time.Now().Before(deadline) && ctx.Err() == nil && r.answered.Load() < r.sent.Load() {
		time.Sleep(time.Millisecond)
	}
	linger := time.NewTimer(min(cfg.Wait, Linger, time.Until(deadline)))
	select {
	case <-linger.C:
	case <-ctx.Done():
		linger.Stop()
	}
	stop.Store(true)
	wg.Wait()
	if cfg.TxTimestamps {
		r.drainTx(true)
	}
	if st, err := unix.GetsockoptTpacketStats(r.rx, unix.SOL_PACKET, unix.PACKET_STATISTICS); err == nil {
		res.RecvDrops = st.Drops
	}
	r.summarise(res)
	return res, errors.Join(sendErr, <-recvErr, ctx.Err())
}

func (r *run) close() {
	if r.tx >= 0 {
		unix.Close(r.tx)
	}
	if r.rx >= 0 {
		unix.Close(r.rx)
	}
}

// send writes the requests, paced: each wake sends every request due by
// then, and sleeps a tick. It runs on a thread of its own with a timer slack
// of a microsecond, so that a tick of 100 µs is 100 µs.
func (r *run) send(ctx context.Context, res *Result) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1000, 0, 0, 0)
	defer unix.Prctl(unix.PR_SET_TIMERSLACK, 0, 0, 0, 0) // back to the default

	n, rate := r.cfg.Count, int64(r.cfg.Rate)
	start := time.Now()
	res.Start = start
	var last time.Time
	i := 0
	for i < n {
		if ctx.Err() != nil {
			break
		}
		elapsed := time.Since(start)
		// Requests 0..due-1 are due: request k at k/rate.
		due := min(n, int(elapsed.Nanoseconds()*rate/int64(time.Second))+1)
		res.MaxBatch = max(res.MaxBatch, due-i)
		for ; i < due; i++ {
			f := r.req.set(uint32(i))
			now := time.Now()
			r.sendAt[i] = now.UnixNano()
			r.issued.Store(int64(i) + 1)
			if err := write(r.tx, f); err != nil {
				if errClosed(err) {
					return fmt.Errorf("send: %w", err)
				}
				r.sendAt[i] = 0
				res.SendErrors++
				continue
			}
			last = now
			r.sent.Add(1)
		}
		if r.cfg.TxTimestamps {
			r.drainTx(false)
		}
		if i >= n {
			break
		}
		next := time.Duration(int64(i) * int64(time.Second) / rate)
		sleepPrecise(max(next-time.Since(start), r.cfg.Tick-(time.Since(start)-elapsed)))
	}
	if !last.IsZero() {
		res.Elapsed = last.Sub(start)
	}
	return nil
}

// drainTx reads the transmit timestamps queued on the sender's error queue.
// With wait set it keeps at it for a little while, for the last ones.
func (r *run) drainTx(wait bool) {
	b := r.txBatch()
	deadline := time.Now().Add(50 * time.Millisecond)
	for {
		n, err := b.recv(r.tx)
		if err != nil {
			return
		}
		for i := range n {
			seq, ok := r.req.seqOfRequest(b.frame(i))
			if !ok || int(seq) >= len(r.txAt) {
				continue
			}
			r.txAt[seq] = b.txTime(i)
		}
		if n == 0 {
			if !wait || time.Now().After(deadline) {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
}

func (r *run) txBatch() *batch {
	if r.txb == nil {
		r.txb = newBatch(64, unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
	}
	return r.txb
}

// receive reads replies until stop is set, recording the first reply's
// receive time and counting every reply of each request.
func (r *run) receive(stop *atomic.Bool) error {
	b := newBatch(64, unix.MSG_WAITFORONE)
	for !stop.Load() {
		n, err := b.recv(r.rx)
		if err != nil {
			return fmt.Errorf("receive replies: %w", err)
		}
		for i := range n {
			rep, ok := r.req.parseReply(b.frame(i), r.cfg.Target)
			if !ok {
				continue
			}
			if int64(rep.seq) >= r.issued.Load() {
				r.stray++
				continue
			}
			if !rep.agrees {
				r.disagree++
			}
			r.responded[rep.from]++
			switch r.nrep[rep.seq] {
			case 0:
				r.recvAt[rep.seq] = b.rxTime(i)
				r.answered.Add(1)
			case 255:
				continue
			}
			r.nrep[rep.seq]++
		}
	}
	return nil
}

// summarise turns the per-request records into res.
func (r *run) summarise(res *Result) {
	wait := r.cfg.Wait.Nanoseconds()
	res.Latencies = make([]time.Duration, 0, r.answered.Load())
	for i, sentAt := range r.sendAt {
		if sentAt == 0 {
			continue // never written, or refused
		}
		res.Sent++
		if r.txAt != nil && r.txAt[i] != 0 {
			sentAt = r.txAt[i]
			res.TxStamped++
		}
		if n := int(r.nrep[i]); n > 1 {
			res.Duplicated++
			res.Duplicates += n - 1
		}
		if r.nrep[i] == 0 {
			res.Lost++
			continue
		}
		lat := r.recvAt[i] - sentAt
		switch {
		case lat > wait:
			res.Late++
			res.Lost++
		case r.recvAt[i] == 0 || lat < 0:
			res.Answered++
			res.Negative++
		default:
			res.Answered++
			res.Latencies = append(res.Latencies, time.Duration(lat))
		}
	}
	slices.Sort(res.Latencies)
	res.Stray, res.Disagreeing = r.stray, r.disagree
	res.Responders = make(map[string]int, len(r.responded))
	for mac, n := range r.responded {
		res.Responders[net.HardwareAddr(mac[:]).String()] = n
	}
	switch {
	case r.txAt == nil || res.TxStamped == 0:
		res.Clock = ClockBeforeWr
	case res.TxStamped == res.Sent:
		res.Clock = ClockKernelTx
	default:
		res.Clock = ClockMixed
	}
}
