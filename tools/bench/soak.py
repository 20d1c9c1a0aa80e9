#!/usr/bin/env python3
"""A soak run (issue 11): minutes of mixed keep-alive and new-connection load through corelb, with reloads, API
changes and a backend killed and restarted; RSS, open descriptors and the zone's counters sampled every second.

  python3 tools/bench/soak.py [--corelb target/release/corelb] [--minutes M] [--conns C] [--workers W]
                              [--csv FILE] [--runtime tokio|glommio]

Two backends (Python processes on loopback, counting in shared memory the answers they sent, so that a killed one's
count survives it) behind an upstream with a `zone`, `keepalive 16` and the nginx Plus API (`api write=on`). Load:
`corelb bench` with C keep-alive connections for the whole run, and a client thread that opens a new connection
for every request (`Connection: close`). Events: a reload (SIGHUP) every 10 s, an API PATCH of the first server's
weight (1 <-> 3) every 7 s, the second backend killed (SIGKILL) a third of the way in and started again at half way.
Every second a line (or a CSV row): RSS, open descriptors, the zone's requests, active and fails per peer, the
generation. After the load: 5 s of quiet, then the checks, each printed PASS or FAIL (exit 1 on a FAIL):

- RSS returns to within 10% (or 4 MiB) of its value before the load; open descriptors to within 4 of theirs;
- nothing counted twice or lost: the answers the backends sent equal the successful tries the zone counted
  (its `requests` less its `fails`) and the answers the clients got, each within the requests that were in
  flight when a count was read (at most C + 1);
- no client request failed but those in flight on the killed backend (which nginx does not retry once the
  upstream has started to answer: at most C + 1).

Not run by `.ci/run`. Stdlib only.
"""
import argparse
import json
import multiprocessing
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def backend_main(port, index, counts):
    """One backend: HTTP/1.1 with keep-alive, `200` with a small body; counts each answer once it is written."""
    import asyncio

    async def serve(reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                close = b"connection: close" in head.lower()
                body = b"backend %d\n" % index
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s"
                             % (len(body), b"Connection: close\r\n" if close else b"", body))
                await writer.drain()
                with counts.get_lock():
                    counts[index] += 1
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def main():
        server = await asyncio.start_server(serve, "127.0.0.1", port, reuse_address=True)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


class Backend:
    def __init__(self, index, counts):
        self.index, self.counts, self.port, self.proc = index, counts, free_port(), None

    def start(self):
        self.proc = multiprocessing.Process(target=backend_main, args=(self.port, self.index, self.counts),
                                            daemon=True)
        self.proc.start()
        wait(lambda: connectable(self.port), 10, f"backend {self.index}")

    def kill(self):
        self.proc.kill()
        self.proc.join(5)


