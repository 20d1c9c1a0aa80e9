#!/usr/bin/env python3
"""Memory per idle keepalive client connection: corelb (tokio, glommio) and nginx, the same config for each.

  python3 tools/bench/idle_memory.py [--clients N] [--warmup W] [--batch B] [--settle S] [--runtimes tokio,glommio]
      [--nginx PATH] [--tls] [CORELB_BINARY]

Each front (one worker) proxies to a backend (a `return 200` server of the same binary, its own process) through
an upstream with `keepalive 16`, with `keepalive_timeout 300s`. N clients connect, each sends one request and
reads its answer, then stays idle; the figure is the front's RSS growth (VmRSS of the front's processes, from
/proc) divided by N, after a warm-up of W clients (200 unless told) that are then closed (so that pools and allocator
arenas are there before the baseline). Clients come in batches of B (500 unless told), each batch's requests sent
at once: a front keeps what its busiest moment needed (spare buffer sets, allocator arenas), which a warm-up of one
batch has already paid before the baseline; `--batch 1` serves the clients one at a time. Both samples are taken S
seconds (3 unless told) after the clients before them: a corelb shard frees the spare buffer sets and burst blocks a
batch left once they have gone unused for a second, at its next trim (1-2 s later), and the figure is what the idle
clients hold, not the last batch's leftovers (1 s before 2026-12-07, which caught them). Prints one line per front. Stdlib only; raises its own RLIMIT_NOFILE. `--tls`: the
front listens with `ssl` (an ECDSA P-256 certificate made with `openssl req`, TLS 1.3, no session resumption) and
each client makes its handshake before its request (one at a time, whatever the batch: slower to set up).
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
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, proc, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"the process exited ({proc.returncode}) before listening on {port}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port}")


def rss_kib(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def group_pids(pid):
    """The process and its children (nginx's master and worker)."""
    pids = [pid]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            pids += [int(p) for p in f.read().split()]
    except OSError:
        pass
    return pids


FRONT = """worker_processes 1;
{main}
events {{ worker_connections {conns}; }}
http {{
    access_log off;
    upstream b {{ server 127.0.0.1:{backend}; keepalive 16; }}
    server {{
        listen 127.0.0.1:{front}{ssl};
{certs}        keepalive_timeout 300s;
        keepalive_requests 100000;
        location / {{ proxy_pass http://b; proxy_http_version 1.1; proxy_set_header Connection ""; }}
    }}
}}
"""

BACKEND = """worker_processes 1;
{main}
events {{ worker_connections 1024; }}
http {{
    access_log off;
    server {{ listen 127.0.0.1:{backend}; keepalive_timeout 300s; location / {{ return 200 "ok"; }} }}
}}
"""


def start(cmd, prefix):
    return subprocess.Popen(cmd, cwd=prefix, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def command(kind, binary, conf, prefix):
    if kind == "nginx":
        return [binary, "-p", prefix + "/", "-c", conf, "-g", "daemon off; error_log stderr;"]
    return [binary, "-c", conf, "--runtime", kind]


def open_clients(port, n, per_batch=500):
    """n connections, each with one request answered, per_batch at a time; returns the sockets (kept open)."""
    socks = []
    sel = selectors.DefaultSelector()
    request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    for start_at in range(0, n, per_batch):
        batch = []
        for _ in range(min(per_batch, n - start_at)):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(request)
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ, bytearray())
            batch.append(s)
        waiting = len(batch)
        deadline = time.monotonic() + 30
        while waiting and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=1):
                buf = key.data
                chunk = key.fileobj.recv(4096)
                if not chunk:
                    raise SystemExit("the front closed a client connection")
                buf += chunk
                if buf.endswith(b"ok") and b"\r\n\r\n" in buf:
                    sel.unregister(key.fileobj)
                    waiting -= 1
        if waiting:
            raise SystemExit(f"{waiting} clients got no answer")
        socks += batch
    return socks


