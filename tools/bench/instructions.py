#!/usr/bin/env python3
"""User-space instructions per proxied request, counted by callgrind: a figure the machine's load cannot move.

  python3 tools/bench/instructions.py [--requests N] [--warmup W] [--shape plain|routing] [--keep DIR] BINARY ...

Each BINARY (a corelb build, or an nginx binary: a file named nginx*) runs one config shape on free loopback ports
under `valgrind --tool=callgrind`: a front proxying to three of its own `return` servers, upstream keepalive on,
no access log. `plain` is examples/quickstart.conf's shape; `routing` is a typical real config's routing on top
of it (two `map`s, one read by `proxy_set_header` and one by `add_header`; two regex locations the request passes
by; three `add_header` lines). nginx runs as `nginx -p DIR -g "daemon off; master_process off;"` (one process, no
worker), so that the same config counts the same work. After W warm-up requests the counters are zeroed
(`callgrind_control -z`), N keepalive requests are sent (500 per connection), and the counters are dumped; the
figure is every thread's instructions over N (the front's and the backends' work). Needs valgrind (Debian's
package). Stdlib only.
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
{main}
events {{ worker_connections 1024; }}
http {{
    access_log off;
{maps}
    upstream backends {{
        server 127.0.0.1:{b1} weight=5;
        server 127.0.0.1:{b2};
        server 127.0.0.1:{b3};
        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{front};
{locations}
        location / {{
            proxy_pass http://backends;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
{proxied}
        }}
    }}
    server {{ listen 127.0.0.1:{b1}; return 200 "a\\n"; }}
    server {{ listen 127.0.0.1:{b2}; return 200 "b\\n"; }}
    server {{ listen 127.0.0.1:{b3}; return 200 "c\\n"; }}
}}
"""

# what the `routing` shape adds to `plain`, by place in CONF
ROUTING = {
    "maps": """    map $http_user_agent $client_kind {
        default     other;
        ~*curl      curl;
        ~*mozilla   browser;
    }
    map $uri $cache_tag {
        default        dynamic;
        ~^/static/     static;
        ~\\.(css|js)$  asset;
    }""",
    "locations": """        location ~ \\.php$ { return 403; }
        location ~* ^/(admin|internal)/ { return 404; }""",
    "proxied": """            proxy_set_header X-Client-Kind $client_kind;
            add_header X-Cache-Tag $cache_tag;
            add_header X-Frame-Options DENY;
            add_header X-Content-Type-Options nosniff always;""",
}


def config(shape, ports, prefix=None):
    front, b1, b2, b3 = ports
    parts = ROUTING if shape == "routing" else {}
    main = ""
    if prefix is not None:
        main = f"pid {prefix}/nginx.pid;\nerror_log {prefix}/error.log;"
    return CONF.format(
        main=main,
        maps=parts.get("maps", ""),
        locations=parts.get("locations", ""),
        proxied=parts.get("proxied", ""),
        front=front,
        b1=b1,
        b2=b2,
        b3=b3,
    )


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
            raise SystemExit(f"the front exited with {proc.returncode} before listening")
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
    req = b"GET / HTTP/1.1\r\nHost: x\r\nUser-Agent: curl/8.0\r\n\r\n"
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


def is_nginx(binary):
    return os.path.basename(binary).startswith("nginx")


def count(binary, requests, warmup, shape, keep=None):
    with tempfile.TemporaryDirectory() as d:
        ports = free_ports(4)
        front = ports[0]
        conf = os.path.join(d, "front.conf")
        nginx = is_nginx(binary)
        with open(conf, "w", encoding="utf-8") as fh:
            fh.write(config(shape, ports, d if nginx else None))
        out = os.path.join(d, "callgrind.out")
        cmd = [binary, "-c", conf]
        if nginx:
            cmd = [binary, "-p", d + "/", "-c", conf, "-g", "daemon off; master_process off;"]
        proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + cmd,
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
    ap.add_argument("--shape", choices=["plain", "routing"], default="plain", help="the config (see above)")
    ap.add_argument("binaries", nargs="+")
    args = ap.parse_args()
    for b in args.binaries:
        if not os.access(b, os.X_OK):
            raise SystemExit(f"not an executable: {b}")
    results = []
    for b in args.binaries:
        per = count(b, args.requests, args.warmup, args.shape, args.keep)
        results.append((b, per))
        print(f"{per:12.0f} instructions per request  {b}", flush=True)
    if len(results) > 1:
        base = results[0][1]
        for b, per in results[1:]:
            print(f"{per / base:.3f}x of the first  {b}")


if __name__ == "__main__":
    sys.exit(main())
