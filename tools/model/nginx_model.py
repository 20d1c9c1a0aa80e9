#!/usr/bin/env python3
"""An executable model of nginx 1.22's upstream peer selection, as docs/algorithms.md describes it.

Each function names the nginx function it models and the section of docs/algorithms.md that explains it. The
model is deliberately plain (sets, lists, integers) so that it can be read beside nginx's C source; it is the
reference that tools/golden_vs_model.py checks the recorded goldens against, and the source of the vector tables
in docs/algorithms.md §15.

  python3 tools/model/nginx_model.py                      print the vector tables
  python3 tools/model/nginx_model.py --json               the same, as JSON
  python3 tools/model/nginx_model.py --write-conf DIR     write the vector config DIR/nginx.conf (backends
                                                          127.0.0.1:8081-8083, front 127.0.0.1:8090)
  python3 tools/model/nginx_model.py --verify URL         ask an nginx running that config (e.g.
                                                          http://127.0.0.1:8090) and compare with the model
Stdlib only.
"""
import argparse
import ipaddress
import json
import os
import struct
import sys
import time
import urllib.error
import urllib.request
import zlib

MISS_LIMIT = 20  # docs/algorithms.md §9: more than 20 misses and a request falls back to round robin
RING_POINTS_PER_WEIGHT = 160  # §8
IP_HASH_SEED, IP_HASH_MUL, IP_HASH_MOD = 89, 113, 6271  # §6


class Peer:
    """One address of a `server` line (ngx_http_upstream_rr_peer_t): its configuration and its mutable state."""

    def __init__(self, name, weight=1, max_fails=1, fail_timeout=10, max_conns=0, down=False, server=None):
        self.name = name
        self.server = server if server is not None else name
        self.weight = weight
        self.max_fails = max_fails
        self.fail_timeout = fail_timeout
        self.max_conns = max_conns
        self.down = down
        self.effective_weight = weight
        self.current_weight = 0
        self.conns = 0
        self.fails = 0
        self.accessed = 0
        self.checked = 0

    def failed_out(self, now):
        """max_fails reached and the last failure is at most fail_timeout seconds old (§3)."""
        return bool(self.max_fails) and self.fails >= self.max_fails and now - self.checked <= self.fail_timeout

    def full(self):
        return bool(self.max_conns) and self.conns >= self.max_conns

    def usable(self, now):
        """The test every method applies before taking a peer (§3)."""
        return not self.down and not self.failed_out(now) and not self.full()


class Upstream:
    """An upstream's two peer lists (§2): the primary list and the list of `backup` lines."""

    def __init__(self, primary, backup=()):
        self.primary = list(primary)
        self.backup = list(backup)

    @property
    def single(self):
        """peers->single: one primary address and no backup list (§2)."""
        return len(self.primary) == 1 and not self.backup


def total_weight(peers):
    """Σ weight over a list, down peers included (§2): the modulus of ip_hash, hash and random."""
    return sum(p.weight for p in peers)


def walk_weights(peers, w):
    """The index whose weight range holds w: ip_hash's and hash's walk over the configured weights (§6, §7)."""
    i = 0
    while w >= peers[i].weight:
        w -= peers[i].weight
        i += 1
    return i