def open_tls_clients(port, n, ctx):
    """n TLS connections, each with its handshake done and one request answered; returns them (kept open)."""
    import ssl
    socks = []
    request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    for _ in range(n):
        s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=30), server_hostname="localhost")
        s.sendall(request)
        buf = b""
        while not (buf.endswith(b"ok") and b"\r\n\r\n" in buf):
            try:
                chunk = s.recv(4096)
            except ssl.SSLError as e:
                raise SystemExit(f"a TLS client failed: {e}")
            if not chunk:
                raise SystemExit("the front closed a client connection")
            buf += chunk
        socks.append(s)
    return socks


def tls_files(d):
    """An ECDSA P-256 certificate and key for `localhost` in `d`; the client context that trusts it."""
    import ssl
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost"], check=True, capture_output=True)
    ctx = ssl.create_default_context(cafile=cert)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    return cert, key, ctx


def measure(kind, binary, clients, warmup, per_batch, tls=False, settle=3.0):
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "logs"), exist_ok=True)
        front, backend = free_port(), free_port()
        ssl_on, certs, ctx = "", "", None
        if tls:
            cert, key, ctx = tls_files(d)
            ssl_on = " ssl"
            certs = (f"        ssl_certificate {cert};\n        ssl_certificate_key {key};\n"
                     "        ssl_session_tickets off;\n        ssl_protocols TLSv1.2 TLSv1.3;\n")
        with open(os.path.join(d, "front.conf"), "w") as f:
            f.write(FRONT.format(main="", conns=clients + 1000, backend=backend, front=front, ssl=ssl_on,
                                 certs=certs))
        with open(os.path.join(d, "backend.conf"), "w") as f:
            f.write(BACKEND.format(main="", backend=backend))
        back = start(command(kind, binary, os.path.join(d, "backend.conf"), d), d)
        fr = start(command(kind, binary, os.path.join(d, "front.conf"), d), d)
        try:
            wait_listening(backend, back)
            wait_listening(front, fr)
            opener = (lambda p, n: open_tls_clients(p, n, ctx)) if tls else (lambda p, n: open_clients(p, n, per_batch))
            warm = opener(front, warmup)
            for s in warm:
                s.close()
            # each sample waits for the shard's trim to free what a batch served at once left (spare buffer sets and
            # burst blocks unused for a second go at the next trim): an idle client's memory, not the last batch's
            time.sleep(settle)
            pids = group_pids(fr.pid)
            before = rss_kib(pids)
            held = opener(front, clients)
            time.sleep(settle)
            after = rss_kib(pids)
            per = (after - before) * 1024 / clients
            what = "idle TLS clients" if tls else "idle clients"
            print(f"{kind:8} {os.path.basename(binary):12} {clients} {what}: RSS {before} -> {after} KiB, "
                  f"{per:,.0f} B per connection")
            for s in held:
                s.close()
        finally:
            for p in (fr, back):
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=9000)
    ap.add_argument("--warmup", type=int, default=200, help="clients served and closed before the baseline")
    ap.add_argument("--batch", type=int, default=500, help="clients whose requests are sent at once")
    ap.add_argument("--settle", type=float, default=3.0,
                    help="seconds to wait before each RSS sample (1 before 2026-12-07: the last batch's peak not yet "
                         "freed by the shard's trim)")
    ap.add_argument("--runtimes", default="tokio,glommio")
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ap.add_argument("--tls", action="store_true", help="clients over TLS 1.3 (a handshake each)")
    ap.add_argument("binary", nargs="?", default="target/release/corelb")
    a = ap.parse_args()
    # each process holds the clients once (this one, the front); the hard limit is what a container allows
    want = a.clients + 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            raise SystemExit(f"RLIMIT_NOFILE's hard limit {hard} is below {want}: use fewer --clients")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    for rt in a.runtimes.split(","):
        if rt:
            measure(rt, a.binary, a.clients, a.warmup, a.batch, a.tls, a.settle)
    if a.nginx and os.path.exists(a.nginx):
        measure("nginx", a.nginx, a.clients, a.warmup, a.batch, a.tls, a.settle)


if __name__ == "__main__":
    sys.exit(main())
