#!/usr/bin/env python3
"""Records golden traces from a real nginx (1.22; 1.31 for least_time) for corelb's simulator tests.

For each scenario below it starts loopback backends, runs nginx (worker_processes 1) on the scenario's config,
sends the scenario's requests one after another and writes, under OUT/<name>/ (default
engine/tests/golden/<name>/):

  corelb.conf  the config, in corelb's supported subset, with fixed loopback ports (backends 127.0.0.1:18081..,
               front 127.0.0.1:18090): consistent hashing hashes the `server` text, so ports must not move
  requests     one request per line: `SRC_IP URI [t=SECONDS] [hold] [host=HOST]`
                 t=S     send at S seconds after the scenario started (default: at once, after the previous one)
                 hold    send in the background and keep it open (the URI is /sleep/MS); the next request
                         starts 0.3 s later, the held one ends when its backend answers
                 host=H  the Host header (default 127.0.0.1:18090)
  backends     one line per server address: `ADDR MODE [head=MS] [body=MS]`, MODE ok | dead | reset | timeout
               (reads the request, never answers) | eNNN (answers status NNN); head=MS: the answer's head (in
               stream its first byte) comes MS ms after the request, body=MS: its body (stream: the close) MS ms
               after the head
  sent         for scenarios with a `timed` flag (least_time's, whose picks depend on milliseconds): one line per
               request, `START END`, the ms from the scenario's start at which the client sent it and got the whole
               answer, so that a replay runs each request at the time nginx saw it
  expected     one line per request, in request order: `STATUS UPSTREAM_ADDR` where UPSTREAM_ADDR is nginx's
               $upstream_addr as it printed it (`127.0.0.1:18089, 127.0.0.1:18082`, or the upstream's name for
               "no live upstreams"); for stream, STATUS is the session's $status

What nginx actually runs is corelb.conf plus, for http, `add_header X-Up $upstream_addr always;` in the server and,
for stream, an access log of `$upstream_addr $status`; temp paths, pid and error log go to a scratch directory.
Stdlib only. Usage:

  python3 tools/record_golden.py [--only SUBSTRING] [--out DIR] [--nginx /usr/sbin/nginx] [--list]
"""
import argparse
import asyncio
import http.client
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

BASE_PORT = 18081
FRONT = ("127.0.0.1", 18090)
STREAM_MODULE = "/usr/lib/nginx/modules/ngx_stream_module.so"
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "..", "engine", "tests", "golden")

# --------------------------------------------------------------------------------------------------------------
# scenarios
# --------------------------------------------------------------------------------------------------------------
#   name       directory name
#   context    "http" (default) or "stream"
#   upstream   directives placed in the upstream block before the servers
#   servers    (PORT_OFFSET, "server parameters", MODE): address 127.0.0.1:(18081+PORT_OFFSET)
#   location   directives added to `location /` (http) or the server block (stream)
#   requests   request lines (see above)
#   timed      record the `sent` file (see above)
#   servers' MODE may carry timings: "ok head=10 body=130"

R = random.Random(20240517)


def ips(n):
    return [f"127.{R.randint(0, 255)}.{R.randint(0, 255)}.{R.randint(1, 254)}" for _ in range(n)]


def uris(n):
    return [f"/item/{R.randint(0, 10**6)}?v={R.randint(0, 99)}" for _ in range(n)]


def keys(n):
    words = ["a", "b", "c", "x", "hello", "user42", "/index.html", "zzz", "key-17", "k1025", "k2164", "k5363"]
    return words + [f"user{R.randint(0, 99999)}" for _ in range(n - len(words))]


def seq(paths, src="127.0.0.1", extra=""):
    return [f"{src} {p}{(' ' + extra) if extra else ''}" for p in paths]


def srv(*specs):
    """srv("weight=5", "", ...) -> servers on consecutive ports, all ok."""
    return [(i, p, "ok") for i, p in enumerate(specs)]


CHASH_KEYS = keys(40)
HASH_URIS = uris(40)
IPH_IPS = ["127.0.0.1", "127.0.1.1", "127.1.0.1", "127.0.0.77"] + ips(44)
STREAM_IPS = ips(30)
# Paths nginx normalizes before `$uri` (and location matching): doubled slashes, dot segments, %XX escapes, a query.
NORMALIZED_URIS = ["/a/b", "/a//b", "//a/b", "/a/./b", "/a/x/../b", "/%61/b", "/a/%62", "/a%2Fb", "/a/b?x=1",
                   "/a/b/", "/a/b/.", "/a/b/..", "/A/B", "/a/b%20c", "/a/b c".replace(" ", "%20"), "/x/../../a",
                   "/%7Euser/p", "/~user/p", "/a/b;c", "/a///b///c"]