class Request:
    """What one request carries between attempts (ngx_http_upstream_rr_peer_data_t and the methods' extras)."""

    def __init__(self, upstream, next_upstream_tries=0):
        self.upstream = upstream
        self.peers = upstream.primary
        self.on_backup = False
        self.tried = set()
        self.current = None
        # ngx_http_upstream_init_round_robin_peer: the non-down addresses of both lists, then the _tries clamp (§2).
        budget = sum(not p.down for p in upstream.primary) + sum(not p.down for p in upstream.backup)
        if next_upstream_tries and budget > next_upstream_tries:
            budget = next_upstream_tries
        self.tries = budget
        self.misses = 0  # ip_hash, hash, hash consistent, random: iphp->tries / hp->tries / rp->tries (§9)
        self.ip_hash = IP_HASH_SEED  # §6
        self.acc = 0  # hash: the 32-bit accumulator (§7)
        self.rehash = 0  # hash: the prefix of the next round (§7)
        self.pos = 0  # hash consistent: the ring position (§8)

    @property
    def lone(self):
        """The request is on the primary list of a single-address upstream (§2)."""
        return self.peers is self.upstream.primary and self.upstream.single

    def take(self, i, now):
        """The bookkeeping of a selection (every get function's tail, §3): tried bit, conns, `checked`."""
        p = self.peers[i]
        self.tried.add(i)
        self.current = p
        p.conns += 1
        if now - p.checked > p.fail_timeout:
            p.checked = now
        return p

    def to_backup(self):
        """The switch to the backup list once the primary list has no usable peer (§5); False if there is none."""
        if self.on_backup or not self.upstream.backup:
            return False
        self.peers, self.on_backup, self.tried = self.upstream.backup, True, set()
        return True

    def free(self, failed, now):
        """ngx_http_upstream_free_round_robin_peer (§3): one call per attempt. `failed` is NGX_PEER_FAILED; a
        success and NGX_PEER_NEXT (403/404) are the same here."""
        p = self.current
        if self.lone:
            p.conns -= 1
            self.tries = 0
            return
        if failed:
            p.fails += 1
            p.accessed = p.checked = now
            if p.max_fails:
                p.effective_weight -= p.weight // p.max_fails
            p.effective_weight = max(p.effective_weight, 0)
        elif p.accessed < p.checked:
            p.fails = 0
        p.conns -= 1
        if self.tries:
            self.tries -= 1


# ----------------------------------------------------------------------------------------------------------------
# round robin (§4) and backup (§5)
# ----------------------------------------------------------------------------------------------------------------


def swrr_pass(req, now, server=None):
    """ngx_http_upstream_get_peer (§4): one smooth weighted round-robin pass over the untried usable peers (only
    those of `server`'s line when given, as ngx_http_upstream_get_chash_peer does). Returns an index or None."""
    best, total = None, 0
    for i, p in enumerate(req.peers):
        if i in req.tried or not p.usable(now) or (server is not None and p.server != server):
            continue
        p.current_weight += p.effective_weight
        total += p.effective_weight
        if p.effective_weight < p.weight:
            p.effective_weight += 1
        if best is None or p.current_weight > req.peers[best].current_weight:
            best = i
    if best is not None:
        req.peers[best].current_weight -= total
    return best


def round_robin(req, now):
    """ngx_http_upstream_get_round_robin_peer (§4, §5). None is NGX_BUSY ("no live upstreams", 502)."""
    if req.lone:
        p = req.peers[0]
        if p.down or p.full():
            return None
        req.current = p
        p.conns += 1  # no tried bit, no max_fails test, no `checked` update
        return p
    i = swrr_pass(req, now)
    if i is not None:
        return req.take(i, now)
    if req.to_backup():
        return round_robin(req, now)
    return None


# ----------------------------------------------------------------------------------------------------------------
# ip_hash (§6), hash (§7), hash consistent (§8); each falls back to round robin after 20 misses (§9)
# ----------------------------------------------------------------------------------------------------------------


def ip_hash_bytes(addr):
    """The bytes ip_hash feeds: the first 3 octets of IPv4, all 16 of IPv6 (ngx_http_upstream_init_ip_hash_peer)."""
    a = ipaddress.ip_address(addr)
    return a.packed[:3] if a.version == 4 else a.packed


def ip_hash_round(h, data):
    for b in data:
        h = (h * IP_HASH_MUL + b) % IP_HASH_MOD
    return h


