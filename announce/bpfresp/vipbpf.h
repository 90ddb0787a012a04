/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * vipbpf.h is what responder.c needs of the kernel's BPF interface, and no
 * more: fixed-size types, the two program contexts, the map definition
 * macros and the helpers it calls. It stands in for linux/bpf.h and
 * libbpf's bpf_helpers.h so that compiling needs clang alone (no kernel or
 * libbpf headers, whose asm/ includes differ between distributions). The
 * context structs are the kernel's UAPI layout up to the last field read;
 * the verifier checks every access against the real one.
 */
#ifndef VIPBPF_H
#define VIPBPF_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef int __s32;

/* struct __sk_buff of linux/bpf.h, up to ifindex. */
struct __sk_buff {
	__u32 len;
	__u32 pkt_type;
	__u32 mark;
	__u32 queue_mapping;
	__u32 protocol;
	__u32 vlan_present;
	__u32 vlan_tci;
	__u32 vlan_proto;
	__u32 priority;
	__u32 ingress_ifindex;
	__u32 ifindex;
};

/* struct xdp_md of linux/bpf.h, up to ingress_ifindex. */
struct xdp_md {
	__u32 data;
	__u32 data_end;
	__u32 data_meta;
	__u32 ingress_ifindex;
};

enum {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_HASH = 5,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
};

#define BPF_NOEXIST 1

#define BPF_F_NO_PREALLOC (1U << 0)

#define TC_ACT_OK 0
#define TC_ACT_SHOT 2
#define TC_ACT_REDIRECT 7

#define XDP_DROP 1
#define XDP_PASS 2
#define XDP_TX 3

/* Map definitions in the BTF style libbpf and cilium/ebpf read. */
#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) __typeof__(val) *name

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

/* Helpers, by their number in enum bpf_func_id. */
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value, __u64 flags) = (void *)2;
static __u64 (*bpf_ktime_get_ns)(void) = (void *)5;
static long (*bpf_skb_store_bytes)(struct __sk_buff *skb, __u32 offset, const void *from, __u32 len, __u64 flags) = (void *)9;
static long (*bpf_redirect)(__u32 ifindex, __u64 flags) = (void *)23;
static long (*bpf_skb_load_bytes)(const void *skb, __u32 offset, void *to, __u32 len) = (void *)26;
static long (*bpf_skb_change_tail)(struct __sk_buff *skb, __u32 len, __u64 flags) = (void *)38;
static long (*bpf_xdp_adjust_tail)(struct xdp_md *xdp_md, int delta) = (void *)65;
static __u64 (*bpf_ktime_get_boot_ns)(void) = (void *)125;
static long (*bpf_loop)(__u32 nr_loops, void *callback_fn, void *callback_ctx, __u64 flags) = (void *)181;
static long (*bpf_xdp_load_bytes)(struct xdp_md *xdp_md, __u32 offset, void *buf, __u32 len) = (void *)189;
static long (*bpf_xdp_store_bytes)(struct xdp_md *xdp_md, __u32 offset, void *buf, __u32 len) = (void *)190;

#endif
