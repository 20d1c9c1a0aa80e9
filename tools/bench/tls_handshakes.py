#!/usr/bin/env python3
"""Full TLS handshakes per second and server CPU per handshake, corelb against nginx on the same ECDSA P-256 key.

  python3 tools/bench/tls_handshakes.py [--seconds S] [--tls 1.2|1.3] BINARY ...

Each BINARY (a corelb build, or an nginx binary: a file named nginx*) serves `return 200` on a free loopback port
with `listen ... ssl`, one worker, no access log; `openssl s_time -new` then opens a new connection per request
for S seconds (one client, the handshake and one small answer each). The figure is the connections s_time counted
per second and the server process's user+system CPU (from /proc) over those connections. Needs the `openssl`
command. Stdlib only.
"""
import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

CONF = """worker_processes 1;
{main}
events {{ worker_connections 1024; }}
http {{
    access_log off;
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {dir}/ec.crt;
        ssl_certificate_key {dir}/ec.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_tickets off;
        ssl_session_cache off;
        location / {{ return 200 "ok\\n"; }}
    }}
}}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    """User + system CPU of `pid` and its threads, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def wait_port(port, limit=10.0):
    end = time.time() + limit
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port}")


def run(binary, seconds, tls, work):
    port = free_port()
    is_nginx = os.path.basename(binary).startswith("nginx")
    main = f"pid {work}/pid; error_log {work}/error.log;"
    conf = os.path.join(work, "bench.conf")
    with open(conf, "w") as f:
        f.write(CONF.format(main=main, port=port, dir=work))
    if is_nginx:
        cmd = [binary, "-p", work, "-c", conf, "-g", "daemon off; master_process off;"]
    else:
        cmd = [binary, "-c", conf]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        before, start = cpu_seconds(server.pid), time.time()
        out = subprocess.run(
            ["openssl", "s_time", "-connect", f"127.0.0.1:{port}", "-new", "-time", str(seconds),
             f"-tls1_{tls[-1]}", "-www", "/"],
            capture_output=True, text=True, check=False,
        ).stdout
        used, wall = cpu_seconds(server.pid) - before, time.time() - start
    finally:
        server.terminate()
        server.wait()
    m = re.search(r"(\d+) connections in \d+ real seconds", out)
    if not m:
        raise SystemExit(f"s_time gave no count:\n{out}")
    conns = int(m.group(1))
    return conns / wall, used / max(conns, 1) * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--tls", choices=["1.2", "1.3"], default="1.3")
    ap.add_argument("binaries", nargs="+")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", f"{work}/ec.key", "-out", f"{work}/ec.crt", "-subj", "/CN=localhost", "-days", "2"],
            check=True, capture_output=True,
        )
        print(f"TLS {args.tls}, ECDSA P-256, a new connection per request, {args.seconds}s each")
        print(f"{'binary':<40} {'handshakes/s':>12} {'server CPU us/handshake':>24}")
        for b in args.binaries:
            rate, cpu = run(b, args.seconds, args.tls, work)
            print(f"{b:<40} {rate:>12.0f} {cpu:>24.0f}")


if __name__ == "__main__":
    sys.exit(main())
