#!/usr/bin/env python3
"""Static files beside nginx: a large file's server CPU per GiB and throughput, or a small file's requests/s and
CPU per request; alternated rounds, medians.

  python3 tools/bench/static_files.py [--mode big|small] [--mib 100] [--gets 10] [--secs 4] [--conns 64]
                                      [--rounds 3] [--sendfile] [--open-file-cache]
                                      CORELB [NGINX]

Each front (a corelb build, then nginx: default /usr/sbin/nginx) runs alone with one worker on a free loopback port,
pinned to the last CPU, and serves files from `root` (made once in a temporary directory). `--mode big`: one file
of --mib MiB of random bytes, fetched --gets times over one keepalive connection by `curl` (pinned to CPU 0) into
/dev/null; the figures are the server process's CPU time (user + system, from /proc/PID/task/*/schedstat) per GiB
sent, and the transfer's wall-clock throughput. `--mode small`: a 1 KiB file under `wrk -t1 -c CONNS -d SECS`
(pinned to CPU 0); the figures are requests/s and the server's CPU time per request. Each is a median over
--rounds rounds that alternate the fronts. `--sendfile` puts `sendfile on;` in the config (nginx's default is off; corelb
accepts the directive and reads the file through a reused buffer either way: README). `--open-file-cache` puts
`open_file_cache max=1000;` in it (the descriptor, size and time of the file kept: no open, stat or close per
request). nginx runs as `nginx -p DIR -g "daemon off; master_process off;"`, one process. Needs curl. Stdlib
only.
"""
import argparse
import os
import re
import socket
import statistics
import subprocess
import tempfile
import time

CONF = """worker_processes 1;
{main}
events {{ worker_connections 1024; }}
http {{
    access_log off;
    {sendfile}
    server {{
        listen 127.0.0.1:{port};
        location / {{ root {files}; }}
    }}
}}
"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cpu_seconds(pid):
    """CPU seconds (user + system) that process `pid`'s threads have run, from each /proc/PID/task/TID/schedstat
    (nanoseconds: finer than /proc/PID/stat's clock ticks)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as fh:
                total += int(fh.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that ended: its time is lost, as it is for every front alike
    return total / 1e9


def wait_listening(port, proc, limit=30.0):
    deadline = time.time() + limit
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the front exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on {port} after {limit} s")


LAST_CPU = str(os.cpu_count() - 1)


def start_front(binary, d, files, sendfile, ofc=False):
    """The front on a free port, pinned to the last CPU: (process, port)."""
    nginx = os.path.basename(binary).startswith("nginx")
    port = free_port()
    main = f"pid {d}/nginx.pid;\nerror_log {d}/error.log;" if nginx else f"error_log {d}/error.log;"
    conf = os.path.join(d, "front.conf")
    with open(conf, "w", encoding="utf-8") as fh:
        tuning = ("sendfile on;" if sendfile else "") + (" open_file_cache max=1000;" if ofc else "")
        fh.write(CONF.format(main=main, port=port, files=files, sendfile=tuning))
    cmd = [binary, "-c", conf]
    if nginx:
        cmd = [binary, "-p", d + "/", "-c", conf, "-g", "daemon off; master_process off;"]
    proc = subprocess.Popen(["taskset", "-c", LAST_CPU] + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(port, proc)
    return proc, port


def big_round(binary, files, args):
    """(CPU seconds per GiB, MiB/s) of one front serving the big file `gets` times."""
    with tempfile.TemporaryDirectory() as d:
        proc, port = start_front(binary, d, files, args.sendfile, args.open_file_cache)
        try:
            url = f"http://127.0.0.1:{port}/big.bin"
            before = cpu_seconds(proc.pid)
            start = time.monotonic()
            cmd = ["taskset", "-c", "0", "curl", "-sS", "--fail"]
            for _ in range(args.gets):
                cmd += ["-o", "/dev/null", url]
            out = subprocess.run(cmd + ["-w", "%{size_download}\\n"], capture_output=True, text=True, check=True)
            wall = time.monotonic() - start
            cpu = cpu_seconds(proc.pid) - before
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    sizes = [int(x) for x in out.stdout.split()]
    if sizes != [args.mib << 20] * args.gets:
        raise SystemExit(f"{binary}: curl received {sizes}, not {args.gets} x {args.mib << 20} bytes")
    return cpu / (args.gets * args.mib / 1024), args.gets * args.mib / wall


def small_round(binary, files, args):
    """(CPU microseconds per request, requests/s) of one front under wrk for the 1 KiB file."""
    with tempfile.TemporaryDirectory() as d:
        proc, port = start_front(binary, d, files, args.sendfile, args.open_file_cache)
        try:
            url = f"http://127.0.0.1:{port}/small.html"
            before = cpu_seconds(proc.pid)
            cmd = ["taskset", "-c", "0", "wrk", "-t1", f"-c{args.conns}", f"-d{args.secs}s", url]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            cpu = cpu_seconds(proc.pid) - before
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    m = re.search(r"(\d+) requests in", out)
    if not m or "Non-2xx" in out or "Socket errors" in out:
        raise SystemExit(f"{binary}: wrk said:\n{out}")
    done = int(m.group(1))
    return cpu * 1e6 / done, done / args.secs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["big", "small"], default="big")
    ap.add_argument("--mib", type=int, default=100)
    ap.add_argument("--gets", type=int, default=10)
    ap.add_argument("--secs", type=int, default=4)
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sendfile", action="store_true")
    ap.add_argument("--open-file-cache", action="store_true")
    ap.add_argument("corelb")
    ap.add_argument("nginx", nargs="?", default="/usr/sbin/nginx")
    args = ap.parse_args()
    fronts = [args.corelb, args.nginx]
    one_round = big_round if args.mode == "big" else small_round
    with tempfile.TemporaryDirectory() as files:
        if args.mode == "big":
            with open(os.path.join(files, "big.bin"), "wb") as fh:
                for _ in range(args.mib):
                    fh.write(os.urandom(1 << 20))
        else:
            with open(os.path.join(files, "small.html"), "w", encoding="utf-8") as fh:
                fh.write(("<p>" + "corelb " * 146)[:1020] + "</p>\n")
        results = {f: [] for f in fronts}
        for _ in range(args.rounds):
            for f in fronts:
                results[f].append(one_round(f, files, args))
    cpu_unit, rate_unit = ("CPU s per GiB", "MiB/s") if args.mode == "big" else ("CPU us per request", "requests/s")
    medians = {}
    for f in fronts:
        cpu = statistics.median(r[0] for r in results[f])
        rate = statistics.median(r[1] for r in results[f])
        medians[f] = (cpu, rate)
        print(f"{cpu:10.3f} {cpu_unit}  {rate:10.0f} {rate_unit}  {f}", flush=True)
    (c_cpu, c_rate), (n_cpu, n_rate) = medians[fronts[0]], medians[fronts[1]]
    print(f"corelb/nginx: CPU {c_cpu / n_cpu:.2f}x, {rate_unit} {c_rate / n_rate:.2f}x")


if __name__ == "__main__":
    main()
