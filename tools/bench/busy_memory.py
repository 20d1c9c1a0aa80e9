#!/usr/bin/env python3
"""Memory per active client connection and per idle upstream keepalive connection: corelb (tokio, glommio) and nginx.

  python3 tools/bench/busy_memory.py [--conns N] [--warmup W] [--runtimes tokio,glommio] [--nginx PATH]
      [CORELB_BINARY]

Each front (one worker, the config of idle_memory.py but `keepalive N` in the upstream) proxies to a backend this
script runs itself, which holds the requests until N of them wait at once, then answers them all (keep-alive).
N clients connect and each sends one request: once the backend holds all N, the front's RSS growth over its baseline,
divided by N, is the memory of an active connection (a client connection whose request waits for its upstream's
answer, with that upstream connection). Then the backend answers, the clients read their answers and close, and the
front's N upstream connections wait idle in its keepalive pool: the growth over the baseline, divided by N, is the
memory of an idle upstream connection (with what the busy moment left behind; the lowest RSS sampled over 4 s). Before the baseline, a warm-up of W
such requests (200 unless told), answered and closed. Prints two lines per front. Stdlib only.
"""
import argparse
import os
import resource
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from idle_memory import FRONT, command, free_port, group_pids, rss_kib, start, wait_listening  # noqa: E402

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok"


class HoldingBackend:
    """A backend on `port` that holds each request while `hold` is set, and answers them all once it is not."""

    def __init__(self, port):
        self.hold = False
        self.waiting = []
        self.held_max = 0
        self.lock = threading.Lock()
        self.stop = False
        self.listener = socket.create_server(("127.0.0.1", port), backlog=4096)
        self.listener.setblocking(False)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        sel = selectors.DefaultSelector()
        sel.register(self.listener, selectors.EVENT_READ, None)
        while not self.stop:
            for key, _ in sel.select(timeout=0.1):
                if key.data is None:
                    try:
                        conn, _ = self.listener.accept()
                    except BlockingIOError:
                        continue
                    conn.setblocking(False)
                    sel.register(conn, selectors.EVENT_READ, bytearray())
                    continue
                try:
                    chunk = key.fileobj.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    sel.unregister(key.fileobj)
                    key.fileobj.close()
                    continue
                key.data.extend(chunk)
                while b"\r\n\r\n" in key.data:
                    end = key.data.index(b"\r\n\r\n") + 4
                    del key.data[:end]
                    with self.lock:
                        self.waiting.append(key.fileobj)
                        self.held_max = max(self.held_max, len(self.waiting))
            with self.lock:
                if not self.hold:
                    for conn in self.waiting:
                        try:
                            conn.setblocking(True)
                            conn.sendall(ANSWER)
                            conn.setblocking(False)
                        except OSError:
                            pass
                    self.waiting.clear()

    def holding(self):
        with self.lock:
            return len(self.waiting)


def send_requests(port, n):
    """n client connections, each with one request sent; returns them."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        socks.append(s)
    return socks


def read_answers(socks, timeout=60):
    sel = selectors.DefaultSelector()
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, bytearray())
    waiting = len(socks)
    deadline = time.monotonic() + timeout
    while waiting and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1):
            chunk = key.fileobj.recv(4096)
            if not chunk:
                raise SystemExit("the front closed a client connection")
            key.data.extend(chunk)
            if key.data.endswith(b"ok") and b"\r\n\r\n" in key.data:
                sel.unregister(key.fileobj)
                waiting -= 1
    if waiting:
        raise SystemExit(f"{waiting} clients got no answer")


def round_of(backend, front, n, measure=None):
    """n requests held by the backend at once (`measure` called then), answered, their clients closed."""
    backend.hold = True
    socks = send_requests(front, n)
    deadline = time.monotonic() + 60
    while backend.holding() < n:
        if time.monotonic() > deadline:
            raise SystemExit(f"the backend holds {backend.holding()} of {n} requests (at most {backend.held_max})")
        time.sleep(0.05)
    if measure:
        measure()
    backend.hold = False
    read_answers(socks)
    for s in socks:
        s.close()


def settled_rss(pids, seconds=4.0):
    """The front's lowest RSS over `seconds` (sampled every 0.25 s): once it has closed what it was told to close and
    its shard's tick has given back what the busy moment left (a loaded machine can delay both by a second or two)."""
    low = rss_kib(pids)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.25)
        low = min(low, rss_kib(pids))
    return low


def measure(kind, binary, conns, warmup):
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "logs"), exist_ok=True)
        front, port = free_port(), free_port()
        conf = FRONT.format(main="", conns=2 * conns + 1000, backend=port, front=front, ssl="", certs="")
        conf = conf.replace("keepalive 16;", f"keepalive {conns};")
        with open(os.path.join(d, "front.conf"), "w") as f:
            f.write(conf)
        backend = HoldingBackend(port)
        fr = start(command(kind, binary, os.path.join(d, "front.conf"), d), d)
        try:
            wait_listening(front, fr)
            pids = group_pids(fr.pid)
            round_of(backend, front, warmup)
            time.sleep(1)
            before = rss_kib(pids)
            active = {}

            def at_peak():
                time.sleep(1)
                active["rss"] = rss_kib(pids)

            round_of(backend, front, conns, at_peak)
            after = settled_rss(pids)
            name = os.path.basename(binary)
            per = (active["rss"] - before) * 1024 / conns
            print(f"{kind:8} {name:12} {conns} active connections: RSS {before} -> {active['rss']} KiB, "
                  f"{per:,.0f} B per connection (client and upstream)")
            per = (after - before) * 1024 / conns
            print(f"{kind:8} {name:12} {conns} idle upstream connections: RSS {before} -> {after} KiB, "
                  f"{per:,.0f} B per connection")
        finally:
            backend.stop = True
            fr.terminate()
            try:
                fr.wait(timeout=10)
            except subprocess.TimeoutExpired:
                fr.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conns", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200, help="requests held, answered and closed before the baseline")
    ap.add_argument("--runtimes", default="tokio,glommio")
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ap.add_argument("binary", nargs="?", default="target/release/corelb")
    a = ap.parse_args()
    # this process holds each client and the backend's side of each upstream connection
    want = 2 * a.conns + 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            raise SystemExit(f"RLIMIT_NOFILE's hard limit {hard} is below {want}: use fewer --conns")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    for rt in a.runtimes.split(","):
        if rt:
            measure(rt, a.binary, a.conns, a.warmup)
    if a.nginx and os.path.exists(a.nginx):
        measure("nginx", a.nginx, a.conns, a.warmup)


if __name__ == "__main__":
    sys.exit(main())