def connectable(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def wait(check, timeout, what):
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            raise RuntimeError(f"{what} did not come up")
        time.sleep(0.05)


CONFIG = """worker_processes {workers};
worker_runtime {runtime};
pid {scratch}/corelb.pid;
error_log {scratch}/error.log notice;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    upstream backend {{
        zone backend 64k;
        server 127.0.0.1:{p0} weight={w};
        server 127.0.0.1:{p1};
        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{front};
        location / {{
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
        location /api {{
            api write=on;
        }}
    }}
}}
"""


def proc_sample(pid):
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def api(front, path, method="GET", body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{front}/api/9{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None)
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read() or b"null")


def zone(front):
    up = api(front, "/http/upstreams/backend")
    return {p["server"]: p for p in up["peers"]}


class Closer(threading.Thread):
    """New-connection load: one request per connection until stopped; counts answers and failures."""

    def __init__(self, front):
        super().__init__(daemon=True)
        self.front, self.ok, self.failed, self.stop = front, 0, 0, threading.Event()

    def run(self):
        req = b"GET / HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n"
        while not self.stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", self.front), timeout=5) as s:
                    s.sendall(req)
                    data = b""
                    while True:
                        chunk = s.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                if data.startswith(b"HTTP/1.1 200"):
                    self.ok += 1
                else:
                    self.failed += 1
            except OSError:
                self.failed += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corelb", default=os.path.join(ROOT, "target", "release", "corelb"))
    ap.add_argument("--minutes", type=float, default=3)
    ap.add_argument("--conns", type=int, default=32)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--runtime", default="tokio", choices=["tokio", "glommio"])
    ap.add_argument("--csv", help="write the per-second samples to FILE")
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    duration = a.minutes * 60
    counts = multiprocessing.Array("l", 2)
    backends = [Backend(0, counts), Backend(1, counts)]
    for b in backends:
        b.start()
    scratch = tempfile.mkdtemp(prefix="soak-")
    front = free_port()
    conf = os.path.join(scratch, "corelb.conf")

    def write_conf(weight):
        with open(conf, "w") as f:
            f.write(CONFIG.format(workers=a.workers, runtime=a.runtime, scratch=scratch, front=front,
                                  p0=backends[0].port, p1=backends[1].port, w=weight))

    write_conf(1)
    proxy = subprocess.Popen([a.corelb, "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    wait(lambda: connectable(front), 10, "corelb")
    # warm-up: pools and allocator arenas exist before the baseline
    subprocess.run([a.corelb, "bench", f"http://127.0.0.1:{front}/", "-c", str(a.conns), "-d", "2s", "-t", "1"],
                   check=True, capture_output=True)
    time.sleep(2)
    base_rss, base_fds = proc_sample(proxy.pid)
    z0 = zone(front)
    sent0 = sum(counts)
    print(f"baseline: RSS {base_rss / 2**20:.1f} MiB, {base_fds} descriptors; {duration:.0f} s of load", flush=True)
    out_json = os.path.join(scratch, "bench.json")
    bench = subprocess.Popen([a.corelb, "bench", f"http://127.0.0.1:{front}/", "-c", str(a.conns), "-d",
                              f"{duration}s", "-t", "1", "--json", out_json],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    closer = Closer(front)
    closer.start()
    rows = []
    start = time.monotonic()
    weight, next_reload, next_patch = 1, 10, 7
    killed = restarted = False
    peak_rss = base_rss
    while time.monotonic() - start < duration:
        t = time.monotonic() - start
        events = []
        if t >= next_reload:
            os.kill(proxy.pid, signal.SIGHUP)
            next_reload += 10
            events.append("reload")
        if t >= next_patch:
            weight = 3 if weight == 1 else 1
            ids = {p["server"]: p["id"] for p in api(front, "/http/upstreams/backend")["peers"]}
            api(front, f"/http/upstreams/backend/servers/{ids[f'127.0.0.1:{backends[0].port}']}", "PATCH",
                {"weight": weight})
            next_patch += 7
            events.append(f"weight={weight}")
        if not killed and t >= duration / 3:
            backends[1].kill()
            killed = True
            events.append("backend 1 killed")
        if killed and not restarted and t >= duration / 2:
            backends[1].start()
            restarted = True
            events.append("backend 1 restarted")
        rss, fds = proc_sample(proxy.pid)
        peak_rss = max(peak_rss, rss)
        z = zone(front)
        gen = api(front, "/nginx")["generation"]
        row = [round(t, 1), rss, fds, gen] + [x for p in z.values() for x in (p["requests"], p["active"], p["fails"])]
        rows.append(row)
        print(f"{t:6.1f}s RSS {rss / 2**20:6.1f} MiB  fds {fds:5d}  gen {gen:3d}  "
              + "  ".join(f"{s}: req {p['requests']} act {p['active']} fails {p['fails']}" for s, p in z.items())
              + (f"  [{', '.join(events)}]" if events else ""), flush=True)
        time.sleep(max(0.0, 1 - (time.monotonic() - start - t)))
    bench.wait(60)
    closer.stop.set()
    closer.join(10)
    time.sleep(5)
    rss, fds = proc_sample(proxy.pid)
    z = zone(front)
    with open(out_json) as f:
        br = json.load(f)
    sent = sum(counts) - sent0
    tries_ok = sum(p["requests"] - p["fails"] for p in z.values()) - sum(p["requests"] - p["fails"]
                                                                          for p in z0.values())
    client_ok = br["status"].get("200", 0) + closer.ok
    client_failed = br["non_2xx_3xx"] + sum(br["errors"].values()) + closer.failed
    slack = a.conns + 1
    checks = [
        (f"RSS back to baseline: {rss / 2**20:.1f} MiB after, {base_rss / 2**20:.1f} before "
         f"(peak {peak_rss / 2**20:.1f})", rss <= max(base_rss * 1.1, base_rss + 4 * 2**20)),
        (f"descriptors back to baseline: {fds} after, {base_fds} before", fds <= base_fds + 4),
        (f"backends' answers {sent} = zone's successful tries {tries_ok} (within {slack})",
         abs(sent - tries_ok) <= slack),
        (f"backends' answers {sent} = clients' answers {client_ok} (within {slack})", abs(sent - client_ok) <= slack),
        (f"failed client requests {client_failed} (within {slack}: those in flight on the killed backend)",
         client_failed <= slack),
        (f"every peer idle after the load (active: {[p['active'] for p in z.values()]})",
         all(p["active"] == 0 for p in z.values())),
    ]
    if a.csv:
        with open(a.csv, "w") as f:
            f.write("t,rss,fds,generation," + ",".join(f"{s}_{k}" for s in z for k in ("requests", "active", "fails"))
                    + "\n")
            f.writelines(",".join(map(str, r)) + "\n" for r in rows)
    os.killpg(proxy.pid, signal.SIGTERM)
    proxy.wait(10)
    for b in backends:
        b.kill()
    failed = 0
    for what, ok in checks:
        print(("PASS " if ok else "FAIL ") + what)
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
