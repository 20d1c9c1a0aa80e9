#!/usr/bin/env python3
"""One backend 10x slower than the others: each balancer's tail latency and the slow peer's share, corelb beside
nginx (issue 13's end-to-end benchmark).

  python3 tools/bench/slow_peer.py [--corelb target/release/corelb] [--nginx PATH] [--duration S] [--conns C]
                                   [--fast-ms MS] [--slow-ms MS] [--rounds N] [--only NAME,...]

Four keep-alive HTTP backends (one Python asyncio process of its own, on loopback) answer `GET /` after FAST ms
(three of them) or SLOW ms (the fourth, default 10x FAST) and count what they serve. Each front (corelb with round
robin, least_conn, `least_time header`, `random two ewma`, `fair`; nginx, which must be 1.31+ for `least_time`,
with round robin, least_conn and `least_time header`) runs with `worker_processes 1`, `keepalive 32` to the
backends, gets 1 s of warm-up, then DURATION s of closed-loop load from C connections (`corelb bench`, one
thread). A line per front and round: requests/s, p50/p99/p99.9 latency (ms) and the slow backend's share of the
requests served; the last lines are the medians over the rounds. Stdlib only; nothing is asserted.
"""
import argparse
import asyncio
import json
import multiprocessing
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def backends_main(ports, delays, ready):
    """The backends' process: one server per port, `GET /__count` answers the counts as JSON, `/__reset` zeroes."""
    counts = [0] * len(ports)

    async def serve(reader, writer, i):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1]
                if path == b"/__count":
                    body = json.dumps(counts).encode()
                elif path == b"/__reset":
                    counts[:] = [0] * len(counts)
                    body = b"ok"
                else:
                    await asyncio.sleep(delays[i] / 1000)
                    counts[i] += 1
                    body = b"backend %d\n" % i
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, IndexError):
            pass
        finally:
            writer.close()

    async def main():
        for i, p in enumerate(ports):
            await asyncio.start_server(lambda r, w, i=i: serve(r, w, i), "127.0.0.1", p, reuse_address=True)
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(main())


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return r.read()


def config(method, front, ports, scratch, nginx):
    servers = "\n".join(f"        server 127.0.0.1:{p};" for p in ports)
    temps = "".join(f"    {k}_temp_path {scratch}/{k};\n" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")) \
        if nginx else ""
    return f"""worker_processes 1;
error_log {scratch}/error.log;
pid {scratch}/front.pid;
events {{ worker_connections 1024; }}
http {{
    access_log off;
{temps}    upstream backend {{
        {method}
        zone backend 64k;
{servers}
        keepalive 32;
    }}
    server {{
        listen 127.0.0.1:{front};
        location / {{
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}
}}
"""


def listening(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def run_front(name, cmd, conf, front, args, ports, scratch):
    path = os.path.join(scratch, f"{name.replace(' ', '_')}.conf")
    with open(path, "w") as f:
        f.write(conf)
    proc = subprocess.Popen(cmd + ["-c", path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        end = time.monotonic() + 10
        while not listening(front):
            if time.monotonic() > end or proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.poll() is not None else ""
                raise RuntimeError(f"{name}: the front did not start: {err.strip()}")
            time.sleep(0.05)
        bench = [args.corelb, "bench", f"http://127.0.0.1:{front}/", "-c", str(args.conns), "-t", "1"]
        subprocess.run(bench + ["-d", "1s"], check=True, capture_output=True)  # warm-up
        get(ports[0], "/__reset")
        out = os.path.join(scratch, "bench.json")
        subprocess.run(bench + ["-d", f"{args.duration}s", "--json", out], check=True, capture_output=True)
        counts = json.loads(get(ports[0], "/__count"))
        with open(out) as f:
            r = json.load(f)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        end = time.monotonic() + 10
        while listening(front) and time.monotonic() < end:
            time.sleep(0.05)
    lat = r["latency_us"]
    pct = lambda p: lat.get(f"p{p}", float("nan")) / 1000
    total = sum(counts) or 1
    return {"rps": r["requests_per_sec"], "p50": pct(50), "p99": pct(99), "p999": pct(99.9),
            "slow": counts[-1] / total, "errors": sum(r["errors"].values()) + r["non_2xx_3xx"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corelb", default=os.path.join(ROOT, "target", "release", "corelb"))
    ap.add_argument("--nginx", default=shutil.which("nginx"), help="nginx 1.31+ (for least_time); '' for none")
    ap.add_argument("--duration", type=float, default=8)
    ap.add_argument("--conns", type=int, default=16)
    ap.add_argument("--fast-ms", type=float, default=2)
    ap.add_argument("--slow-ms", type=float)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--only", help="comma-separated front names (e.g. 'corelb least_time,nginx least_time')")
    a = ap.parse_args()
    slow = a.slow_ms if a.slow_ms is not None else 10 * a.fast_ms
    ports = [free_port() for _ in range(4)]
    delays = [a.fast_ms] * 3 + [slow]
    ready = multiprocessing.Event()
    be = multiprocessing.Process(target=backends_main, args=(ports, delays, ready), daemon=True)
    be.start()
    if not ready.wait(10):
        sys.exit("the backends did not start")
    methods = [("round_robin", ""), ("least_conn", "least_conn;"), ("least_time", "least_time header;"),
               ("p2c_ewma", "random two ewma;"), ("fair", "fair;")]
    fronts = [(f"corelb {n}", [a.corelb], m, False) for n, m in methods]
    if a.nginx:
        fronts += [(f"nginx {n}", [a.nginx, "-g", "daemon off;"], m, True) for n, m in methods[:3]]
    if a.only:
        want = {w.strip() for w in a.only.split(",")}
        fronts = [f for f in fronts if f[0] in want]
    print(f"backends: 3 x {a.fast_ms} ms, 1 x {slow} ms; {a.conns} connections, {a.duration} s per run", flush=True)
    results = {f[0]: [] for f in fronts}
    with tempfile.TemporaryDirectory(prefix="slow-peer-") as scratch:
        for rnd in range(a.rounds):
            order = fronts if rnd % 2 == 0 else list(reversed(fronts))
            for name, cmd, method, nginx in order:
                front = free_port()
                try:
                    r = run_front(name, cmd, config(method, front, ports, scratch, nginx), front, a, ports, scratch)
                except (RuntimeError, subprocess.CalledProcessError) as e:
                    print(f"SKIP {name}: {e}", flush=True)
                    continue
                results[name].append(r)
                print(f"round {rnd + 1} {name:<20} {r['rps']:9.0f} req/s  p50 {r['p50']:6.2f}  p99 {r['p99']:6.2f}  "
                      f"p99.9 {r['p999']:6.2f} ms  slow share {100 * r['slow']:5.1f}%  errors {r['errors']}",
                      flush=True)
    be.terminate()
    print("medians:")
    for name, rs in results.items():
        if not rs:
            continue
        med = lambda k: statistics.median(x[k] for x in rs)
        print(f"  {name:<20} {med('rps'):9.0f} req/s  p50 {med('p50'):6.2f}  p99 {med('p99'):6.2f}  "
              f"p99.9 {med('p999'):6.2f} ms  slow share {100 * med('slow'):5.1f}%")


if __name__ == "__main__":
    sys.exit(main())