HOSTS = ["example.com", "www.example.com", "api.example.org", "Example.COM", "shop.test", "a.b.c.d"]

SCENARIOS = [
    {"name": "rr-5-1-1", "servers": srv("weight=5", "", ""), "requests": seq(["/"] * 14)},
    {"name": "rr-1-2", "servers": srv("", "weight=2"), "requests": seq(["/"] * 30)},
    {"name": "rr-dead-peer",
     "servers": [(0, "", "ok"), (8, "max_fails=1 fail_timeout=30s", "dead"), (2, "weight=2", "ok")],
     "requests": seq(["/"] * 20)},
    {"name": "rr-reset-peer", "servers": [(0, "weight=2", "ok"), (1, "", "reset"), (2, "", "ok")],
     "requests": seq(["/"] * 12)},
    {"name": "backup-primary-dead", "servers": [(8, "", "dead"), (1, "backup", "ok")],
     "requests": seq(["/"] * 5)},
    {"name": "backup-primaries-dead",
     "servers": [(7, "", "dead"), (8, "", "dead"), (2, "backup", "ok"), (3, "backup", "ok")],
     "requests": seq(["/"] * 8)},
    {"name": "backup-primaries-down",
     "servers": [(0, "down", "ok"), (1, "down", "ok"), (2, "backup", "ok"), (3, "backup weight=2", "ok")],
     "requests": seq(["/"] * 8)},
    {"name": "down-peer", "servers": [(0, "", "ok"), (1, "down", "ok"), (2, "weight=2", "ok")],
     "requests": seq(["/"] * 9)},
    {"name": "single-dead", "servers": [(8, "", "dead")], "requests": seq(["/"] * 4)},
    {"name": "max-fails-window", "servers": [(8, "max_fails=2 fail_timeout=1s", "dead"), (1, "", "ok")],
     "requests": [f"127.0.0.1 / t={t}" for t in (0, 3, 6, 9, 12)]},
    {"name": "next-upstream-http-502", "servers": [(0, "", "e502"), (1, "", "e502")],
     "location": ["proxy_next_upstream error timeout http_502;"], "requests": seq(["/"] * 4)},
    {"name": "next-upstream-http-404", "servers": [(0, "", "e404"), (1, "", "ok"), (2, "", "e404")],
     "location": ["proxy_next_upstream error timeout http_404;"], "requests": seq(["/"] * 8)},
    {"name": "next-upstream-off", "servers": [(8, "", "dead"), (1, "", "ok"), (2, "", "ok")],
     "location": ["proxy_next_upstream off;"], "requests": seq(["/"] * 8)},
    {"name": "next-upstream-tries-1",
     "servers": [(7, "", "dead"), (8, "", "dead"), (2, "", "ok")],
     "location": ["proxy_next_upstream_tries 1;"], "requests": seq(["/"] * 8)},
    {"name": "ip-hash", "upstream": ["ip_hash;"], "servers": srv("", "", ""),
     "requests": [f"{ip} /" for ip in IPH_IPS]},
    {"name": "ip-hash-w211", "upstream": ["ip_hash;"], "servers": srv("weight=2", "", ""),
     "requests": [f"{ip} /" for ip in IPH_IPS]},
    {"name": "ip-hash-down", "upstream": ["ip_hash;"], "servers": srv("", "down", ""),
     "requests": [f"{ip} /" for ip in IPH_IPS]},
    {"name": "ip-hash-dead", "upstream": ["ip_hash;"],
     "servers": [(0, "", "ok"), (8, "max_fails=0", "dead"), (2, "", "ok")],
     "requests": [f"{ip} /" for ip in IPH_IPS]},
    {"name": "hash-uri", "upstream": ["hash $request_uri;"], "servers": srv("", "", ""),
     "requests": seq(HASH_URIS)},
    {"name": "hash-uri-down", "upstream": ["hash $request_uri;"], "servers": srv("", "down", ""),
     "requests": seq(HASH_URIS)},
    {"name": "hash-uri-dead", "upstream": ["hash $request_uri;"],
     "servers": [(0, "", "ok"), (8, "max_fails=0", "dead"), (2, "", "ok")], "requests": seq(HASH_URIS)},
    {"name": "chash-arg", "upstream": ["hash $arg_k consistent;"], "servers": srv("", "", ""),
     "requests": seq([f"/?k={k}" for k in CHASH_KEYS])},
    {"name": "chash-arg-w211", "upstream": ["hash $arg_k consistent;"], "servers": srv("weight=2", "", ""),
     "requests": seq([f"/?k={k}" for k in CHASH_KEYS])},
    {"name": "chash-arg-down", "upstream": ["hash $arg_k consistent;"], "servers": srv("", "down", ""),
     "requests": seq([f"/?k={k}" for k in CHASH_KEYS])},
    {"name": "chash-arg-dead", "upstream": ["hash $arg_k consistent;"],
     "servers": [(0, "", "ok"), (8, "max_fails=0", "dead"), (2, "", "ok")],
     "requests": seq([f"/?k={k}" for k in CHASH_KEYS])},
    {"name": "hash-host-uri", "upstream": ['hash "$host$request_uri";'], "servers": srv("", "", "", ""),
     "requests": [f"127.0.0.1 {u} host={HOSTS[i % len(HOSTS)]}" for i, u in enumerate(HASH_URIS[:30])]},
    {"name": "chash-host-uri", "upstream": ['hash "$host$request_uri" consistent;'],
     "servers": srv("", "weight=3", ""),
     "requests": [f"127.0.0.1 {u} host={HOSTS[i % len(HOSTS)]}" for i, u in enumerate(HASH_URIS[:30])]},
    {"name": "least-conn-5-1-1", "upstream": ["least_conn;"], "servers": srv("weight=5", "", ""),
     "requests": seq(["/"] * 14)},
    {"name": "least-conn-hold", "upstream": ["least_conn;"], "servers": srv("", "", ""),
     "requests": ["127.0.0.1 /sleep/2000 hold"] + seq(["/"] * 8)},
    {"name": "least-conn-hold-w311", "upstream": ["least_conn;"], "servers": srv("weight=3", "", ""),
     "requests": ["127.0.0.1 /sleep/3000 hold", "127.0.0.1 /sleep/3000 hold"] + seq(["/"] * 10)},
    {"name": "timeout-next", "servers": [(0, "", "timeout"), (1, "", "ok"), (2, "", "ok")],
     "location": ["proxy_read_timeout 1s;"], "requests": seq(["/"] * 6)},
    {"name": "timeout-not-next", "servers": [(0, "max_fails=0", "timeout"), (1, "", "ok")],
     "location": ["proxy_read_timeout 1s;", "proxy_next_upstream error;"], "requests": seq(["/"] * 4)},
    {"name": "hash-normalized-uri", "upstream": ["hash $uri;"], "servers": srv("", "", ""),
     "requests": seq(NORMALIZED_URIS)},
    {"name": "stream-chash-remote-addr", "context": "stream", "upstream": ["hash $remote_addr consistent;"],
     "servers": srv("", "", ""), "requests": [f"{ip} /" for ip in STREAM_IPS]},
    {"name": "stream-reset-peer", "context": "stream", "servers": [(0, "", "reset"), (1, "", "ok")],
     "requests": seq(["/"] * 6)},
    {"name": "stream-rr-dead-peer", "context": "stream",
     "servers": [(0, "", "ok"), (8, "", "dead"), (2, "weight=2", "ok")], "requests": seq(["/"] * 10)},
]


