#!/usr/bin/env python3
"""UDP load balancing, corelb beside nginx (issue 14 point 7's benchmark): datagrams per second and the proxy's CPU
per datagram, DNS-like (one answer per datagram: `proxy_responses 1`, so every datagram is a session of its own).

  python3 tools/bench/udp.py [--corelb target/release/corelb] [--nginx /usr/sbin/nginx] [--datagrams N]
                             [--clients C] [--rounds R] [--payload BYTES] [--mode dns|flow]

`--mode flow` leaves `proxy_responses` unset instead: each client's datagrams are one session (its binding kept
for `proxy_timeout`), so what is measured is the relay of datagrams over one upstream socket, not sessions.

Two UDP echo backends (one process each) behind an upstream of two servers; each front runs with
`worker_processes 1` and gets C client processes that send a datagram, wait for its answer and send the next (a
closed loop; a datagram lost is given up after 1 s and counted), N datagrams in all per round, fronts alternated
round by round. A line per front and round: datagrams/s, the proxy process's CPU (user + system, from
/proc/PID/stat) per datagram in microseconds, and the lost ones; then the medians and corelb/nginx ratios. The
Python clients and backends share the machine's cores with the proxy, so datagrams/s is bounded by them; the CPU
per datagram is the proxy's own. Stdlib only; nothing is asserted.
"""
import argparse
import multiprocessing
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TICK = os.sysconf("SC_CLK_TCK")


def udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def echo(port, ready):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", port))
    ready.set()
    while True:
        data, peer = s.recvfrom(65535)
        s.sendto(data, peer)


def client(port, count, payload, out):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect(("127.0.0.1", port))
    s.settimeout(1.0)
    lost = 0
    data = b"x" * payload
    for _ in range(count):
        s.send(data)
        try:
            s.recv(65535)
        except (socket.timeout, ConnectionRefusedError):
            lost += 1
    out.put(lost)


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def config(kind, port, backends, tmp, mode):
    ups = "".join(f"        server 127.0.0.1:{b};\n" for b in backends)
    stream = f"""stream {{
    upstream u {{
{ups}    }}
    server {{
        listen 127.0.0.1:{port} udp;
        proxy_pass u;
{"        proxy_responses 1;" + chr(10) if mode == "dns" else ""}        proxy_timeout 10s;
    }}
}}
"""
    head = f"worker_processes 1;\npid {tmp}/{kind}.pid;\nerror_log {tmp}/{kind}-error.log;\ndaemon off;\n"
    if kind == "nginx":
        for mod in ("/usr/lib/nginx/modules/ngx_stream_module.so", "/usr/share/nginx/modules/ngx_stream_module.so"):
            if os.path.exists(mod):
                head = f"load_module {mod};\n" + head
                break
        head += "master_process off;\n"
    return head + "events { worker_connections 4096; }\n" + stream


def wait_bound(port, limit=10.0):
    end = time.time() + limit
    while time.time() < end:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return True
        time.sleep(0.05)
    return False


def round_of(kind, binary, args, backends, tmp):
    port = udp_port()
    path = os.path.join(tmp, f"{kind}.conf")
    with open(path, "w") as f:
        f.write(config(kind, port, backends, tmp, args.mode))
    cmd = [binary, "-c", path] if kind == "corelb" else [binary, "-p", tmp, "-c", path]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_bound(port):
            raise SystemExit(f"{kind} did not bind 127.0.0.1:{port}")
        # warm-up
        q = multiprocessing.Queue()
        client(port, 200, args.payload, q)
        q.get()
        per = args.datagrams // args.clients
        before, started = cpu_ticks(proc.pid), time.time()
        workers = [
            multiprocessing.Process(target=client, args=(port, per, args.payload, q)) for _ in range(args.clients)
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        elapsed, ticks = time.time() - started, cpu_ticks(proc.pid) - before
        lost = sum(q.get() for _ in workers)
        done = per * args.clients
        return done / elapsed, ticks / TICK / done * 1e6, lost
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corelb", default=os.path.join(ROOT, "target/release/corelb"))
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ap.add_argument("--datagrams", type=int, default=100_000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--payload", type=int, default=64)
    ap.add_argument("--mode", choices=("dns", "flow"), default="dns")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="corelb-udp-bench-")
    backends = [udp_port(), udp_port()]
    procs = []
    for b in backends:
        ready = multiprocessing.Event()
        p = multiprocessing.Process(target=echo, args=(b, ready), daemon=True)
        p.start()
        ready.wait(5)
        procs.append(p)
    results = {"corelb": [], "nginx": []}
    fronts = [("corelb", args.corelb), ("nginx", args.nginx)]
    print(f"{'front':8} {'round':>5} {'datagrams/s':>12} {'CPU us/datagram':>16} {'lost':>5}")
    for r in range(args.rounds):
        for kind, binary in fronts if r % 2 == 0 else reversed(fronts):
            rate, cpu, lost = round_of(kind, binary, args, backends, tmp)
            results[kind].append((rate, cpu, lost))
            print(f"{kind:8} {r + 1:>5} {rate:>12.0f} {cpu:>16.2f} {lost:>5}", flush=True)
    med = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for k, v in results.items()}
    for k, (rate, cpu) in med.items():
        print(f"median {k:8} {rate:>12.0f} datagrams/s {cpu:>8.2f} us CPU/datagram")
    print(
        f"corelb/nginx: datagrams/s {med['corelb'][0] / med['nginx'][0]:.2f}x, "
        f"CPU per datagram {med['corelb'][1] / med['nginx'][1]:.2f}x"
    )
    for p in procs:
        p.kill()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
