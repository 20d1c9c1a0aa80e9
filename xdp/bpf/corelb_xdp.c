// corelb's XDP L4 data path: packets for a VIP are sent to a real server chosen by the control plane's lookup
// table (direct server return: the destination MAC rewritten; NAT: addresses rewritten both ways). Everything
// else (not IPv4, IP options, fragments, not TCP or UDP, not for a VIP) passes to the kernel untouched.
//
// The kernel asks a GPL-compatible license of a program that calls bpf_fib_lookup (NAT's next hop).
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define MAX_VIPS 8
#define TABLE_SIZE 65537
#define MAX_REALS 1024
#define MAX_FLOWS 262144

#define VIP_NAT 1      // rewrite addresses both ways (else direct server return)
#define VIP_HASH_SRC 2 // the flow's hash is its source address's alone
#define VIP_SEQ 4      // the table is walked in turn (weighted round robin), not hashed into
#define VIP_LEAST 8    // weighted least connections: the table lists the live reals (weight << 16 | id)

#define LEAST_MAX 64   // the reals a least-connections VIP chooses among

#define FLOW_CLOSED 1  // the client sent FIN or RST (its real's active count was given back)
#define FLOW_COUNTED 2 // the flow counts in its real's active flows (least connections)

#define AF_INET 2

struct vip_key {
    __u32 addr;
    __u16 port;
    __u8 proto;
    __u8 pad;
};

struct vip_meta {
    __u32 index;      // the VIP's number: its round-robin counter
    __u32 flags;      // VIP_*
    __u32 table_len;  // slots in use (0: no live real server)
    __u32 table_base; // where its current table starts in `tables`
    __u64 timeout_ns; // a flow idle longer is scheduled again
    __u8 mac[6];      // the device's own address (the source of a direct-return frame)
    __u8 pad[2];
};

struct real {
    __u32 addr;
    __u16 port;
    __u8 mac[6];
    __u32 flags;
};

struct flow_key {
    __u32 src;
    __u32 dst;
    __u16 sport;
    __u16 dport;
    __u8 proto;
    __u8 pad[3];
};

struct flow {
    __u32 real;
    __u32 state; // FLOW_*
    __u64 seen_ns;
};

struct nat_back {
    __u32 vip_addr;
    __u16 vip_port;
    __u16 pad;
    __u32 real;
    __u32 pad2;
};

struct counters {
    __u64 packets;
    __u64 bytes;
    __u64 flows;
};

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, MAX_VIPS);
    __type(key, struct vip_key);
    __type(value, struct vip_meta);
} vips SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, MAX_VIPS * 2 * TABLE_SIZE);
    __type(key, __u32);
    __type(value, __u32);
} tables SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, MAX_REALS);
    __type(key, __u32);
    __type(value, struct real);
} reals SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, MAX_FLOWS);
    __type(key, struct flow_key);
    __type(value, struct flow);
} flows SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, MAX_FLOWS);
    __type(key, struct flow_key);
    __type(value, struct nat_back);
} nat_flows SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, MAX_REALS);
    __type(key, __u32);
    __type(value, struct counters);
} stats SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, MAX_VIPS);
    __type(key, __u32);
    __type(value, __u32);
} turns SEC(".maps");

// Each real server's active flows (least connections; the control plane recounts them from `flows` now and then,
// for flows the LRU evicted or that ended without a FIN).
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, MAX_REALS);
    __type(key, __u32);
    __type(value, __s64);
} active SEC(".maps");

static __always_inline void active_add(__u32 real, __s64 n) {
    __s64 *a = bpf_map_lookup_elem(&active, &real);
    if (a)
        __sync_fetch_and_add(a, n);
}

// The live real with the fewest active flows for its weight (LVS's wlc): a / w least, the first on a tie.
static __always_inline int least(const struct vip_meta *vip, __u32 len, __u32 *out) {
    __u32 best = 0xffffffff;
    __u64 best_a = 0, best_w = 1;
    for (__u32 i = 0; i < LEAST_MAX; i++) {
        if (i >= len)
            break;
        __u32 at = vip->table_base + i;
        __u32 *e = bpf_map_lookup_elem(&tables, &at);
        if (!e)
            break;
        __u32 id = *e & 0xffff;
        __u64 w = *e >> 16;
        __s64 *a = bpf_map_lookup_elem(&active, &id);
        __u64 av = (a && *a > 0) ? (__u64)*a : 0;
        if (best == 0xffffffff || av * best_w < best_a * w) {
            best = id;
            best_a = av;
            best_w = w;
        }
    }
    *out = best;
    return best != 0xffffffff;
}

