//go:build ignore

// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * responder.c answers ARP requests and IPv6 neighbor solicitations for the
 * addresses held in the map "held", on the interface the program is
 * attached to, as vip's user-space responder does (announce/answer.go with
 * internal/wire's Parse in Answer mode, PutARP and PutND): the same frames
 * answered, the same replies, byte for byte. The Go tests run one corpus of
 * frames through both and compare. Anything it does not answer passes on
 * untouched.
 *
 * It also counts, per held address, the requests answered and the packets
 * and bytes arriving with the address as their IPv4 or IPv6 destination,
 * and, per asker of a held address, the requests it answered and when the
 * latest came: vip's capture then need not see those requests (on XDP it
 * cannot), and its traffic table still knows who asks.
 *
 * An address released with a linger (HELD_LINGER) is answered no more, but
 * for a while the program still counts what arrives for it sent to this
 * interface's MAC, and who sent it (the map "stale"): the hosts whose
 * caches still name this node after the address moved away. vip's drain
 * waits on those counts to say the old owner has gone quiet.
 *
 * A guarded agent (one whose claims an etcd lease guards) also writes its
 * answer deadline into the map "deadline", and the program answers only
 * while the clock is before it: past it, a request passes on unanswered
 * and is counted in "withheld". The agent moves the deadline on each
 * renewal of its lease the store acknowledged; a frozen agent moves
 * nothing, and the program falls silent on time by itself (see
 * past_deadline).
 *
 * The frame's first bytes are copied into a per-CPU scratch buffer and read
 * there, so that tc and XDP share one parser and every read is checked
 * against a fixed bound; the reply is built in the same buffer and written
 * back over the frame.
 */
#include "vipbpf.h"

char __license[] SEC("license") = "Dual MIT/GPL";

/* SCRATCH is how much of a frame the program reads: a standard-MTU frame.
 * A solicitation longer than that is not answered (the Go responder would
 * answer one up to 64 KiB; no neighbour sends one). It is a power of two,
 * so that masking an offset with MASK proves it in bounds. */
#define SCRATCH 2048
#define MASK (SCRATCH - 1)

/* MAX_HELD bounds the held addresses of one interface. */
#define MAX_HELD 16384

/* MAX_ASKERS bounds the askers remembered on one interface, one for each
 * address it may hold at least (a gateway asking for every one); beyond it
 * the least recently seen make room (an LRU map). vip reads them every
 * second: what an asker forgotten meanwhile asked since is lost. */
#define MAX_ASKERS MAX_HELD

/* NEW_ASKERS bounds the askers one CPU starts remembering in a second; the
 * requests of those beyond it count under their address's OTHERS entry,
 * which stays exact. Remembering a new asker is an insertion in the LRU
 * map, and once it is full the map makes room 128 entries at a time,
 * under a lock: for a flood of new askers (every request its own MAC) on
 * every request, that batch was a reply's p99 several times over. */
#define NEW_ASKERS 256
#define NEW_ASKERS_WINDOW_NS 1000000000ULL

/* ASKER_OTHERS, in asker_key.flags, marks the entry that counts the
 * requests of askers not remembered one by one; its from and mac are
 * zero. */
#define ASKER_OTHERS 1

#define ETH_LEN 14
#define ARP_FRAME_LEN 42     /* wire.ARPLen */
#define IP6_OFF ETH_LEN
#define ICMP6_OFF 54         /* wire.ICMPv6Offset */
#define NS_MIN_END (ICMP6_OFF + 24)
#define NA_FRAME_LEN 86      /* wire.NDLenWithLinkLayer */

#define FAMILY_IPV4 4
#define FAMILY_IPV6 6

/* HELD_ANSWER marks an address whose requests the program answers;
 * HELD_KERNEL one the kernel answers for on vip's behalf (vip added it to
 * the interface for a claim): the program passes its requests on to the
 * kernel while the deadline holds, and drops them past it, so that the
 * kernel falls silent with the claim's owner (see past_deadline). */
#define HELD_ANSWER 1
#define HELD_KERNEL 2
/* HELD_LINGER marks an address released a moment ago: neither answered
 * nor the kernel's, its traffic to this MAC counted and its senders
 * remembered in "stale" (see linger). vip takes the entry out when the
 * linger ends. */
#define HELD_LINGER 4