def lt(name, method, servers, requests, context="http", location=None):
    sc = {"name": name, "upstream": [method], "servers": servers, "requests": requests, "timed": True}
    if context != "http":
        sc["context"] = context
    if location:
        sc["location"] = location
    return sc


# least_time (nginx 1.31): head delays chosen inside nginx's 20 ms clusters (10 -> 20, 50 -> 60, 130 -> 140), so
# that a few ms of loopback jitter never moves a peer to another cluster.
LEAST_TIME = [
    lt("lt-header", "least_time header;",
       [(0, "", "ok head=10"), (1, "", "ok head=50"), (2, "", "ok head=130")], seq(["/"] * 16)),
    lt("lt-header-weights", "least_time header;",
       [(0, "", "ok head=10"), (1, "weight=3", "ok head=50"), (2, "weight=2", "ok head=130")], seq(["/"] * 20)),
    lt("lt-header-slow-body", "least_time header;",
       [(0, "", "ok head=10 body=130"), (1, "", "ok head=50"), (2, "", "ok head=90")], seq(["/"] * 12)),
    lt("lt-last-byte", "least_time last_byte;",
       [(0, "", "ok head=10 body=130"), (1, "", "ok head=50"), (2, "", "ok head=90")], seq(["/"] * 12)),
    lt("lt-dead-peer", "least_time header;",
       [(0, "", "ok head=50"), (8, "max_fails=1", "dead"), (2, "", "ok head=10")], seq(["/"] * 12)),
    lt("lt-backup", "least_time header;",
       [(7, "", "dead"), (8, "", "dead"), (2, "backup", "ok head=50"), (3, "backup", "ok head=10")],
       seq(["/"] * 8)),
    lt("lt-hold", "least_time header;", [(0, "", "ok head=10"), (1, "", "ok head=50")],
       seq(["/"] * 4) + ["127.0.0.1 /sleep/1500 hold"] + seq(["/"] * 10)),
    lt("lt-hold-inflight", "least_time header inflight;", [(0, "", "ok head=10"), (1, "", "ok head=50")],
       seq(["/"] * 4) + ["127.0.0.1 /sleep/1500 hold"] + seq(["/"] * 10)),
    lt("lt-decay", "least_time header;",
       [(0, "fail_timeout=1s", "ok head=10"), (1, "fail_timeout=1s", "ok head=50")],
       seq(["/"] * 4) + [f"127.0.0.1 / t={t}" for t in (4, 4, 4, 4, 8, 8, 8, 8)]),
    lt("stream-lt-first-byte", "least_time first_byte;",
       [(0, "", "ok head=10"), (1, "", "ok head=50"), (2, "", "ok head=130")], seq(["/"] * 10), "stream"),
    lt("stream-lt-last-byte", "least_time last_byte;",
       [(0, "", "ok head=10 body=130"), (1, "", "ok head=50")], seq(["/"] * 10), "stream"),
    lt("stream-lt-connect", "least_time connect;",
       [(0, "", "ok head=50"), (1, "", "ok"), (8, "max_fails=1", "dead")], seq(["/"] * 10), "stream"),
]
SCENARIOS += LEAST_TIME