// Whether a TCP segment carries FIN or RST.
static __always_inline int tcp_ends(struct iphdr *ip, void *l4, void *end) {
    if (ip->protocol != IPPROTO_TCP || l4 + 14 > end)
        return 0;
    __u8 flags = *((__u8 *)l4 + 13);
    return flags & 0x05;
}

// murmur3's finalizer; corelb_xdp::flow_hash in Rust is the same function.
static __always_inline __u32 fmix(__u32 h) {
    h ^= h >> 16;
    h *= 0x85ebca6b;
    h ^= h >> 13;
    h *= 0xc2b2ae35;
    h ^= h >> 16;
    return h;
}

static __always_inline __u32 flow_hash(const struct flow_key *k, __u32 flags) {
    __u32 h = fmix(k->src);
    if (flags & VIP_HASH_SRC)
        return h;
    h = fmix(h ^ k->dst);
    h = fmix(h ^ (((__u32)k->sport << 16) | k->dport));
    return fmix(h ^ k->proto);
}

// RFC 1624's incremental update of a one's complement sum for one 16-bit word.
static __always_inline void csum_update16(__u16 *sum, __u16 from, __u16 to) {
    __u32 c = (__u16)~*sum;
    c += (__u16)~from;
    c += to;
    c = (c & 0xffff) + (c >> 16);
    c = (c & 0xffff) + (c >> 16);
    *sum = ~c;
}

static __always_inline void csum_update32(__u16 *sum, __u32 from, __u32 to) {
    csum_update16(sum, from >> 16, to >> 16);
    csum_update16(sum, from & 0xffff, to & 0xffff);
}

// The L4 checksum's place, or NULL when the header is cut short (UDP's 0 means none: nothing to update).
static __always_inline __u16 *l4_csum(struct iphdr *ip, void *l4, void *end) {
    if (ip->protocol == IPPROTO_TCP) {
        if (l4 + 18 > end)
            return NULL;
        return l4 + 16;
    }
    if (l4 + 8 > end)
        return NULL;
    __u16 *c = l4 + 6;
    return *c ? c : NULL;
}

static __always_inline void count(__u32 real, __u64 bytes, __u64 new_flow) {
    struct counters *c = bpf_map_lookup_elem(&stats, &real);
    if (c) {
        c->packets++;
        c->bytes += bytes;
        c->flows += new_flow;
    }
}

// Sends a rewritten packet on to its destination's next hop (NAT); the kernel routes it when the lookup cannot.
static __always_inline int forward(struct xdp_md *ctx, struct ethhdr *eth, struct iphdr *ip) {
    struct bpf_fib_lookup p = {};
    p.family = AF_INET;
    p.tos = ip->tos;
    p.l4_protocol = ip->protocol;
    p.tot_len = bpf_ntohs(ip->tot_len);
    p.ipv4_src = ip->saddr;
    p.ipv4_dst = ip->daddr;
    p.ifindex = ctx->ingress_ifindex;
    if (bpf_fib_lookup(ctx, &p, sizeof(p), 0) != BPF_FIB_LKUP_RET_SUCCESS)
        return XDP_PASS;
    __builtin_memcpy(eth->h_dest, p.dmac, ETH_ALEN);
    __builtin_memcpy(eth->h_source, p.smac, ETH_ALEN);
    if (p.ifindex == ctx->ingress_ifindex)
        return XDP_TX;
    return bpf_redirect(p.ifindex, 0);
}

// A packet that is not for a VIP: a NAT reply from a real server gets the VIP back as its source.
static __always_inline int nat_reply(struct xdp_md *ctx, struct ethhdr *eth, struct iphdr *ip, __u16 *ports,
                                     void *end) {
    struct flow_key k = {
        .src = ip->saddr, .dst = ip->daddr, .sport = ports[0], .dport = ports[1], .proto = ip->protocol};
    struct nat_back *b = bpf_map_lookup_elem(&nat_flows, &k);
    if (!b)
        return XDP_PASS;
    __u16 *l4sum = l4_csum(ip, ports, end);
    csum_update32(&ip->check, ip->saddr, b->vip_addr);
    if (l4sum) {
        csum_update32(l4sum, ip->saddr, b->vip_addr);
        csum_update16(l4sum, ports[0], b->vip_port);
    }
    ip->saddr = b->vip_addr;
    ports[0] = b->vip_port;
    count(b->real, (__u64)(end - (void *)eth), 0);
    return forward(ctx, eth, ip);
}

