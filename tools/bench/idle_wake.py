#!/usr/bin/env python3
"""Latency of a request on a keepalive connection after a short idle time and after a long one.

  python3 tools/bench/idle_wake.py [--requests N] [--runtimes tokio,glommio] CORELB_BINARY...

One front per binary and runtime (one worker, `return 200 "ok"`), one client connection: N requests each after
5 ms of idle, then N each after 300 ms (on glommio a connection idle for a tick, 50-100 ms, parks its socket in
the shard's epoll set: the second series wakes parked connections, the first does not). Prints the median and
the 90th percentile of each series, measured by the client from its send to the answer's last byte. Stdlib only.
"""
import argparse
import os
import socket
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import idle_memory  # noqa: E402  (the config, the process and the port helpers)

REQUEST = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"


def one(s):
    """Sends one request, reads its answer; microseconds taken."""
    t = time.perf_counter()
    s.sendall(REQUEST)
    buf = b""
    while not (buf.endswith(b"ok") and b"\r\n\r\n" in buf):
        chunk = s.recv(4096)
        if not chunk:
            raise SystemExit("the front closed the connection")
        buf += chunk
    return (time.perf_counter() - t) * 1e6


def measure(binary, runtime, n):
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "logs"), exist_ok=True)
        port = idle_memory.free_port()
        conf = os.path.join(d, "front.conf")
        with open(conf, "w") as f:
            f.write(idle_memory.BACKEND.format(main="", backend=port))
        p = idle_memory.start([binary, "-c", conf, "--runtime", runtime], d)
        try:
            idle_memory.wait_listening(port, p)
            s = socket.create_connection(("127.0.0.1", port))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            one(s)
            for idle in (0.005, 0.3):
                xs = []
                for _ in range(n):
                    time.sleep(idle)
                    xs.append(one(s))
                xs.sort()
                print(f"{runtime:8} {os.path.basename(binary):14} after {idle * 1000:3.0f} ms idle: "
                      f"median {statistics.median(xs):,.0f} us, p90 {xs[int(len(xs) * 0.9)]:,.0f} us")
            s.close()
        finally:
            p.terminate()
            p.wait(timeout=10)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--runtimes", default="tokio,glommio")
    ap.add_argument("binaries", nargs="+")
    a = ap.parse_args()
    for rt in a.runtimes.split(","):
        for b in a.binaries:
            measure(b, rt, a.requests)


if __name__ == "__main__":
    sys.exit(main())