/* MAX_STALE bounds the senders remembered of the lingering addresses of
 * one interface; beyond it the least recently seen make room. Their
 * address's counters stay exact. */
#define MAX_STALE 4096

/* DROP_FRAME is what respond returns for a request to drop: one for an
 * address the kernel answers for, past the deadline. */
#define DROP_FRAME 0xffffffffU

/* held_key names an address on an interface: an IPv4 address as its
 * IPv4-mapped form, ::ffff:a.b.c.d (Go's netip.Addr.As16), with family
 * telling it from the IPv6 address of the same bytes. */
struct held_key {
	__u32 ifindex;
	__u8 family;
	__u8 pad[3];
	__u8 addr[16];
};

/* held_value is how to answer for an address: from which MAC. */
struct held_value {
	__u8 mac[6];
	__u16 flags;
};

/* asker_key names one asker of a held address: the address asked for,
 * then the address the asker asked from (IPv4-mapped for ARP; 0.0.0.0 for
 * a probe, :: for duplicate address detection) and its link-layer address
 * (the ARP sender's, a solicitation's source link-layer option, or else
 * its Ethernet source): sniff's Observation.Asker. */
struct asker_key {
	struct held_key target;
	__u8 from[16];
	__u8 mac[6];
	__u8 flags;
	__u8 pad;
};

/* asker_value is what the program knows of an asker: how many of its
 * requests it answered, and when it answered the latest
 * (bpf_ktime_get_ns, CLOCK_MONOTONIC). */
struct asker_value {
	__u64 requests;
	__u64 last_ns;
};

/* counters are one CPU's counts for a held address; for a lingering one,
 * last_ns is when the latest packet counted came (bpf_ktime_get_ns). */
struct counters {
	__u64 answered;
	__u64 packets;
	__u64 bytes;
	__u64 last_ns;
};

/* scratch is one CPU's working memory: the frame, with room past SCRATCH
 * so that a masked offset plus some bytes (an option's address, the rest
 * of a frame after its IPv6 header) stays inside it, and the state of the loops over it. The loops run in
 * bpf_loop and keep their state here, in map memory, whose contents the
 * verifier does not track: it checks one step of each, instead of every
 * path through every step (on the stack the state would be tracked
 * precisely, and no two steps would look alike). */
struct scratch {
	__u8 b[ICMP6_OFF + SCRATCH];
	/* The option walk (wire's linkLayerOption), from off to end: lla is
	 * where the first source link-layer address starts, bad says the
	 * options are malformed. */
	__u32 off, end, lla, bad;
	/* The checksum of the ICMPv6 message, to end. */
	__u32 sum;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_HELD);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct held_key);
	__type(value, struct held_value);
} held SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_HELD);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct held_key);
	__type(value, struct counters);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_ASKERS);
	__type(key, struct asker_key);
	__type(value, struct asker_value);
} askers SEC(".maps");

/* stale remembers who sent to a lingering address: an asker_key whose
 * from and mac are the packet's source, and requests counts its packets. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_STALE);
	__type(key, struct asker_key);
	__type(value, struct asker_value);
} stale SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

/* deadline holds the agent's answer deadline, in nanoseconds of
 * CLOCK_BOOTTIME (bpf_ktime_get_boot_ns); 0, as it is loaded, for an agent
 * whose claims no lease guards, which answers without one. One for the
 * whole program, not one per address: one lease guards every claim of an
 * agent, and a renewal is then one write, not one per held address. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} deadline SEC(".maps");

/* withheld counts, per CPU, the requests left unanswered because the
 * deadline had passed. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} withheld SEC(".maps");

/* budget is one CPU's count of the new askers it may still remember in
 * the window that began at since (see NEW_ASKERS). */
struct budget {
	__u64 since;
	__u64 left;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct budget);
} budget SEC(".maps");

/* opaque hides v's value from clang. Before a bounds check it keeps the
 * check, which clang could prove redundant and drop; after it, it makes
 * clang use the register checked, not a copy taken before, which the
 * verifier knows no bounds of. */
#define opaque(v) asm volatile("" : "+r"(v))

static __always_inline void copy(__u8 *dst, const __u8 *src, int n)
{
#pragma unroll
	for (int i = 0; i < n; i++)
		dst[i] = src[i];
}

