#!/usr/bin/env python3
"""corelb, nginx and HAProxy side by side: requests/s, p50/p99 latency and CPU per request, the same backends, the
same load and the same pinned CPUs for every front, rounds alternated (odd rounds run the fronts in reverse order).

  python3 tools/bench/side_by_side.py [--rounds N] [--duration S] [--conns C] [--workers W] [--only LIST]
                                      [--algo DIRECTIVE] [--loadgen auto|wrk|corelb] [--close] [--stream]
                                      [CORELB_CMD]
  python3 tools/bench/side_by_side.py --write-configs DIR [--workers W] [--algo DIRECTIVE]

CORELB_CMD is a shell command with {conf} for the front's nginx-syntax config (default
"target/release/corelb -c {conf}"); every front gets the same config (HAProxy its translation). The backends (two
`return 200` servers, nginx's or else corelb's) and the load generator run on CPU 0, each front on the last W CPUs.
Each round gives every front a 1 s warm-up, then DURATION seconds of load from C connections; CPU per request is
the front's process group's utime+stime from /proc over the measured requests (user and system separately in the
round lines). A front that is not installed is skipped with a `SKIP` line. The last lines are the medians, then
the ratios to nginx of the same run. `--write-configs DIR` writes front.conf, backend.conf and haproxy.cfg and
starts nothing (engine/tests/config_conformance.rs parses them). `--stream`: the fronts are TCP (L4) proxies instead
(a `stream` block, nginx's stream module loaded from Debian's libnginx-mod-stream, HAProxy in `mode tcp`): each
client connection is relayed to one backend connection, so CPU per request is the relay's per keepalive request.
Stdlib only.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

NCPU = os.cpu_count() or 1
WARMUP_S = 1
START_TIMEOUT = 10.0
UNITS_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port):
    """Whether something listens on 127.0.0.1:port (/proc/net/tcp; no probe connection)."""
    want = f"0100007F:{port:04X}"
    try:
        with open("/proc/net/tcp") as f:
            return any(c[1] == want and c[3] == "0A" for c in (line.split() for line in f) if len(c) > 3)
    except OSError:
        return False


def wait_until(check, proc, timeout=START_TIMEOUT):
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        if check():
            return True
        time.sleep(0.02)
    return False


def start(cmd, cpus, log):
    """A shell command pinned to `cpus`, in its own process group (its CPU time is the group's)."""
    with open(log, "w") as f:
        return subprocess.Popen(f"exec taskset -c {cpus} {cmd}", shell=True, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=f)


def stop(proc, port=None):
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass
    if port is not None:  # nginx's master can outlive the shell for a moment
        end = time.monotonic() + START_TIMEOUT
        while listening(port) and time.monotonic() < end:
            time.sleep(0.02)


def group_cpu(pgid):
    """(user, system) CPU seconds used so far by the processes of group `pgid` (fields 14 and 15 of stat)."""
    tick = os.sysconf("SC_CLK_TCK")
    user = system = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid:
            user += int(fields[11])
            system += int(fields[12])
    return user / tick, system / tick


class Load:
    """The load generator: wrk, or `corelb bench`, pinned to CPU 0. run() gives (requests, rps, p50, p99 ms, bad)."""

    def __init__(self, kind, corelb_bin, close, scratch):
        self.kind, self.bin, self.close, self.scratch = kind, corelb_bin, close, scratch

    def run(self, port, seconds, conns):
        url = f"http://127.0.0.1:{port}/"
        close = ["-H", "Connection: close"] if self.close else []
        if self.kind == "wrk":
            out = subprocess.run(["taskset", "-c", "0", "wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--latency",
                                  *close, url], capture_output=True, text=True).stdout
            rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
            lat = {q: float(m.group(1)) * UNITS_MS[m.group(2)]
                   for q in ("50", "99") if (m := re.search(rf"\s{q}%\s+([\d.]+)(us|ms|s)\b", out))}
            total = int(re.search(r"(\d+) requests in", out).group(1))
            bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
            errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
            nbad = (int(bad.group(1)) if bad else 0) + (sum(map(int, errors.groups())) if errors else 0)
            return total, rps, lat.get("50", 0.0), lat.get("99", 0.0), nbad
        report = os.path.join(self.scratch, "bench.json")
        subprocess.run(["taskset", "-c", "0", self.bin, "bench", "--cores", "0", "-c", str(conns), "-d",
                        f"{seconds}s", "--json", report, *close, url], capture_output=True, check=True)
        with open(report) as f:
            r = json.load(f)
        lat = r["latency_us"]
        return (r["requests"], r["requests_per_sec"], lat["p50"] / 1e3, lat["p99"] / 1e3,
                r["non_2xx_3xx"] + sum(r["errors"].values()))


STREAM_MODULE = "/usr/lib/nginx/modules/ngx_stream_module.so"


def write_configs(d, ports, listen, workers, algo, stream=False):
    """front.conf (corelb and nginx), haproxy.cfg (the same front for HAProxy) and backend.conf in `d`; with
    `stream`, TCP fronts, and front-nginx.conf loading nginx's stream module."""
    backend = ("worker_processes 1;\nevents {\n    worker_connections 4096;\n}\nhttp {\n    access_log off;\n"
               "    keepalive_requests 1000000;\n"
               + "".join(f"    server {{\n        listen 127.0.0.1:{p};\n        location / {{\n"
                         f"            return 200 \"hello from {p}\\n\";\n        }}\n    }}\n" for p in ports)
               + "}\n")
    method = f"        {algo}\n" if algo else ""
    front = (f"worker_processes {workers};\nevents {{\n    worker_connections 4096;\n}}\nhttp {{\n"
             f"    access_log off;\n    upstream backend {{\n{method}"
             + "".join(f"        server 127.0.0.1:{p};\n" for p in ports)
             + "        keepalive 64;\n    }\n"
             f"    server {{\n        listen 127.0.0.1:{listen};\n        location / {{\n"
             "            proxy_pass http://backend;\n            proxy_http_version 1.1;\n"
             "            proxy_set_header Connection \"\";\n        }\n    }\n}\n")
    if stream:
        front = (f"worker_processes {workers};\nevents {{\n    worker_connections 4096;\n}}\nstream {{\n"
                 f"    upstream backend {{\n{method}"
                 + "".join(f"        server 127.0.0.1:{p};\n" for p in ports)
                 + f"    }}\n    server {{\n        listen 127.0.0.1:{listen};\n        proxy_pass backend;\n    }}\n}}\n")
    haproxy = (f"global\n    nbthread {workers}\n    maxconn 4096\n"
               "defaults\n    mode http\n    timeout connect 5s\n    timeout client 30s\n    timeout server 30s\n"
               "    http-reuse always\n"
               f"frontend front\n    bind 127.0.0.1:{listen}\n    default_backend backend\n"
               "backend backend\n    balance roundrobin\n"
               + "".join(f"    server b{i} 127.0.0.1:{p}\n" for i, p in enumerate(ports)))
    if stream:
        haproxy = haproxy.replace("mode http", "mode tcp").replace("    http-reuse always\n", "")
    load = f"load_module {STREAM_MODULE};\n" if stream and os.path.exists(STREAM_MODULE) else ""
    files = (("backend.conf", backend), ("front.conf", front), ("front-nginx.conf", load + front),
             ("haproxy.cfg", haproxy))
    for name, text in files:
        with open(os.path.join(d, name), "w") as f:
            f.write(text)


def installed(cmd):
    """Whether the program a shell command runs exists (after leading `env` and VAR=value words)."""
    words = [w for w in shlex.split(cmd) if w != "env" and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w)]
    return bool(words) and (shutil.which(words[0]) is not None or os.access(words[0], os.X_OK))


