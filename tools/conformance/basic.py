"""The basic conformance scenarios: one per balancing method and per rule most configs lean on (SWRR weights, a dead
peer under max_fails, backup, ip_hash, hash, hash consistent, least_conn with a held request, stream).

A scenario file defines SCENARIOS, a list of dicts with these keys (tools/conformance/oracle.py runs them):
  name      the label printed
  context   "http" (the default) or "stream"
  upstream  directives written in `upstream backend` before the servers, e.g. ["ip_hash;"]
  servers   (NAME, "server parameters", MODE) per server line; MODE is ok | dead (not started) | reset | eNNN |
            slowMS (tools/conformance/backends.py)
  location  directives added to `location /` (http)
  server    directives added to the stream server (stream)
  hold      (SOURCE, PATH) requests sent first and kept open (PATH /sleep/MS); each is at its backend before the
            next request goes
  requests  (SOURCE, PATH) sent one after another, each from SOURCE (any 127.0.0.0/8 address)
"""
import random

GEN = random.Random(20261201)


def clients(n):
    """n source addresses spread over 127.0.0.0/8 (ip_hash keys on the first three octets)."""
    return [f"127.{GEN.randrange(256)}.{GEN.randrange(256)}.{GEN.randrange(1, 255)}" for _ in range(n)]


def targets(n):
    return [f"/obj/{GEN.randrange(10**6)}?p={GEN.randrange(100)}" for _ in range(n)]


def from_one(paths, source="127.0.0.1"):
    return [(source, p) for p in paths]


THREE = [("A", "", "ok"), ("B", "", "ok"), ("C", "", "ok")]

SCENARIOS = [
    {"name": "swrr-5-1-1", "servers": [("A", "weight=5", "ok"), ("B", "", "ok"), ("C", "", "ok")],
     "requests": from_one(["/"] * 14)},
    {"name": "swrr-dead-peer",
     "servers": [("A", "", "ok"), ("B", "max_fails=1 fail_timeout=30s", "dead"), ("C", "weight=2", "ok")],
     "location": ["proxy_next_upstream error timeout;"], "requests": from_one(["/"] * 20)},
    {"name": "backup", "servers": [("A", "", "dead"), ("B", "backup", "ok")],
     "location": ["proxy_next_upstream error timeout;"], "requests": from_one(["/"] * 5)},
    {"name": "ip-hash", "upstream": ["ip_hash;"], "servers": THREE, "requests": [(c, "/") for c in clients(40)]},
    {"name": "hash-uri", "upstream": ["hash $request_uri;"], "servers": THREE, "requests": from_one(targets(40))},
    {"name": "chash-uri", "upstream": ["hash $request_uri consistent;"],
     "servers": [("A", "", "ok"), ("B", "weight=2", "ok"), ("C", "", "ok")], "requests": from_one(targets(60))},
    {"name": "least-conn", "upstream": ["least_conn;"], "servers": THREE,
     "hold": [("127.0.0.1", "/sleep/2000")], "requests": from_one(["/"] * 8)},
    {"name": "stream-chash", "context": "stream", "upstream": ["hash $remote_addr consistent;"], "servers": THREE,
     "requests": [(c, "/") for c in clients(30)]},
]