# --------------------------------------------------------------------------------------------------------------
# configs
# --------------------------------------------------------------------------------------------------------------


def addr(off):
    return f"127.0.0.1:{BASE_PORT + off}"


def render(sc, scratch=None):
    """corelb.conf (scratch None) or the config nginx runs (with the X-Up header / access log and scratch paths)."""
    stream = sc.get("context", "http") == "stream"
    ind = "        "
    up = [f"{ind}{d}" for d in sc.get("upstream", [])]
    up += [f"{ind}server {addr(o)}{(' ' + p) if p else ''};" for o, p, _ in sc["servers"]]
    extra = [f"{ind}    {d}" if not stream else f"{ind}{d}" for d in sc.get("location", [])]
    out = ["worker_processes 1;", "", "events {", "    worker_connections 256;", "}", ""]
    if stream:
        out += ["stream {"]
        if scratch:
            out += ["    log_format golden '$upstream_addr|$status';",
                    f"    access_log {scratch}/stream.log golden;"]
        out += ["    upstream backend {", *up, "    }", "", "    server {",
                f"        listen {FRONT[0]}:{FRONT[1]};", "        proxy_pass backend;", *extra,
                "    }", "}"]
    else:
        out += ["http {"]
        if scratch:
            out += [f"    access_log {scratch}/access.log;"]
            out += [f"    {k}_temp_path {scratch}/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")]
        out += ["    upstream backend {", *up, "    }", "", "    server {",
                f"        listen {FRONT[0]}:{FRONT[1]};"]
        if scratch:
            out += ["        add_header X-Up $upstream_addr always;"]
        out += ["        location / {", "            proxy_pass http://backend;", *extra, "        }",
                "    }", "}"]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------------------------
# backends (asyncio, in a thread of this process)
# --------------------------------------------------------------------------------------------------------------


def timings(mode):
    """"ok head=10 body=130" -> ("ok", 0.010, 0.130)."""
    words = mode.split()
    t = {"head": 0, "body": 0}
    for w in words[1:]:
        k, _, v = w.partition("=")
        if k not in t:
            raise ValueError(f"bad backend timing {w!r}")
        t[k] = int(v)
    return words[0], t["head"] / 1000, t["body"] / 1000