def fronts_to_run(a, d):
    conf = shlex.quote(os.path.join(d, "front.conf"))
    all_fronts = {
        "corelb": a.corelb.format(conf=conf, dir=d),
        "nginx": f"nginx -c {shlex.quote(os.path.join(d, 'front-nginx.conf'))} "
                 f"-g 'daemon off; pid {d}/nginx.pid; error_log {d}/nginx.err;'",
        "haproxy": f"haproxy -f {shlex.quote(os.path.join(d, 'haproxy.cfg'))}",
    }
    chosen = {}
    for name, cmd in all_fronts.items():
        if a.only and name != "corelb" and name not in a.only.split(","):
            continue
        if installed(cmd):
            chosen[name] = cmd
        else:
            how = {"corelb": "cargo build --release"}.get(name, f"apt-get install -y {name}")
            print(f"SKIP {name}: {shlex.split(cmd)[0]} is not installed ({how}); measuring without it", flush=True)
    return chosen


def backend_command(a, d):
    conf = shlex.quote(os.path.join(d, "backend.conf"))
    if shutil.which("nginx"):
        return f"nginx -c {conf} -g 'daemon off; pid {d}/backend.pid; error_log {d}/backend.err;'"
    print("NOTE backends: nginx is not installed, corelb serves the backends", flush=True)
    return f"{shlex.quote(a.corelb_bin)} -c {conf}"