static __always_inline int same_mac(const __u8 *a, const __u8 *b)
{
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3] && a[4] == b[4] && a[5] == b[5];
}

/* usable_unicast is announce.usableUnicast: not group, not all zero. */
static __always_inline int usable_unicast(const __u8 *m)
{
	return !(m[0] & 1) && (m[0] | m[1] | m[2] | m[3] | m[4] | m[5]);
}

static __always_inline int same_ip6(const __u8 *a, const __u8 *b)
{
#pragma unroll
	for (int i = 0; i < 16; i++)
		if (a[i] != b[i])
			return 0;
	return 1;
}

/* is_solicited_node is wire.IsSolicitedNode: ff02::1:ffXX:XXXX. */
static __always_inline int is_solicited_node(const __u8 *a)
{
	if (a[0] != 0xff || a[1] != 0x02 || a[11] != 0x01 || a[12] != 0xff)
		return 0;
#pragma unroll
	for (int i = 2; i < 11; i++)
		if (a[i])
			return 0;
	return 1;
}

/* sum16 adds n bytes of b, as 16-bit big-endian words, to a ones'-complement
 * sum (not yet folded). */
static __always_inline __u32 sum16(__u32 sum, const __u8 *b, int n)
{
#pragma unroll
	for (int i = 0; i + 1 < n; i += 2)
		sum += (__u32)b[i] << 8 | b[i + 1];
	return sum;
}

static __always_inline __u16 fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return sum;
}

static __always_inline void count(struct held_key *k, __u64 answered, __u64 bytes)
{
	struct counters *c = bpf_map_lookup_elem(&counters, k);
	if (!c)
		return;
	if (answered)
		c->answered++;
	else {
		c->packets++;
		c->bytes += bytes;
	}
}

/* linger counts a packet of bytes for the lingering address a->target,
 * sent from a->from and a->mac, with its sender. */
static __always_inline void linger(struct asker_key *a, __u64 bytes)
{
	__u64 now = bpf_ktime_get_ns();
	struct counters *c = bpf_map_lookup_elem(&counters, &a->target);
	if (c) {
		c->packets++;
		c->bytes += bytes;
		c->last_ns = now;
	}
	struct asker_value *v = bpf_map_lookup_elem(&stale, a);
	if (v) {
		__sync_fetch_and_add(&v->requests, 1);
		v->last_ns = now;
		return;
	}
	struct asker_value fresh = { .requests = 1, .last_ns = now };
	if (bpf_map_update_elem(&stale, a, &fresh, BPF_NOEXIST)) {
		v = bpf_map_lookup_elem(&stale, a);
		if (v)
			__sync_fetch_and_add(&v->requests, 1);
	}
}

/* count_traffic counts a packet arriving for a held or lingering address:
 * the destination of the IPv4 or IPv6 packet in f (family), of bytes. For
 * a lingering one only a packet sent to this interface's MAC counts (a
 * bridge floods others to every port, and a capture in promiscuous mode
 * lets them in), with its sender. */
static __always_inline void count_traffic(__u32 ifindex, __u8 family, const __u8 *f, __u64 bytes)
{
	struct asker_key a = {};
	a.target.ifindex = ifindex;
	a.target.family = family;
	if (family == FAMILY_IPV4) {
		a.target.addr[10] = 0xff;
		a.target.addr[11] = 0xff;
		copy(&a.target.addr[12], &f[30], 4);
	} else {
		copy(a.target.addr, &f[38], 16);
	}
	struct held_value *h = bpf_map_lookup_elem(&held, &a.target);
	if (!h)
		return;
	if (!(h->flags & HELD_LINGER)) {
		count(&a.target, 0, bytes);
		return;
	}
	if (!same_mac(f, h->mac))
		return;
	if (family == FAMILY_IPV4) {
		a.from[10] = 0xff;
		a.from[11] = 0xff;
		copy(&a.from[12], &f[26], 4);
	} else {
		copy(a.from, &f[22], 16);
	}
	copy(a.mac, &f[6], 6);
	linger(&a, bytes);
}

/* add_to adds one request at now to the entry of a, which must exist. */
static __always_inline int add_to(struct asker_key *a, __u64 now)
{
	struct asker_value *v = bpf_map_lookup_elem(&askers, a);
	if (!v)
		return 0;
	__sync_fetch_and_add(&v->requests, 1);
	v->last_ns = now;
	return 1;
}