def ip_hash(req, data, now):
    """ngx_http_upstream_get_ip_hash_peer (§6)."""
    if req.misses > MISS_LIMIT or req.upstream.single:
        return round_robin(req, now)
    h = req.ip_hash
    while True:
        h = ip_hash_round(h, data)
        i = walk_weights(req.peers, h % total_weight(req.peers))
        if i not in req.tried and req.peers[i].usable(now):
            req.ip_hash = h  # kept only when a peer is taken
            return req.take(i, now)
        req.misses += 1
        if req.misses > MISS_LIMIT:
            return round_robin(req, now)


def hash_round_value(key, rehash):
    """((crc32([REHASH] KEY) >> 16) & 0x7fff): one round of ngx_http_upstream_get_hash_peer (§7)."""
    prefix = str(rehash).encode() if rehash > 0 else b""
    return (zlib.crc32(prefix + key) >> 16) & 0x7FFF


def hash_key(req, key, now):
    """ngx_http_upstream_get_hash_peer (§7)."""
    if req.misses > MISS_LIMIT or req.upstream.single or not key:
        return round_robin(req, now)
    while True:
        req.acc = (req.acc + hash_round_value(key, req.rehash)) & 0xFFFFFFFF
        req.rehash += 1
        i = walk_weights(req.peers, req.acc % total_weight(req.peers))
        if i not in req.tried and req.peers[i].usable(now):
            return req.take(i, now)
        req.misses += 1
        if req.misses > MISS_LIMIT:
            return round_robin(req, now)


def ring_base(server):
    """HOST \\0 PORT of a `server` text, as ngx_http_upstream_init_chash splits it (§8)."""
    s = server.encode()
    if s[:5].lower() == b"unix:":
        return s[5:] + b"\x00"
    digits = 0
    while digits < len(s) and s[len(s) - 1 - digits] in b"0123456789":
        digits += 1
    if digits < len(s) and s[len(s) - 1 - digits] == ord(":"):
        return s[: len(s) - 1 - digits] + b"\x00" + s[len(s) - digits:]
    return s + b"\x00"


def line_points(server, weight):
    """The weight·160 points of one peer: crc32(HOST \\0 PORT || previous point as 4 little-endian bytes)."""
    base, prev, out = ring_base(server), 0, []
    for _ in range(weight * RING_POINTS_PER_WEIGHT):
        prev = zlib.crc32(base + struct.pack("<I", prev))
        out.append(prev)
    return out


class Ring:
    """The consistent-hash ring of a primary list (ngx_http_upstream_init_chash, §8): points sorted by hash, one
    point kept per hash value; each point names the `server` text of its line."""

    def __init__(self, peers):
        points = sorted(((h, p.server) for p in peers for h in line_points(p.server, p.weight)), key=lambda x: x[0])
        self.points = []
        for h, server in points:
            if not self.points or self.points[-1][0] != h:
                self.points.append((h, server))

    def __len__(self):
        return len(self.points)

    def find(self, h):
        """ngx_http_upstream_find_chash_point: the first point >= h, or len() when h is above them all."""
        lo, hi = 0, len(self.points)
        while lo < hi:
            mid = (lo + hi) // 2
            if h > self.points[mid][0]:
                lo = mid + 1
            elif h < self.points[mid][0]:
                hi = mid
            else:
                return mid
        return lo

    def server_at(self, pos):
        return self.points[pos % len(self.points)][1]


def consistent_start(req, ring, key):
    """ngx_http_upstream_init_chash_peer: the request's first ring position, crc32 of the whole key."""
    req.pos = ring.find(zlib.crc32(key))


def consistent_hash(req, ring, key, now):
    """ngx_http_upstream_get_chash_peer (§8)."""
    if req.misses > MISS_LIMIT or req.upstream.single or not key:
        return round_robin(req, now)
    while True:
        i = swrr_pass(req, now, server=ring.server_at(req.pos))
        if i is not None:
            return req.take(i, now)
        req.pos += 1
        req.misses += 1
        if req.misses > MISS_LIMIT:
            return round_robin(req, now)


# ----------------------------------------------------------------------------------------------------------------
# least_conn (§10), random (§11)
# ----------------------------------------------------------------------------------------------------------------


