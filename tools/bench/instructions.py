#!/usr/bin/env python3
"""User-space instructions per proxied request, counted by callgrind: a figure the machine's load cannot move.

  python3 tools/bench/instructions.py [--requests N] [--warmup W] BINARY [BINARY ...]

Each BINARY (a corelb build) runs examples/quickstart.conf's shape (a front proxying to three of its own `return`
servers, upstream keepalive on) on free loopback ports under `valgrind --tool=callgrind`. After W warm-up requests
the counters are zeroed (`callgrind_control -z`), N keepalive requests are sent (500 per connection), and the
counters are dumped; the figure is every thread's instructions over N (the front's and the backends' work, the
same for every binary compared). Needs valgrind (Debian's package). Stdlib only.
"""
import argparse
import glob
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

CONF = """worker_processes 1;
events {{ worker_connections 1024; }}
http {{
    upstream backends {{
        server 127.0.0.1:{b1} weight=5;
        server 127.0.0.1:{b2};
        server 127.0.0.1:{b3};
        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{front};
        location / {{
            proxy_pass http://backends;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}
    server {{ listen 127.0.0.1:{b1}; return 200 "a\\n"; }}
    server {{ listen 127.0.0.1:{b2}; return 200 "b\\n"; }}
    server {{ listen 127.0.0.1:{b3}; return 200 "c\\n"; }}
}}
"""


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def wait_listening(port, proc, limit=120.0):
    deadline = time.time() + limit
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"corelb exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"nothing listens on {port} after {limit} s")


def send(port, n):
    """n GETs, 500 per keepalive connection (below nginx's keepalive_requests 1000); every answer must be a 200."""
    while n > 0:
        send_on_one(port, min(n, 500))
        n -= 500


def send_on_one(port, n):
    req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        buf = b""
        for _ in range(n):
            s.sendall(req)
            while True:
                end = buf.find(b"\r\n\r\n")
                if end >= 0:
                    head = buf[:end].decode("latin-1")
                    m = re.search(r"(?im)^content-length:\s*(\d+)", head)
                    total = end + 4 + (int(m.group(1)) if m else 0)
                    if len(buf) >= total:
                        if not head.startswith("HTTP/1.1 200"):
                            raise SystemExit(f"unexpected answer: {head.splitlines()[0]}")
                        buf = buf[total:]
                        break
                chunk = s.recv(65536)
                if not chunk:
                    raise SystemExit("the front closed the connection")
                buf += chunk


def count(binary, requests, warmup, keep=None):
    with tempfile.TemporaryDirectory() as d:
        front, b1, b2, b3 = free_ports(4)
        conf = os.path.join(d, "corelb.conf")
        with open(conf, "w", encoding="utf-8") as fh:
            fh.write(CONF.format(front=front, b1=b1, b2=b2, b3=b3))
        out = os.path.join(d, "callgrind.out")
        proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", binary, "-c", conf],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_listening(front, proc)
            send(front, warmup)
            subprocess.run(["callgrind_control", "-z", str(proc.pid)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            send(front, requests)
            subprocess.run(["callgrind_control", "-d", str(proc.pid)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
        if keep:
            # the profiles, for `callgrind_annotate DIR/N-NAME/callgrind.out.*` (which functions the requests ran)
            import shutil
            dest = os.path.join(keep, os.path.basename(os.path.dirname(binary) or ".") + "-" + os.path.basename(binary))
            os.makedirs(dest, exist_ok=True)
            for f in glob.glob(out + "*"):
                shutil.copy(f, dest)
        total = 0
        for f in glob.glob(out + "*"):
            with open(f, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            if "\ntrigger: Program termination" in text or "trigger: Program termination" in text[:2000]:
                continue  # the dump at exit, after the zeroed one: not the measured requests
            m = re.search(r"^totals:\s*(\d+)", text, re.M) or re.search(r"^summary:\s*(\d+)", text, re.M)
            if m:
                total += int(m.group(1))
        return total / requests


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--keep", metavar="DIR", help="copy each binary's callgrind profiles under DIR")
    ap.add_argument("binaries", nargs="+")
    args = ap.parse_args()
    for b in args.binaries:
        if not os.access(b, os.X_OK):
            raise SystemExit(f"not an executable: {b}")
    results = []
    for b in args.binaries:
        per = count(b, args.requests, args.warmup, args.keep)
        results.append((b, per))
        print(f"{per:12.0f} instructions per request  {b}", flush=True)
    if len(results) > 1:
        base = results[0][1]
        for b, per in results[1:]:
            print(f"{per / base:.3f}x of the first  {b}")


if __name__ == "__main__":
    sys.exit(main())