/* may_remember takes one of this CPU's new askers for the window of now. */
static __always_inline int may_remember(__u64 now)
{
	__u32 zero = 0;
	struct budget *b = bpf_map_lookup_elem(&budget, &zero);
	if (!b)
		return 0;
	if (now - b->since >= NEW_ASKERS_WINDOW_NS) {
		b->since = now;
		b->left = NEW_ASKERS;
	}
	if (!b->left)
		return 0;
	b->left--;
	return 1;
}

/* record counts one answered request of the asker a: in a's own entry,
 * made if need be while this CPU's budget of new askers lasts, else in
 * its address's OTHERS entry. Two CPUs may add the same new entry at
 * once: the one that loses adds to the winner's. */
static __always_inline void record(struct asker_key *a)
{
	__u64 now = bpf_ktime_get_ns();
	if (add_to(a, now))
		return;
	struct asker_value fresh = { .requests = 1, .last_ns = now };
	if (may_remember(now)) {
		if (!bpf_map_update_elem(&askers, a, &fresh, BPF_NOEXIST) || add_to(a, now))
			return;
	}
	__builtin_memset(a->from, 0, sizeof(a->from));
	__builtin_memset(a->mac, 0, sizeof(a->mac));
	a->flags = ASKER_OTHERS;
	if (add_to(a, now))
		return;
	if (!bpf_map_update_elem(&askers, a, &fresh, BPF_NOEXIST))
		return;
	add_to(a, now);
}

/* past_deadline says whether the agent's answer deadline has passed, and
 * counts the request withheld if so. The clock is CLOCK_BOOTTIME, which
 * keeps counting while the machine is suspended (or a virtual machine is
 * paused as a suspend): CLOCK_MONOTONIC (bpf_ktime_get_ns) stops then, so
 * a host that slept past its lease would wake with its deadline still
 * ahead on that clock and answer for addresses another node holds by then.
 * The agent reads the same clock (unix.CLOCK_BOOTTIME) to set it. */
static __always_inline int past_deadline(void)
{
	__u32 zero = 0;
	__u64 *d = bpf_map_lookup_elem(&deadline, &zero);
	if (!d || !*d || bpf_ktime_get_boot_ns() < *d)
		return 0;
	__u64 *w = bpf_map_lookup_elem(&withheld, &zero);
	if (w)
		(*w)++;
	return 1;
}

/* answerable returns how to answer for an address whose held entry is v
 * (0 when it has none), or 0 when the program does not answer for it;
 * *kernel says the kernel answers for it instead. */
static __always_inline struct held_value *answerable(struct held_value *v, int *kernel)
{
	*kernel = v && (v->flags & HELD_KERNEL) && !(v->flags & HELD_ANSWER);
	if (!v || !(v->flags & (HELD_ANSWER | HELD_KERNEL)))
		return 0;
	return v;
}

/* answer_arp turns an ARP request for a held address, in f, into its reply
 * (announce's answerARP) and returns the reply's length, or 0 when the frame
 * is not answered. n is how many bytes of the frame f holds, len how long
 * the frame is. */