def least_conn(req, now):
    """ngx_http_upstream_get_least_conn_peer (§10): conns/weight by cross-multiplication, ties by SWRR."""
    if req.lone:
        return round_robin(req, now)
    peers, best, tie = req.peers, None, False
    for i, p in enumerate(peers):
        if i in req.tried or not p.usable(now):
            continue
        if best is None or p.conns * peers[best].weight < peers[best].conns * p.weight:
            best, tie = i, False
        elif p.conns * peers[best].weight == peers[best].conns * p.weight:
            tie = True
    if best is None:
        return least_conn(req, now) if req.to_backup() else None
    total = 0
    if tie:
        first = peers[best]
        for i in range(best, len(peers)):
            p = peers[i]
            if i in req.tried or not p.usable(now) or p.conns * first.weight != first.conns * p.weight:
                continue
            p.current_weight += p.effective_weight
            total += p.effective_weight
            if p.effective_weight < p.weight:
                p.effective_weight += 1
            if p.current_weight > peers[best].current_weight:
                best = i
    peers[best].current_weight -= total
    return req.take(best, now)


def random_ranges(peers):
    """ngx_http_upstream_update_random: the start of each peer's range of weight, and the total."""
    starts, acc = [], 0
    for p in peers:
        starts.append(acc)
        acc += p.weight
    return starts, acc


def random_peek(starts, x):
    """ngx_http_upstream_peek_random_peer for x = random() % total: the last range starting at or below x."""
    lo, hi = 0, len(starts)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if x < starts[mid]:
            hi = mid
        else:
            lo = mid
    return lo


# ----------------------------------------------------------------------------------------------------------------
# the vector tables (docs/algorithms.md §15)
# ----------------------------------------------------------------------------------------------------------------

SERVERS = ["127.0.0.1:8081", "127.0.0.1:8082", "127.0.0.1:8083"]
SHORT = {s: f"s{i + 1}" for i, s in enumerate(SERVERS)}
CLIENTS = ["127.0.0.1", "127.0.1.1", "127.1.0.1", "10.0.0.1", "192.168.1.10", "172.16.5.4", "8.8.8.8", "1.2.3.4",
           "::1", "2001:db8::1"]
KEYS = ["a", "b", "c", "/index.html"]
MORE_KEYS = ["user42", "x", "hello"]
RING_KEYS = MORE_KEYS + ["zzz", "key-17"]


def three(weights=(1, 1, 1), down=(), servers=SERVERS):
    return Upstream([Peer(s, w, down=i in down) for i, (s, w) in enumerate(zip(servers, weights))])


def vector_swrr(n=14):
    ups = Upstream([Peer("a", 5), Peer("b", 1), Peer("c", 1)])
    out = []
    for _ in range(n):
        r = Request(ups)
        p = round_robin(r, 100)
        r.free(False, 100)
        out.append({"pick": p.name, "cw_after": [q.current_weight for q in ups.primary]})
    return out


def vector_swrr_failure():
    ups = Upstream([Peer("a", 5), Peer("b", 1), Peer("c", 1)])
    state = lambda: {"ew": [q.effective_weight for q in ups.primary], "cw": [q.current_weight for q in ups.primary]}
    t0 = 1000
    r = Request(ups)
    first = round_robin(r, t0)
    r.free(True, t0)
    retry = round_robin(r, t0)
    r.free(False, t0)
    out = [dict(request=1, t=0, picks=[first.name, retry.name], **state())]
    for n, dt in ((2, 0), (3, 11), (4, 11), (5, 11), (6, 11)):
        r = Request(ups)
        p = round_robin(r, t0 + dt)
        r.free(False, t0 + dt)
        out.append(dict(request=n, t=dt, picks=[p.name], **state()))
    return out


