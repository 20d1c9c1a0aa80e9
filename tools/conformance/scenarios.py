"""corelb's own conformance scenarios, beyond the basic ones (format in tools/conformance/basic.py):

  python3 tools/conformance/oracle.py --scenarios tools/conformance/scenarios.py "target/release/corelb -c {conf}"

Each runs through real nginx and through corelb; the backend that served each request must be the same."""
import random

R = random.Random(11)


def ips(n):
    return [f"127.{R.randint(0, 255)}.{R.randint(0, 255)}.{R.randint(1, 254)}" for _ in range(n)]


def uris(n):
    return [f"/u/{R.randint(0, 10**6)}?q={R.randint(0, 99)}" for _ in range(n)]


def seq(paths, src="127.0.0.1"):
    return [(src, p) for p in paths]


OK3 = [("A", "", "ok"), ("B", "", "ok"), ("C", "", "ok")]

SCENARIOS = [
    {"name": "swrr-1-2", "servers": [("A", "", "ok"), ("B", "weight=2", "ok")], "requests": seq(["/"] * 30)},
    {"name": "swrr-reset-peer", "servers": [("A", "weight=2", "ok"), ("B", "", "reset"), ("C", "", "ok")],
     "requests": seq(["/"] * 20)},
    {"name": "down-peer", "servers": [("A", "", "ok"), ("B", "down", "ok"), ("C", "weight=3", "ok")],
     "requests": seq(["/"] * 12)},
    {"name": "backup-after-down", "servers": [("A", "down", "ok"), ("B", "", "dead"), ("C", "backup", "ok")],
     "requests": seq(["/"] * 6)},
    {"name": "single-dead", "servers": [("A", "", "dead")], "requests": seq(["/"] * 3)},
    {"name": "next-upstream-502", "servers": [("A", "", "e502"), ("B", "", "ok"), ("C", "", "e502")],
     "location": ["proxy_next_upstream error timeout http_502;"], "requests": seq(["/"] * 9)},
    {"name": "next-upstream-off", "servers": [("A", "", "dead"), ("B", "", "ok")],
     "location": ["proxy_next_upstream off;"], "requests": seq(["/"] * 6)},
    {"name": "next-upstream-tries-1", "servers": [("A", "", "dead"), ("B", "", "ok"), ("C", "", "ok")],
     "location": ["proxy_next_upstream_tries 1;"], "requests": seq(["/"] * 6)},
    {"name": "ip-hash-weighted-down", "upstream": ["ip_hash;"],
     "servers": [("A", "weight=2", "ok"), ("B", "down", "ok"), ("C", "", "ok")], "requests": [(ip, "/") for ip in ips(40)]},
    {"name": "ip-hash-dead", "upstream": ["ip_hash;"], "servers": [("A", "", "ok"), ("B", "", "dead"), ("C", "", "ok")],
     "requests": [(ip, "/") for ip in ips(30)]},
    {"name": "hash-args-dead", "upstream": ["hash $args;"], "servers": [("A", "", "ok"), ("B", "", "dead"), ("C", "", "ok")],
     "requests": seq(uris(30))},
    {"name": "chash-weighted-down", "upstream": ["hash $request_uri consistent;"],
     "servers": [("A", "weight=3", "ok"), ("B", "down", "ok"), ("C", "", "ok")], "requests": seq(uris(50))},
    {"name": "chash-mixed-key", "upstream": ["hash \"k:$uri|$arg_q\" consistent;"], "servers": OK3,
     "requests": seq(uris(40))},
    {"name": "least-conn-3-1-1-hold", "upstream": ["least_conn;"],
     "servers": [("A", "weight=3", "ok"), ("B", "", "ok"), ("C", "", "ok")],
     "hold": [("127.0.0.1", "/sleep/2500"), ("127.0.0.1", "/sleep/2500")], "requests": seq(["/"] * 10)},
    # nginx hashes (and matches locations on) the normalized path: %XX decoded, slashes merged, dot segments
    # resolved; the request goes upstream as sent.
    {"name": "hash-normalized-uri", "upstream": ["hash $uri consistent;"], "servers": OK3,
     "requests": seq(["/a/b", "/a//b", "//a/b", "/a/./b", "/a/x/../b", "/%61/b", "/a/%62", "/a%2Fb", "/a/b?x=1",
                      "/a/b/", "/a/b/.", "/a/b/..", "/A/B", "/a/b%20c", "/%7Euser/p", "/~user/p", "/a///b///c"]
                     + [u.replace("/u/", "/u//./") for u in uris(20)])},
    {"name": "stream-rr-dead", "context": "stream", "servers": [("A", "", "ok"), ("B", "", "dead"), ("C", "weight=2", "ok")],
     "requests": [(ip, "/") for ip in ips(12)]},
    {"name": "stream-hash-remote-addr", "context": "stream", "upstream": ["hash $remote_addr;"], "servers": OK3,
     "requests": [(ip, "/") for ip in ips(30)]},
]