static __always_inline __u32 answer_arp(__u8 *f, __u32 n, __u32 len, __u32 ifindex, struct asker_key *ak)
{
	struct held_key *k = &ak->target;
	if (n < ARP_FRAME_LEN)
		return 0; /* truncated */
	/* Ethernet and IPv4, addresses of 6 and 4 bytes, a request (a reply
	 * is not ours to answer, another operation is malformed). */
	if (f[14] != 0 || f[15] != 1 || f[16] != 0x08 || f[17] != 0 || f[18] != 6 || f[19] != 4 || f[20] != 0 || f[21] != 1)
		return 0;
	k->ifindex = ifindex;
	k->family = FAMILY_IPV4;
	k->addr[10] = 0xff;
	k->addr[11] = 0xff;
	copy(&k->addr[12], &f[38], 4);
	struct held_value *l = bpf_map_lookup_elem(&held, k);
	if (l && (l->flags & HELD_LINGER)) {
		/* A request sent to this MAC for a lingering address is a
		 * stale cache checking it (Linux's unicast probe): counted,
		 * not answered. A broadcast one every node hears. */
		if (same_mac(f, l->mac)) {
			ak->from[10] = 0xff;
			ak->from[11] = 0xff;
			copy(&ak->from[12], &f[28], 4);
			copy(ak->mac, &f[22], 6);
			linger(ak, len);
		}
		return 0;
	}
	int kernel;
	struct held_value *h = answerable(l, &kernel);
	if (!h)
		return 0;
	__u8 me[6];
	copy(me, h->mac, 6);
	if (same_mac(&f[22], me) || same_mac(&f[6], me))
		return 0; /* our own announcement */
	if (f[28] == f[38] && f[29] == f[39] && f[30] == f[40] && f[31] == f[41])
		return 0; /* another node's announcement: a competing claim, for the capture (see answerARP) */
	if (past_deadline())
		return kernel ? DROP_FRAME : 0;
	if (kernel)
		return 0; /* the kernel's to answer */
	/* A probe (sender IP 0.0.0.0) gets the same reply. */
	__u8 sender_mac[6], sender_ip[4];
	copy(sender_mac, &f[22], 6);
	copy(sender_ip, &f[28], 4);
	ak->from[10] = 0xff;
	ak->from[11] = 0xff;
	copy(&ak->from[12], sender_ip, 4);
	copy(ak->mac, sender_mac, 6);
	if (usable_unicast(sender_mac))
		copy(&f[0], sender_mac, 6);
	else
		copy(&f[0], &f[6], 6);
	copy(&f[6], me, 6);
	f[21] = 2;
	copy(&f[22], me, 6);
	copy(&f[28], &f[38], 4);
	copy(&f[32], sender_mac, 6);
	copy(&f[38], sender_ip, 4);
	return ARP_FRAME_LEN;
}

static __always_inline struct scratch *scratch_of_cpu(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&scratch, &zero);
}

/* walk_option is one step of the option walk (see struct scratch). */
static long walk_option(__u64 i, void *ctx)
{
	struct scratch *s = scratch_of_cpu();
	if (!s || s->off >= s->end)
		return 1;
	__u32 off = s->off, end = s->end;
	if (end - off < 2) {
		s->bad = 1;
		return 1;
	}
	__u32 olen = (__u32)s->b[(off + 1) & MASK] * 8;
	if (olen == 0 || olen > end - off) {
		s->bad = 1;
		return 1;
	}
	if (s->b[off & MASK] == 1 && !s->lla)
		s->lla = off + 2;
	s->off = off + olen;
	return 0;
}

/* csum_step adds eight bytes of the ICMPv6 message to the checksum. */
static long csum_step(__u64 i, void *ctx)
{
	struct scratch *s = scratch_of_cpu();
	if (!s)
		return 1;
	__u32 o = ICMP6_OFF + (__u32)i * 8, end = s->end, sum = s->sum;
#pragma unroll
	for (int j = 0; j < 8; j += 2) {
		__u32 at = o + j;
		if (at + 1 < end)
			sum += (__u32)s->b[at & MASK] << 8 | s->b[(at + 1) & MASK];
		else if (at < end)
			sum += (__u32)s->b[at & MASK] << 8; /* an odd last byte */
	}
	s->sum = sum;
	return o + 8 >= end;
}

/* answer_ns turns a neighbor solicitation for a held address, in s, into
 * the advertisement that answers it, in place (announce's answerNS, with Parse's RFC
 * 4861 checks) and returns its length, or 0 when the frame is not answered.
 * n is how many bytes of the frame s holds, len how long the frame is. */