async def serve_http(reader, writer, name, mode):
    mode, head_s, body_s = timings(mode)
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            if mode == "reset":
                writer.transport.abort()
                return
            if mode == "timeout":
                await reader.read()  # until nginx gives up and closes
                return
            path = head.split(b" ", 2)[1].decode("latin-1")
            if path.startswith("/sleep/"):
                await asyncio.sleep(int(path.split("/")[2].split("?")[0]) / 1000)
            status = int(mode[1:]) if mode.startswith("e") else 200
            body = name.encode()
            if head_s:
                await asyncio.sleep(head_s)
            writer.write(f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
                         f"X-Backend: {name}\r\n\r\n".encode())
            if body_s:
                await writer.drain()
                await asyncio.sleep(body_s)
            writer.write(body)
            await writer.drain()
            return
    except (asyncio.IncompleteReadError, ConnectionError, ValueError, IndexError):
        pass
    finally:
        writer.close()


async def serve_stream(reader, writer, name, mode):
    mode, head_s, body_s = timings(mode)
    try:
        if mode == "reset":
            writer.transport.abort()
            return
        if head_s:
            await asyncio.sleep(head_s)
        writer.write(name.encode())
        await writer.drain()
        if body_s:
            await asyncio.sleep(body_s)
    except ConnectionError:
        pass
    finally:
        writer.close()