def vector_ip_hash(weights=(1, 1, 1)):
    peers = three(weights).primary
    out = []
    for ip in CLIENTS:
        data = ip_hash_bytes(ip)
        h = ip_hash_round(IP_HASH_SEED, data)
        cands, hh = [], h
        for _ in range(5):
            cands.append(walk_weights(peers, hh % total_weight(peers)))
            hh = ip_hash_round(hh, data)
        down = Request(three(weights, down=(1,)))
        out.append({"client": ip, "hash": h, "server": SHORT[peers[cands[0]].server], "candidates": cands,
                    "s2_down": SHORT[ip_hash(down, data, 0).server]})
    return out


def vector_hash():
    out = []
    for k in KEYS + MORE_KEYS:
        key, acc, rounds = k.encode(), 0, []
        for rehash in range(3):
            data = (str(rehash) if rehash else "") + k
            v = hash_round_value(key, rehash)
            acc += v
            rounds.append({"data": data, "crc32": "0x%08x" % zlib.crc32(data.encode()), "h15": v, "acc": acc,
                           "index": acc % 3})
        down = Request(three(down=(1,)))
        out.append({"key": k, "server": SHORT[SERVERS[rounds[0]["index"]]], "rounds": rounds,
                    "s2_down": SHORT[hash_key(down, key, 0).server]})
    return out


def vector_chash(weights=(1, 1, 1)):
    ring = Ring(three(weights).primary)
    keys = []
    for k in KEYS + RING_KEYS + ["k1025"]:
        h = zlib.crc32(k.encode())
        i = ring.find(h)
        down = Request(three(weights, down=(1,)))
        down_ring = Ring(down.upstream.primary)
        consistent_start(down, down_ring, k.encode())
        keys.append({"key": k, "crc32": "0x%08x" % h, "index": i, "point": "0x%08x" % ring.points[i % len(ring)][0],
                     "server": SHORT[ring.server_at(i)], "next": [SHORT[ring.server_at(i + d)] for d in (1, 2, 3)],
                     "s2_down": SHORT[consistent_hash(down, down_ring, k.encode(), 0).server]})
    return {"points": len(ring),
            "first_points": {SHORT[s]: ["0x%08x" % h for h in line_points(s, 1)[:4]] for s in SERVERS},
            "lowest": [("0x%08x" % h, SHORT[s]) for h, s in ring.points[:5]],
            "highest": [("0x%08x" % h, SHORT[s]) for h, s in ring.points[-3:]],
            "keys": keys}


def vector_least_conn():
    out = []
    for conns in ((10, 1, 2), (10, 2, 2), (0, 0, 0)):
        ups = Upstream([Peer("a", 5), Peer("b", 1), Peer("c", 1)])
        for p, c in zip(ups.primary, conns):
            p.conns = c
        p = least_conn(Request(ups), 0)
        out.append({"conns": list(conns), "pick": p.name, "cw_after": [q.current_weight for q in ups.primary]})
    return out


def vector_random():
    starts, total = random_ranges([Peer("a", 5), Peer("b", 1), Peer("c", 1)])
    return {"starts": starts, "total": total, "x_to_index": [random_peek(starts, x) for x in range(total)]}


def vectors():
    return {"swrr_5_1_1": vector_swrr(), "swrr_failure": vector_swrr_failure(), "ip_hash": vector_ip_hash(),
            "ip_hash_w211": vector_ip_hash((2, 1, 1)), "hash": vector_hash(), "chash": vector_chash(),
            "chash_w211": vector_chash((2, 1, 1)), "least_conn": vector_least_conn(), "random": vector_random()}