static __always_inline __u32 answer_ns(struct scratch *s, __u32 n, __u32 len, __u32 ifindex, struct asker_key *ak)
{
	struct held_key *k = &ak->target;
	__u8 *f = s->b;
	if (n < ICMP6_OFF || f[14] >> 4 != 6)
		return 0;
	__u32 plen = (__u32)f[18] << 8 | f[19];
	__u32 end = ICMP6_OFF + plen;
	if (plen == 0 || end > len)
		return 0; /* a jumbogram, or truncated */
	if (end > n)
		return 0; /* longer than SCRATCH: see there */
	/* ICMPv6 right after the IPv6 header, a solicitation, hop limit 255,
	 * code 0, room for the target. */
	if (f[20] != 58 || plen < 24 || f[54] != 135 || f[21] != 255 || f[55] != 0)
		return 0;
	const __u8 *src = &f[22], *dst = &f[38], *target = &f[62];
	if (target[0] == 0xff)
		return 0; /* multicast target */
	if (target[10] == 0xff && target[11] == 0xff &&
	    !(target[0] | target[1] | target[2] | target[3] | target[4] | target[5] | target[6] | target[7] | target[8] | target[9]))
		return 0; /* IPv4-mapped target */
	/* Every option is checked; the first source link-layer address
	 * option is the one used. */
	s->off = NS_MIN_END, s->end = end, s->lla = 0, s->bad = 0;
	bpf_loop((SCRATCH - NS_MIN_END) / 8 + 1, walk_option, 0, 0);
	if (s->bad || s->off < end)
		return 0;
	__u32 lla = s->lla;
	int dad = !(src[0] | src[1] | src[2] | src[3] | src[4] | src[5] | src[6] | src[7] | src[8] | src[9] | src[10] |
		    src[11] | src[12] | src[13] | src[14] | src[15]);
	if (dad && (!is_solicited_node(dst) || lla))
		return 0;

	k->ifindex = ifindex;
	k->family = FAMILY_IPV6;
	copy(k->addr, target, 16);
	int kernel;
	struct held_value *h = answerable(bpf_map_lookup_elem(&held, k), &kernel);
	if (!h)
		return 0; /* a lingering one's NUD solicitation is traffic, counted */
	__u8 me[6];
	copy(me, h->mac, 6);
	if (same_mac(&f[6], me))
		return 0;
	/* Only a solicitation to the target's own group, or straight to the
	 * target (NUD), asks about it. */
	if (!same_ip6(dst, target) &&
	    !(is_solicited_node(dst) && dst[13] == target[13] && dst[14] == target[14] && dst[15] == target[15]))
		return 0;

	/* The checksum last: it is the costliest check. */
	s->sum = sum16(0, src, 32) + plen + 58;
	bpf_loop(SCRATCH / 8, csum_step, 0, 0);
	if (fold(s->sum) != 0xffff)
		return 0;
	if (past_deadline())
		return kernel ? DROP_FRAME : 0;
	if (kernel)
		return 0; /* the kernel's to answer */

	/* The asker, before the frame becomes the answer. */
	copy(ak->from, src, 16);
	if (lla)
		copy(ak->mac, &f[lla & MASK], 6);
	else
		copy(ak->mac, &f[6], 6);

	__u8 dst_mac[6], dst_ip[16];
	__u8 solicited = 0;
	__u32 sum;
	if (dad) {
		/* Defend the address: tell all nodes, the prober has none. */
		dst_mac[0] = 0x33, dst_mac[1] = 0x33, dst_mac[2] = 0, dst_mac[3] = 0, dst_mac[4] = 0, dst_mac[5] = 1;
		dst_ip[0] = 0xff, dst_ip[1] = 0x02;
#pragma unroll
		for (int i = 2; i < 15; i++)
			dst_ip[i] = 0;
		dst_ip[15] = 1;
	} else {
		solicited = 1;
		copy(dst_ip, src, 16);
		if (lla && usable_unicast(&f[lla & MASK]))
			copy(dst_mac, &f[lla & MASK], 6);
		else
			copy(dst_mac, &f[6], 6);
	}

	/* The advertisement: wire.Advertisement through wire.PutND. */
	copy(&f[0], dst_mac, 6);
	copy(&f[6], me, 6);
	f[12] = 0x86, f[13] = 0xdd;
	f[14] = 0x60, f[15] = 0, f[16] = 0, f[17] = 0;
	f[18] = 0, f[19] = NA_FRAME_LEN - ICMP6_OFF;
	f[20] = 58, f[21] = 255;
	copy(&f[22], target, 16); /* the source is the target, in place */
	copy(&f[38], dst_ip, 16);
	f[54] = 136, f[55] = 0, f[56] = 0, f[57] = 0;
	f[58] = solicited ? 0x60 : 0x20; /* override, and solicited */
	f[59] = 0, f[60] = 0, f[61] = 0;
	/* f[62..78] is the target already. */
	f[78] = 2, f[79] = 1;
	copy(&f[80], me, 6);
	sum = sum16(0, &f[22], 32) + (NA_FRAME_LEN - ICMP6_OFF) + 58;
	sum = sum16(sum, &f[ICMP6_OFF], NA_FRAME_LEN - ICMP6_OFF);
	__u16 check = ~fold(sum);
	f[56] = check >> 8, f[57] = check;
	return NA_FRAME_LEN;
}