class Backends:
    """Starts the live backends of a scenario in a background event loop."""

    def __init__(self, sc):
        self.loop = asyncio.new_event_loop()
        self.servers = []
        ready = threading.Event()
        stream = sc.get("context", "http") == "stream"

        async def start():
            for off, _, mode in sc["servers"]:
                if mode.split()[0] == "dead":
                    continue
                handler = serve_stream if stream else serve_http
                name = addr(off)
                s = await asyncio.start_server(lambda r, w, n=name, m=mode: handler(r, w, n, m), "127.0.0.1",
                                               BASE_PORT + off, reuse_address=True)
                self.servers.append(s)
            ready.set()

        self.thread = threading.Thread(target=self._run, args=(start,), daemon=True)
        self.thread.start()
        if not ready.wait(10):
            raise RuntimeError("backends did not start")

    def _run(self, start):
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(start())
        self.loop.run_forever()

    def stop(self):
        async def close():
            for s in self.servers:
                s.close()
                await s.wait_closed()
        asyncio.run_coroutine_threadsafe(close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


# --------------------------------------------------------------------------------------------------------------
# clients
# --------------------------------------------------------------------------------------------------------------


def parse_request(line):
    parts = line.split()
    req = {"src": parts[0], "uri": parts[1], "t": None, "hold": False, "host": None}
    for p in parts[2:]:
        if p == "hold":
            req["hold"] = True
        elif p.startswith("t="):
            req["t"] = float(p[2:])
        elif p.startswith("host="):
            req["host"] = p[5:]
        else:
            raise ValueError(f"bad request field {p!r} in {line!r}")
    return req


def http_request(req):
    headers = {"Connection": "close"}
    if req["host"]:
        headers["Host"] = req["host"]
    c = http.client.HTTPConnection(*FRONT, timeout=20, source_address=(req["src"], 0))
    try:
        c.request("GET", req["uri"], headers=headers)
        r = c.getresponse()
        r.read()
        return f"{r.status} {r.getheader('X-Up') or '-'}"
    finally:
        c.close()


def stream_request(req):
    s = socket.socket()
    s.settimeout(20)
    try:
        s.bind((req["src"], 0))
        s.connect(FRONT)
        while s.recv(4096):
            pass
    except ConnectionError:
        pass
    finally:
        s.close()


def wait_lines(path, n, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path):
            with open(path) as f:
                lines = f.read().splitlines()
            if len(lines) >= n:
                return lines
        time.sleep(0.02)
    raise RuntimeError(f"{path}: expected {n} log lines")


def listening(port):
    """Whether a socket listens on 127.0.0.1:port (read from /proc: a probe connection would be a stream session)."""
    want = f"0100007F:{port:04X}"
    with open("/proc/net/tcp") as f:
        return any(line.split()[1] == want and line.split()[3] == "0A" for line in f.readlines()[1:])


def wait_port(port, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        if listening(port):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def wait_free(port, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        if not listening(port):
            return
        time.sleep(0.05)
    raise RuntimeError(f"port {port} still in use")


def send_all(sc, requests, scratch):
    """Sends the requests; returns the expected lines in request order."""
    stream = sc.get("context", "http") == "stream"
    results = [None] * len(requests)
    spans = [None] * len(requests)
    held = []

    def run(i, req):
        start = time.time()
        try:
            if stream:
                stream_request(req)
                results[i] = "done"
            else:
                results[i] = http_request(req)
        except Exception as e:  # recorded as is: a scenario whose request fails this way is a bad scenario
            results[i] = f"error {type(e).__name__}: {e}"
        spans[i] = (round((start - t0) * 1000), round((time.time() - t0) * 1000))

    # align the start just after a whole second, so `t=` offsets fall on the same whole seconds as nginx's clock
    time.sleep(1.15 - (time.time() % 1.0))
    t0 = time.time()
    for i, req in enumerate(requests):
        if req["t"] is not None:
            time.sleep(max(0.0, t0 + req["t"] - time.time()))
        if req["hold"]:
            th = threading.Thread(target=run, args=(i, req), daemon=True)
            th.start()
            held.append(th)
            time.sleep(0.3)
        else:
            run(i, req)
            if stream:  # the session's log line is written when nginx finalizes it
                wait_lines(os.path.join(scratch, "stream.log"), i + 1)
    for th in held:
        th.join(30)
    if stream:
        logged = wait_lines(os.path.join(scratch, "stream.log"), len(requests))
        results = []
        for line in logged:
            up, _, status = line.rpartition("|")
            results.append(f"{status} {up}")
    return results, spans


def nginx_version(nginx):
    """(1, 31, 5) from `nginx -v`."""
    v = subprocess.run([nginx, "-v"], capture_output=True, text=True).stderr
    return tuple(int(x) for x in v.strip().rsplit("/", 1)[-1].split(".")[:3])


def static_stream(nginx):
    """Whether the binary has the stream module built in (`--with-stream`, as a source build), not loadable."""
    v = subprocess.run([nginx, "-V"], capture_output=True, text=True).stderr
    return "--with-stream " in v + " " and "--with-stream=dynamic" not in v


def record(sc, out_dir, nginx):
    requests = [parse_request(line) for line in sc["requests"]]
    if any(r["hold"] for r in requests) and sc.get("context") == "stream":
        raise ValueError("hold is http only")
    scratch = tempfile.mkdtemp(prefix="golden-")
    conf = os.path.join(scratch, "nginx.conf")
    with open(conf, "w") as f:
        f.write(render(sc, scratch))
    wait_free(FRONT[1])
    be = Backends(sc)
    globs = f"daemon off; pid {scratch}/nginx.pid;"
    if sc.get("context") == "stream" and not static_stream(nginx):
        globs += f" load_module {STREAM_MODULE};"
    cmd = [nginx, "-p", scratch, "-e", os.path.join(scratch, "error.log"), "-c", conf, "-g", globs]
    front = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_port(FRONT[1])
        got, spans = send_all(sc, requests, scratch)
    finally:
        os.killpg(front.pid, signal.SIGTERM)
        try:
            front.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(front.pid, signal.SIGKILL)
            front.wait()
        be.stop()
    bad = [g for g in got if g.startswith("error ")]
    if bad:
        raise RuntimeError(f"{sc['name']}: client errors: {bad[:3]}; see {scratch}/error.log")
    d = os.path.join(out_dir, sc["name"])
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "corelb.conf"), "w") as f:
        f.write(render(sc))
    with open(os.path.join(d, "requests"), "w") as f:
        f.write("\n".join(sc["requests"]) + "\n")
    with open(os.path.join(d, "backends"), "w") as f:
        f.write("".join(f"{addr(o)} {m}\n" for o, _, m in sc["servers"]))
    with open(os.path.join(d, "expected"), "w") as f:
        f.write("\n".join(got) + "\n")
    if sc.get("timed"):
        with open(os.path.join(d, "sent"), "w") as f:
            f.write("".join(f"{a} {b}\n" for a, b in spans))
    shutil.rmtree(scratch, ignore_errors=True)
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="record only scenarios whose name contains this")
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ap.add_argument("--list", action="store_true", help="list the scenarios and exit")
    a = ap.parse_args()
    version = nginx_version(a.nginx)
    for sc in SCENARIOS:
        if a.only and a.only not in sc["name"]:
            continue
        if a.list:
            print(sc["name"])
            continue
        if sc.get("timed") and version < (1, 31):
            print(f"{sc['name']}: skipped, least_time needs nginx 1.31 (--nginx; this one is "
                  f"{'.'.join(map(str, version))})", flush=True)
            continue
        got = record(sc, os.path.abspath(a.out), a.nginx)
        print(f"{sc['name']}: {len(got)} requests recorded", flush=True)


if __name__ == "__main__":
    sys.exit(main())
