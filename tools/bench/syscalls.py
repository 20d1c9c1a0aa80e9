#!/usr/bin/env python3
"""System calls per proxied request, front by front: what the kernel part of a request's CPU is made of.

  python3 tools/bench/syscalls.py [--secs S] [--conns C] [--front nginx] [--front 'BIN -c {conf}'] ...

The shape is the side-by-side benchmark's: two nginx `return` backends pinned with wrk to CPU 0, the front (one
worker) pinned to the last CPU, an upstream with `keepalive 64`, HTTP/1.1 keepalive clients. While wrk runs for S
seconds, `perf stat` counts every system call the front's threads enter (the `syscalls:sys_enter_*` tracepoints) and
the reads and writes that came back with `EAGAIN`, context switches, page faults and CPU time; each count is printed divided by the requests wrk made. A front
`nginx` runs Debian's nginx with the same config. Needs perf (Debian's linux-perf) with tracepoints readable, and
wrk. Stdlib only.
"""
import argparse
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time

NCPU = os.cpu_count()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def start(cmd, cpus, log):
    return subprocess.Popen(f"exec taskset -c {cpus} {cmd}", shell=True, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=open(log, "w"))


def stop(p):
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(5)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def worker_pid(p, name):
    """The process that serves: nginx's worker (a child of its master), else the front itself."""
    if name != "nginx":
        return p.pid
    for _ in range(50):
        kids = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
        if kids:
            return int(kids[0])
        time.sleep(0.1)
    return p.pid


def tracepoints():
    names = os.listdir("/sys/kernel/tracing/events/syscalls")
    return sorted(n for n in names if n.startswith("sys_enter_"))


EAGAIN_OF = ["read", "recvfrom", "readv", "write", "sendto", "writev", "accept4"]


def count(pid, secs, conns, port):
    events = [f"syscalls:{n}" for n in tracepoints()]
    args = ["perf", "stat", "-x", ",", "-p", str(pid)]
    for e in events:
        args += ["-e", e]
    for e in ("context-switches", "page-faults", "task-clock"):
        args += ["-e", e]
    for s in EAGAIN_OF:
        args += ["-e", f"syscalls:sys_exit_{s}", "--filter", "ret == -11"]
    perf = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    out = subprocess.run(["taskset", "-c", "0", "wrk", "-t1", f"-c{conns}", f"-d{secs}s",
                          f"http://127.0.0.1:{port}/"], capture_output=True, text=True).stdout
    perf.send_signal(signal.SIGINT)
    err = perf.communicate()[1]
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    counts = {}
    for line in err.splitlines():
        f = line.split(",")
        try:
            value = float(f[0])
        except (ValueError, IndexError):
            continue
        name = f[2].replace("syscalls:", "")
        if name == "task-clock":
            name, value = "CPU us (task-clock)", value * 1000
        elif name.startswith("sys_exit_"):
            name = "EAGAIN " + name[len("sys_exit_"):]
        elif name.startswith("sys_enter_"):
            name = name[len("sys_enter_"):]
        counts[name] = counts.get(name, 0) + value
    return requests, counts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--front", action="append", default=[], help="'nginx' or a command with {conf}")
    ap.add_argument("--secs", type=int, default=3)
    ap.add_argument("--conns", type=int, default=64)
    a = ap.parse_args()
    fronts = a.front or ["nginx"]
    d = tempfile.mkdtemp()
    bports = [free_port(), free_port()]
    listen = free_port()
    bconf = os.path.join(d, "backend.conf")
    with open(bconf, "w") as f:
        f.write("worker_processes 1;\nevents { worker_connections 4096; }\nhttp {\n access_log off;\n"
                " keepalive_requests 1000000;\n"
                + "".join(f" server {{ listen 127.0.0.1:{p}; location / {{ return 200 'hello from {p}\\n'; }} }}\n"
                          for p in bports) + "}\n")
    conf = os.path.join(d, "front.conf")
    with open(conf, "w") as f:
        f.write("worker_processes 1;\nevents { worker_connections 4096; }\nhttp {\n    access_log off;\n"
                "    upstream backend {\n"
                + "".join(f"        server 127.0.0.1:{p};\n" for p in bports)
                + "        keepalive 64;\n    }\n"
                f"    server {{\n        listen 127.0.0.1:{listen};\n        location / {{\n"
                "            proxy_pass http://backend;\n            proxy_http_version 1.1;\n"
                "            proxy_set_header Connection \"\";\n        }\n    }\n}\n")
    be = start(f"nginx -c {bconf} -g 'daemon off; pid {d}/be.pid; error_log {d}/be.err;'", "0",
               os.path.join(d, "be.log"))
    for p in bports:
        wait_port(p)
    results = []
    try:
        for i, front in enumerate(fronts):
            name = "nginx" if front == "nginx" else f"front{i}"
            cmd = (f"nginx -c {conf} -g 'daemon off; pid {d}/nginx.pid; error_log {d}/nginx.err;'"
                   if front == "nginx" else front.format(conf=shlex.quote(conf)))
            p = start(cmd, str(NCPU - 1), os.path.join(d, f"{name}.log"))
            if not wait_port(listen):
                print(f"{front}: did not start")
                stop(p)
                continue
            subprocess.run(["taskset", "-c", "0", "wrk", "-t1", f"-c{a.conns}", "-d1s",
                            f"http://127.0.0.1:{listen}/"], capture_output=True)
            requests, counts = count(worker_pid(p, name), a.secs, a.conns, listen)
            results.append((front, requests, counts))
            stop(p)
            time.sleep(0.3)
    finally:
        stop(be)
        shutil.rmtree(d, ignore_errors=True)
    names = sorted({n for _, _, c in results for n in c if any(r[2].get(n, 0) for r in results)},
                   key=lambda n: -max(r[2].get(n, 0) / max(r[1], 1) for r in results))
    print(f"{a.conns} connections, {a.secs} s; system calls per request")
    print(f"{'syscall':24}" + "".join(f"{f[:22]:>24}" for f, _, _ in results))
    for n in names:
        vals = [c.get(n, 0) / max(r, 1) for _, r, c in results]
        if max(vals) < 0.005:
            continue
        print(f"{n:24}" + "".join(f"{v:24.3f}" for v in vals))
    total = [sum(v for k, v in c.items() if k.islower() and "-" not in k) / max(r, 1) for _, r, c in results]
    print(f"{'system calls':24}" + "".join(f"{v:24.3f}" for v in total))
    print(f"{'requests':24}" + "".join(f"{r:24d}" for _, r, _ in results))


if __name__ == "__main__":
    main()