def print_tables(v):
    print("SWRR, weights a=5 b=1 c=1:", " ".join(x["pick"] for x in v["swrr_5_1_1"]))
    for x in v["swrr_5_1_1"][:7]:
        print(f"  {x['pick']}  cw after {x['cw_after']}")
    print("SWRR with a failure (max_fails=1, fail_timeout=10):")
    for x in v["swrr_failure"]:
        print(f"  request {x['request']} t={x['t']:<2} picks {','.join(x['picks']):4} ew {x['ew']} cw {x['cw']}")
    for tag in ("ip_hash", "ip_hash_w211"):
        print(f"{tag} over s1..s3:")
        for x in v[tag]:
            print(f"  {x['client']:13} hash {x['hash']:4} -> {x['server']}  candidates {x['candidates']}"
                  f"  s2 down -> {x['s2_down']}")
    print("hash KEY over 3 equal servers:")
    for x in v["hash"]:
        rounds = "; ".join(f"{r['data']!r} {r['crc32']} h15={r['h15']} acc={r['acc']} idx={r['index']}"
                           for r in x["rounds"])
        print(f"  {x['key']:12} -> {x['server']} (s2 down -> {x['s2_down']})  {rounds}")
    for tag in ("chash", "chash_w211"):
        c = v[tag]
        print(f"{tag}: {c['points']} points")
        if tag == "chash":
            for s, pts in c["first_points"].items():
                print(f"  first points of {s}: {' '.join(pts)}")
            print(f"  lowest {c['lowest']}")
            print(f"  highest {c['highest']}")
        for k in c["keys"]:
            print(f"  {k['key']:12} {k['crc32']} -> point {k['index']} {k['point']} -> {k['server']}"
                  f"  next {k['next']}  s2 down -> {k['s2_down']}")
    print("least_conn, weights 5,1,1:")
    for x in v["least_conn"]:
        print(f"  conns {x['conns']} -> {x['pick']}  cw after {x['cw_after']}")
    r = v["random"]
    print(f"random, weights 5,1,1: range starts {r['starts']}, total {r['total']}, x -> index {r['x_to_index']}")


# ----------------------------------------------------------------------------------------------------------------
# the vector config and the check against a running nginx
# ----------------------------------------------------------------------------------------------------------------

# The upstreams of the vector config: name -> (method line, weights, indices of down servers).
VECTOR_UPSTREAMS = [
    ("rr", "", (5, 1, 1), ()),
    ("lc", "least_conn;", (5, 1, 1), ()),
    ("iph", "ip_hash;", (1, 1, 1), ()),
    ("iphw", "ip_hash;", (2, 1, 1), ()),
    ("iphd", "ip_hash;", (1, 1, 1), (1,)),
    ("h", "hash $arg_k;", (1, 1, 1), ()),
    ("hd", "hash $arg_k;", (1, 1, 1), (1,)),
    ("ch", "hash $arg_k consistent;", (1, 1, 1), ()),
    ("chw", "hash $arg_k consistent;", (2, 1, 1), ()),
    ("chd", "hash $arg_k consistent;", (1, 1, 1), (1,)),
]
DEAD = "127.0.0.1:8089"  # nothing listens there: the max_fails window upstream `ft` fails on it


