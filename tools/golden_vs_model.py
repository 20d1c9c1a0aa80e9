#!/usr/bin/env python3
"""Checks the recorded goldens (engine/tests/golden/) against the executable model of nginx's balancers
(tools/model/nginx_model.py), driven by the retry rules of docs/algorithms.md §12: a golden that disagrees with the
model points at the model, its notes or the recording, not at corelb. Usage: python3 tools/golden_vs_model.py"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "model"))
import nginx_model as m  # noqa: E402

G = os.path.join(HERE, "..", "engine", "tests", "golden")
def parse_conf(text):
    up = re.search(r"upstream backend \{(.*?)\}", text, re.S).group(1)
    method = None; servers = []
    for line in up.strip().splitlines():
        line = line.strip().rstrip(";")
        if line.startswith("server "):
            parts = line.split()[1:]
            servers.append((parts[0], parts[1:]))
        else:
            method = line
    nu = {"error", "timeout"}; tries = 0
    for m in re.finditer(r"proxy_next_upstream (.*?);", text):
        nu = set(m.group(1).split()) - {"off"}
    m = re.search(r"proxy_next_upstream_tries (\d+);", text)
    if m: tries = int(m.group(1))
    return method, servers, nu, tries, "stream {" in text
def build(servers):
    prim, back = [], []
    for s, params in servers:
        kw = dict(weight=1, max_fails=1, fail_timeout=10, down=False)
        b = False
        for p in params:
            if p == "down": kw["down"] = True
            elif p == "backup": b = True
            else:
                k, val = p.split("=")
                kw[k] = int(val.rstrip("s"))
        (back if b else prim).append(m.Peer(s, **kw))
    return m.Upstream(prim, back)
def normalized_path(uri):
    """nginx's $uri: %XX decoded, slashes merged, dot segments resolved; None for a path above the root (400)."""
    path = re.sub(rb"%([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]), uri.partition("?")[0].encode())
    segs = path.split(b"/")[1:]
    out, trailing = [], False
    for i, seg in enumerate(segs):
        last = i == len(segs) - 1
        if seg in (b"", b"."):
            trailing = last
        elif seg == b"..":
            if not out:
                return None
            out.pop(); trailing = last
        else:
            out.append(seg); trailing = False
    return b"/" + b"/".join(out) + (b"/" if trailing and out else b"")
def key_for(method, src, uri, host):
    tpl = method.split(None, 1)[1].rsplit(" consistent", 1)[0].strip('"')
    path, _, args = uri.partition("?")
    argk = ""
    for pair in args.split("&"):
        k, eq, val = pair.partition("=")
        if eq and k.lower() == "k": argk = val; break
    h = (host or "").split(":")[0].lower()
    norm = (normalized_path(uri) or b"").decode("latin-1")
    tpl = tpl.replace("$request_uri", uri).replace("$uri", norm)
    return tpl.replace("$arg_k", argk).replace("$host", h).replace("$remote_addr", src).encode("latin-1")
def run(name):
    d = os.path.join(G, name)
    method, servers, nu, tries, stream = parse_conf(open(d + "/corelb.conf").read())
    modes = dict(l.split() for l in open(d + "/backends").read().splitlines())
    ups = build(servers)
    ring = m.Ring(ups.primary) if method and "consistent" in method else None
    out = []
    now = 1000000; held = []
    for line in open(d + "/requests").read().splitlines():
        f = line.split(); src, uri = f[0], f[1]
        host = next((x[5:] for x in f if x.startswith("host=")), None)
        t = next((int(x[2:]) for x in f if x.startswith("t=")), None)
        if t is not None: now = 1000000 + t
        hold = "hold" in f
        if not stream and normalized_path(uri) is None:
            out.append("400 -"); continue
        r = m.Request(ups, tries)
        if method and method.startswith("hash") and ring is not None:
            k = key_for(method, src, uri, host); m.consistent_start(r, ring, k)
            get = lambda: m.consistent_hash(r, ring, k, now)
        elif method and method.startswith("hash"):
            k = key_for(method, src, uri, host); get = lambda: m.hash_key(r, k, now)
        elif method == "ip_hash":
            k = m.ip_hash_bytes(src); get = lambda: m.ip_hash(r, k, now)
        elif method == "least_conn":
            get = lambda: m.least_conn(r, now)
        else:
            get = lambda: m.round_robin(r, now)
        names = []; status = None
        while True:
            p = get()
            if p is None: names.append("backend"); status = 502; break
            names.append(p.name); mode = modes.get(p.name, "ok")
            if mode == "dead" or (not stream and mode in ("reset", "timeout")):
                r.free(True, now)
                cond = "timeout" if mode == "timeout" else "error"
                if r.tries == 0 or cond not in nu:
                    status = 504 if (mode == "timeout" and not stream) else 502; break
                continue
            code = int(mode[1:]) if (mode.startswith("e") and not stream) else 200
            if code != 200 and ("http_%d" % code) in nu and r.tries > 1:
                r.free(code not in (403, 404), now); continue
            status = code
            if hold: held.append(r)
            else: r.free(False, now)
            break
        out.append("%d %s" % (status, ", ".join(names)))
    exp = open(d + "/expected").read().splitlines()
    bad = [(i + 1, e, g) for i, (e, g) in enumerate(zip(exp, out)) if e != g]
    return bad, len(exp)
tot = differ = 0
for name in sorted(os.listdir(G)):
    if os.path.exists(os.path.join(G, name, "sent")):
        print("SKIP %-28s least_time (nginx 1.31): not in the model; engine/tests/golden.rs replays it" % name)
        continue
    bad, n = run(name)
    tot += n
    differ += bool(bad)
    print(("OK  " if not bad else "DIFF") + " %-28s %d" % (name, n), bad[:3])
print("%d requests, %d scenarios differ from the model" % (tot, differ))
sys.exit(1 if differ else 0)