SEC("xdp")
int corelb_xdp(struct xdp_md *ctx) {
    void *data = (void *)(long)ctx->data;
    void *end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data;
    if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
        return XDP_PASS;
    struct iphdr *ip = (void *)(eth + 1);
    if ((void *)(ip + 1) > end || ip->ihl != 5)
        return XDP_PASS;
    // more fragments, or an offset: only the whole datagram's first packet has ports
    if (ip->frag_off & bpf_htons(0x3fff))
        return XDP_PASS;
    if (ip->protocol != IPPROTO_TCP && ip->protocol != IPPROTO_UDP)
        return XDP_PASS;
    __u16 *ports = (void *)(ip + 1);
    if ((void *)(ports + 2) > end)
        return XDP_PASS;

    struct vip_key vk = {.addr = ip->daddr, .port = ports[1], .proto = ip->protocol};
    struct vip_meta *vip = bpf_map_lookup_elem(&vips, &vk);
    if (!vip)
        return nat_reply(ctx, eth, ip, ports, end);

    struct flow_key fk = {
        .src = ip->saddr, .dst = ip->daddr, .sport = ports[0], .dport = ports[1], .proto = ip->protocol};
    __u64 now = bpf_ktime_get_ns();
    __u64 new_flow = 0;
    __u32 real_id;
    struct flow *f = bpf_map_lookup_elem(&flows, &fk);
    if (f && now - f->seen_ns < vip->timeout_ns) {
        real_id = f->real;
        if (now - f->seen_ns > 1000000000ULL)
            f->seen_ns = now;
        if ((f->state & (FLOW_COUNTED | FLOW_CLOSED)) == FLOW_COUNTED && tcp_ends(ip, ports, end)) {
            f->state |= FLOW_CLOSED;
            active_add(real_id, -1);
        }
    } else {
        // a flow that timed out gives its count back
        if (f && (f->state & (FLOW_COUNTED | FLOW_CLOSED)) == FLOW_COUNTED)
            active_add(f->real, -1);
        __u32 len = vip->table_len;
        if (len == 0 || len > TABLE_SIZE)
            return XDP_PASS;
        __u32 slot = 0;
        __u32 state = 0;
        if (vip->flags & VIP_LEAST) {
            if (!least(vip, len, &real_id))
                return XDP_PASS;
            active_add(real_id, 1);
            state = FLOW_COUNTED;
            goto scheduled;
        }
        if (vip->flags & VIP_SEQ) {
            __u32 vi = vip->index;
            __u32 *turn = bpf_map_lookup_elem(&turns, &vi);
            if (!turn)
                return XDP_PASS;
            slot = *turn % len;
            *turn = slot + 1;
        } else {
            slot = flow_hash(&fk, vip->flags) % len;
        }
        __u32 at = vip->table_base + slot;
        __u32 *r = bpf_map_lookup_elem(&tables, &at);
        if (!r)
            return XDP_PASS;
        real_id = *r;
    scheduled:;
        struct flow nf = {.real = real_id, .state = state, .seen_ns = now};
        bpf_map_update_elem(&flows, &fk, &nf, BPF_ANY);
        new_flow = 1;
    }
    struct real *rs = bpf_map_lookup_elem(&reals, &real_id);
    if (!rs || !rs->addr)
        return XDP_PASS;
    count(real_id, (__u64)(end - data), new_flow);

    if (!(vip->flags & VIP_NAT)) {
        __builtin_memcpy(eth->h_dest, rs->mac, ETH_ALEN);
        __builtin_memcpy(eth->h_source, vip->mac, ETH_ALEN);
        return XDP_TX;
    }
    if (new_flow) {
        struct flow_key back = {
            .src = rs->addr, .dst = ip->saddr, .sport = rs->port, .dport = ports[0], .proto = ip->protocol};
        struct nat_back b = {.vip_addr = vk.addr, .vip_port = vk.port, .real = real_id};
        bpf_map_update_elem(&nat_flows, &back, &b, BPF_ANY);
    }
    __u16 *l4sum = l4_csum(ip, ports, end);
    csum_update32(&ip->check, ip->daddr, rs->addr);
    if (l4sum) {
        csum_update32(l4sum, ip->daddr, rs->addr);
        csum_update16(l4sum, ports[1], rs->port);
    }
    ip->daddr = rs->addr;
    ports[1] = rs->port;
    return forward(ctx, eth, ip);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