/* respond reads the frame of ctx (len bytes on ifindex), counts it and
 * builds the answer to it in the scratch buffer. It returns the answer's
 * length, or 0 for a frame to pass on; *out is the buffer, *ak the asker
 * and the answered address. xdp says which program calls it, so that the
 * helpers fit ctx. */
static __always_inline __u32 respond(void *ctx, int xdp, __u32 len, __u32 ifindex, __u8 **out, struct asker_key *ak)
{
	struct scratch *s = scratch_of_cpu();
	if (!s || len < ETH_LEN)
		return 0;
	__u8 *f = s->b;
	__u64 n = len < ICMP6_OFF ? len : ICMP6_OFF; /* 64 bits: see rest */
	opaque(n);
	if (n < ETH_LEN || n > ICMP6_OFF)
		return 0;
	opaque(n);
	long err = xdp ? bpf_xdp_load_bytes(ctx, 0, f, n) : bpf_skb_load_bytes(ctx, 0, f, n);
	if (err)
		return 0;
	__u16 type = (__u16)f[12] << 8 | f[13];
	if (type == 0x0800) {
		if (n >= ETH_LEN + 20 && f[14] >> 4 == 4)
			count_traffic(ifindex, FAMILY_IPV4, f, len);
		return 0;
	}
	*out = f;
	if (type == 0x0806)
		return answer_arp(f, n, len, ifindex, ak); /* n holds all of it */
	if (type != 0x86dd || n < ICMP6_OFF || f[14] >> 4 != 6)
		return 0;
	count_traffic(ifindex, FAMILY_IPV6, f, len);
	if (f[20] != 58 || len <= ICMP6_OFF)
		return 0;
	/* A solicitation, perhaps: read the rest. */
	n = len < SCRATCH ? len : SCRATCH;
	__u64 rest = (__u64)n - ICMP6_OFF; /* 64 bits: no zero-extended copy */
	opaque(rest);
	if (rest < 1 || rest > SCRATCH - ICMP6_OFF)
		return 0;
	opaque(rest);
	err = xdp ? bpf_xdp_load_bytes(ctx, ICMP6_OFF, &f[ICMP6_OFF], rest) : bpf_skb_load_bytes(ctx, ICMP6_OFF, &f[ICMP6_OFF], rest);
	if (err)
		return 0;
	return answer_ns(s, n, len, ifindex, ak);
}

SEC("tc")
int vip_tc(struct __sk_buff *skb)
{
	/* A tagged frame is the VLAN interface's to answer: the responder
	 * reads untagged frames (wire's Answer mode). */
	if (skb->vlan_present)
		return TC_ACT_OK;
	__u8 *f = 0;
	struct asker_key ak = {};
	__u32 ifindex = skb->ifindex;
	__u32 rlen = respond(skb, 0, skb->len, ifindex, &f, &ak);
	if (rlen == DROP_FRAME)
		return TC_ACT_SHOT;
	if (!rlen || !f)
		return TC_ACT_OK;
	if (bpf_skb_change_tail(skb, rlen, 0))
		return TC_ACT_OK;
	/* The frame is cut or grown now: if the answer cannot be written,
	 * neither can the request pass on as it was. */
	if (bpf_skb_store_bytes(skb, 0, f, rlen, 0))
		return TC_ACT_SHOT;
	count(&ak.target, 1, 0);
	record(&ak);
	return bpf_redirect(ifindex, 0);
}

SEC("xdp")
int vip_xdp(struct xdp_md *ctx)
{
	__u8 *f = 0;
	struct asker_key ak = {};
	__u32 len = ctx->data_end - ctx->data;
	__u32 rlen = respond(ctx, 1, len, ctx->ingress_ifindex, &f, &ak);
	if (rlen == DROP_FRAME)
		return XDP_DROP;
	if (!rlen || !f)
		return XDP_PASS;
	if (rlen != len && bpf_xdp_adjust_tail(ctx, (int)rlen - (int)len))
		return XDP_PASS;
	if (bpf_xdp_store_bytes(ctx, 0, f, rlen))
		return XDP_DROP;
	count(&ak.target, 1, 0);
	record(&ak);
	return XDP_TX;
}