def vector_config(d):
    """nginx.conf for the vectors: three `return` backends s1..s3, one upstream per vector, a front on :8090 that
    takes the client address from X-Real-IP (for ip_hash) and shows $upstream_addr in X-Up."""
    ups = []
    for name, method, weights, down in VECTOR_UPSTREAMS:
        lines = ([f"        {method}"] if method else []) + [
            f"        server {s}{'' if w == 1 else f' weight={w}'}{' down' if i in down else ''};"
            for i, (s, w) in enumerate(zip(SERVERS, weights))]
        ups.append(f"    upstream {name} {{\n" + "\n".join(lines) + "\n    }\n")
    ups.append(f"    upstream ft {{\n        server {DEAD} max_fails=2 fail_timeout=1s;\n"
               f"        server {SERVERS[1]};\n    }}\n")
    locations = "".join(f"        location /{n} {{ proxy_pass http://{n}; }}\n"
                        for n in [u[0] for u in VECTOR_UPSTREAMS] + ["ft"])
    backends = "".join(f"    server {{ listen {s}; return 200 \"{SHORT[s]}\"; }}\n" for s in SERVERS)
    temp = "".join(f"    {t}_temp_path {d}/{t};\n" for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return (f"worker_processes 1;\ndaemon on;\nuser root;\npid {d}/nginx.pid;\nerror_log {d}/error.log info;\n"
            "events {\n    worker_connections 256;\n}\nhttp {\n"
            f"    access_log {d}/access.log;\n{temp}\n{backends}\n" + "".join(ups) +
            "\n    server {\n        listen 127.0.0.1:8090;\n        set_real_ip_from 127.0.0.0/8;\n"
            "        real_ip_header X-Real-IP;\n        add_header X-Up $upstream_addr always;\n"
            f"{locations}    }}\n}}\n")


def fetch(base, path, headers=None):
    """(body, X-Up) of one GET; an error status gives ("ERR <status>", X-Up)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(base + path, headers=headers or {}), timeout=5) as r:
            return r.read().decode(), r.headers.get("X-Up")
    except urllib.error.HTTPError as e:
        return f"ERR {e.code}", e.headers.get("X-Up")


def verify(base):
    """Compares a running nginx with the model on every vector; True when all agree."""
    results = []

    def check(label, got, want):
        results.append(got == want)
        print(f"{'PASS' if got == want else 'FAIL'} {label:34} got={got} want={want}")

    want = [{"a": "s1", "b": "s2", "c": "s3"}[x["pick"]] for x in vector_swrr()]
    check("rr 5,1,1 x14", [fetch(base, "/rr")[0] for _ in want], want)
    check("least_conn 5,1,1 x14", [fetch(base, "/lc")[0] for _ in want], want)
    for name, method, weights, down in VECTOR_UPSTREAMS[2:]:
        ring = Ring(three(weights, down).primary) if "consistent" in method else None
        for k in (CLIENTS if method == "ip_hash;" else KEYS + (RING_KEYS if ring else MORE_KEYS)):
            r = Request(three(weights, down))
            if method == "ip_hash;":
                p, got = ip_hash(r, ip_hash_bytes(k), 0), fetch(base, f"/{name}", {"X-Real-IP": k})[0]
            elif ring:
                consistent_start(r, ring, k.encode())
                p, got = consistent_hash(r, ring, k.encode(), 0), fetch(base, f"/{name}?k={k}")[0]
            else:
                p, got = hash_key(r, k.encode(), 0), fetch(base, f"/{name}?k={k}")[0]
            check(f"/{name} {k}", got, SHORT[p.server])
    # The max_fails window (§3): failures 3 s apart, more than fail_timeout=1s, still add up.
    ups = Upstream([Peer(DEAD, max_fails=2, fail_timeout=1), Peer(SERVERS[1])])
    start, got, want = time.time(), [], []
    for t in (0, 3, 3, 3, 3):
        while time.time() - start < t:
            time.sleep(0.05)
        now = 1_000_000 + t
        r, names = Request(ups), []
        while (p := round_robin(r, now)) is not None:
            names.append(p.name)
            dead = p.name == DEAD
            r.free(dead, now)
            if not dead or r.tries == 0:
                break
        want.append(", ".join(names))
        got.append(fetch(base, "/ft")[1])
    check("max_fails window /ft", got, want)
    print(f"{sum(results)}/{len(results)} checks agree with the model")
    return all(results)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--write-conf", metavar="DIR")
    ap.add_argument("--verify", metavar="URL")
    a = ap.parse_args()
    if a.write_conf:
        os.makedirs(a.write_conf, exist_ok=True)
        path = os.path.join(a.write_conf, "nginx.conf")
        with open(path, "w") as f:
            f.write(vector_config(os.path.abspath(a.write_conf)))
        print(path)
    elif a.verify:
        sys.exit(0 if verify(a.verify.rstrip("/")) else 1)
    elif a.json:
        print(json.dumps(vectors(), indent=1))
    else:
        print_tables(vectors())


if __name__ == "__main__":
    main()