def measure(name, cmd, a, d, listen, load):
    """One round of one front: (rps, p50, p99, cpu µs/request, user µs, system µs, bad) or None."""
    front_cpus = ",".join(str(c) for c in range(max(NCPU - a.workers, 0), NCPU))
    proc = start(cmd, front_cpus, os.path.join(d, f"{name}.log"))
    try:
        if not wait_until(lambda: listening(listen), proc):
            with open(os.path.join(d, f"{name}.log")) as f:
                print(f"FAIL {name} did not start: {f.read()[-300:].strip()}", flush=True)
            return None
        load.run(listen, WARMUP_S, a.conns)
        u0, s0 = group_cpu(proc.pid)
        total, rps, p50, p99, bad = load.run(listen, a.duration, a.conns)
        u1, s1 = group_cpu(proc.pid)
    finally:
        stop(proc, listen)
    n = max(total, 1)
    user, system = (u1 - u0) / n * 1e6, (s1 - s0) / n * 1e6
    return rps, p50, p99, user + system, user, system, bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corelb", nargs="?", default="target/release/corelb -c {conf}", help="corelb's command")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=4, help="seconds of load per front and round")
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--workers", type=int, default=1, help="worker processes (threads for HAProxy) per front")
    ap.add_argument("--only", default="", help="the fronts beside corelb, e.g. nginx (default: nginx,haproxy)")
    ap.add_argument("--algo", default="", help="a balancing directive for the upstream, e.g. 'least_conn;'")
    ap.add_argument("--loadgen", choices=("auto", "wrk", "corelb"), default="auto",
                    help="auto: wrk when installed, else corelb bench")
    ap.add_argument("--corelb-bin", default="target/release/corelb",
                    help="the corelb binary for `corelb bench` (and backends without nginx)")
    ap.add_argument("--close", action="store_true", help="a new client connection per request")
    ap.add_argument("--stream", action="store_true", help="TCP (stream) fronts instead of HTTP ones")
    ap.add_argument("--write-configs", metavar="DIR", help="write the configs into DIR and exit")
    a = ap.parse_args()
    ports, listen = [free_port(), free_port()], free_port()
    if a.write_configs:
        os.makedirs(a.write_configs, exist_ok=True)
        write_configs(a.write_configs, ports, listen, a.workers, a.algo, a.stream)
        return
    kind = a.loadgen if a.loadgen != "auto" else ("wrk" if shutil.which("wrk") else "corelb")
    if kind == "wrk" and not shutil.which("wrk"):
        sys.exit("wrk is not installed (apt-get install -y wrk), or use --loadgen corelb")
    if kind == "corelb" and not os.access(a.corelb_bin, os.X_OK):
        sys.exit(f"{a.corelb_bin} is not there for `corelb bench` (cargo build --release, or --corelb-bin)")
    d = tempfile.mkdtemp(prefix="side-by-side-")
    write_configs(d, ports, listen, a.workers, a.algo, a.stream)
    fronts = fronts_to_run(a, d)
    if not fronts:
        sys.exit("no front to measure")
    print(f"load: {kind} -c{a.conns}, {a.duration} s per round after {WARMUP_S} s of warm-up, {a.rounds} rounds; "
          f"backends and load on CPU 0, fronts on CPU {','.join(map(str, range(max(NCPU - a.workers, 0), NCPU)))}"
          f"{', --close' if a.close else ''}{', ' + a.algo if a.algo else ''}{', stream (TCP) fronts' if a.stream else ''}",
          flush=True)
    be = start(backend_command(a, d), "0", os.path.join(d, "backend.log"))
    results = {name: [] for name in fronts}
    try:
        if not wait_until(lambda: all(map(listening, ports)), be):
            sys.exit("the backends did not start")
        load = Load(kind, a.corelb_bin, a.close, d)
        for r in range(a.rounds):
            order = list(fronts.items())
            for name, cmd in (reversed(order) if r % 2 else order):
                m = measure(name, cmd, a, d, listen, load)
                if m:
                    results[name].append(m)
                    print(f"round {r + 1} {name:8} {m[0]:10.0f} req/s  p50 {m[1]:7.3f} ms  p99 {m[2]:7.3f} ms  "
                          f"cpu {m[3]:6.2f} us/req (user {m[4]:5.2f}, sys {m[5]:5.2f})  bad {m[6]}", flush=True)
    finally:
        stop(be)
    print(f"{'front':8} {'req/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'cpu us/req':>10} {'user':>6} {'sys':>6} "
          f"{'bad':>5}  (medians of {a.rounds} rounds)")
    med = {}
    for name, runs in results.items():
        if not runs:
            print(f"{name:8} no result")
            continue
        med[name] = [statistics.median(x[i] for x in runs) for i in range(6)] + [sum(x[6] for x in runs)]
        m = med[name]
        print(f"{name:8} {m[0]:10.0f} {m[1]:8.3f} {m[2]:8.3f} {m[3]:10.2f} {m[4]:6.2f} {m[5]:6.2f} {m[6]:5d}")
    for name in med:
        if name != "nginx" and "nginx" in med:
            n, x = med["nginx"], med[name]
            ratio = lambda i: f"{x[i] / n[i]:.2f}" if n[i] else "-"
            print(f"{name}/nginx: req/s {ratio(0)}, p99 {ratio(2)}, cpu per request {ratio(3)}")
    if "corelb" not in med:
        sys.exit(1)


if __name__ == "__main__":
    main()
