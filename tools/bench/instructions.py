#!/usr/bin/env python3
"""User-space instructions per request, counted by callgrind: a figure the machine's load cannot move.

  python3 tools/bench/instructions.py [--requests N] [--warmup W] [--shape SHAPE] [--keep DIR] BINARY ...

Each BINARY (a corelb build, or an nginx binary: a file named nginx*) runs one config shape on free loopback ports
under `valgrind --tool=callgrind`: a front proxying to three of its own `return` servers, upstream keepalive on,
no access log. The shapes:
- `plain`: examples/quickstart.conf's shape;
- `routing`: a typical real config's routing on top of it (two `map`s, one read by `proxy_set_header` and one by
  `add_header`; two regex locations the request passes by; three `add_header` lines);
- `limits`: a `limit_req` and a `limit_conn` that never limit, on the proxied location;
- `limited`: a `limit_req` that refuses every measured request with 503 before it is proxied;
- `static`: a 1 KiB file from `root` (nothing proxied);
- `gzip`: a 100 KiB JSON file from `root`, gzipped on the fly (`gzip_comp_level` 1, nginx's default) for a client
  that sends `Accept-Encoding: gzip`; the answer is checked once (decompressed, it is the file) and its size on the
  wire printed;
- `tls`: `plain` over TLS 1.3 (`listen ... ssl`, an ECDSA P-256 certificate made by `openssl req`, as the
  side-by-side script perf.py serves with `--tls`): one full handshake per 500 keepalive requests, the rest the
  record layer's cost (needs the `openssl` command);
- `h2`: `plain` over HTTP/2 without TLS (`listen ... http2`, prior knowledge): the requests come from `h2load`
  (Debian's nghttp2-client), 8 streams in flight on each of 4 connections, instead of HTTP/1.1 keepalive ones.
nginx runs as `nginx -p DIR -g "daemon off; master_process off;"` (one process, no worker), so that the same config
counts the same work. After W warm-up requests the counters are zeroed (`callgrind_control -z`), N keepalive
requests are sent (500 per connection), and the counters are dumped; the figure is every thread's instructions
over N (the front's and the backends' work). Needs valgrind (Debian's package). Stdlib only.
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
        listen 127.0.0.1:{front}{listen};
{locations}
{front_location}
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


# `limits`: limit_req and limit_conn on every request, never limiting (what the limits cost when nothing is limited)
LIMITS = {
    "maps": """    limit_req_zone $binary_remote_addr zone=r:1m rate=100000r/s;
    limit_conn_zone $binary_remote_addr zone=c:1m;""",
    "proxied": """            limit_req zone=r burst=100000 nodelay;
            limit_conn c 1000;""",
}

# `limited`: every request refused by limit_req (503) before it is proxied (what a limited request costs)
LIMITED = {
    "maps": """    limit_req_zone $binary_remote_addr zone=r:1m rate=1r/m;
    limit_req_log_level info;
    error_log /dev/null crit;""",
    "proxied": """            limit_req zone=r;""",
}



PROXIED = """        location / {{
            proxy_pass http://backends;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
{proxied}
        }}"""

# `static`: a 1 KiB file from `root` (no proxying); `gzip`: a 100 KiB JSON file from `root`, compressed on the fly
# at nginx's default gzip_comp_level 1 for a client that accepts gzip
STATIC = {
    "location": """        location / {{
            root {files};
            types {{ text/html html; application/json json; }}
{served}
        }}""",
    "path": "/small.html",
}
GZIP = {
    "location": STATIC["location"],
    "served": """            gzip on;
            gzip_types application/json;""",
    "path": "/data.json",
    "headers": "Accept-Encoding: gzip\r\n",
}


# `h2`: the plain shape's proxied requests as HTTP/2 streams (h2c by prior knowledge), sent by h2load
H2 = {"listen": " http2", "h2load": True}

# `tls`: the plain shape's requests over TLS 1.3 keepalive connections (the certificate is written by `certificate`)
TLS = {
    "listen": " ssl",
    "locations": """        ssl_certificate {files}/cert.pem;
        ssl_certificate_key {files}/key.pem;
        ssl_protocols TLSv1.3;
        ssl_session_cache shared:S:10m;""",
    "tls": True,
}

SHAPES = {
    "plain": {},
    "routing": ROUTING,
    "limits": LIMITS,
    "limited": LIMITED,
    "static": STATIC,
    "gzip": GZIP,
    "h2": H2,
    "tls": TLS,
}


def files(d):
    """The `static` and `gzip` shapes' files, the same bytes every run: a 1 KiB page and a 100 KiB JSON array of
    records (seeded), written into `d`."""
    import json
    import random
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "small.html"), "w", encoding="utf-8") as fh:
        fh.write(("<p>" + "corelb " * 146)[:1020] + "</p>\n")
    rnd = random.Random(1)
    words = ["alpha", "beta", "gamma", "delta", "upstream", "server", "location", "proxy", "zone", "weight"]
    records, size = [], 0
    while size < 100 * 1024:
        r = {"id": len(records), "name": " ".join(rnd.choice(words) for _ in range(3)), "weight": rnd.randint(1, 100),
             "addr": f"10.{rnd.randint(0, 255)}.{rnd.randint(0, 255)}.{rnd.randint(1, 254)}:{rnd.randint(1024, 65535)}",
             "up": rnd.random() > 0.1, "latency_ms": round(rnd.uniform(0.1, 250.0), 3)}
        records.append(r)
        size += len(json.dumps(r)) + 2
    with open(os.path.join(d, "data.json"), "w", encoding="utf-8") as fh:
        json.dump(records, fh, indent=1)


def config(shape, ports, prefix=None, files_dir=""):
    front, b1, b2, b3 = ports
    parts = SHAPES[shape]
    main = ""
    if prefix is not None:
        main = f"pid {prefix}/nginx.pid;\nerror_log {prefix}/error.log;"
    front_location = parts.get("location", PROXIED).format(
        proxied=parts.get("proxied", ""), files=files_dir, served=parts.get("served", "")
    )
    return CONF.format(
        main=main,
        front_location=front_location,
        maps=parts.get("maps", ""),
        locations=parts.get("locations", "").format(files=files_dir),
        front=front,
        listen=parts.get("listen", ""),
        b1=b1,
        b2=b2,
        b3=b3,
    )


def certificate(d):
    """The `tls` shape's ECDSA P-256 certificate and key, written into `d` by the `openssl` command."""
    os.makedirs(d, exist_ok=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", os.path.join(d, "key.pem"), "-out", os.path.join(d, "cert.pem"), "-days", "30",
                    "-subj", "/CN=localhost"], check=True, capture_output=True)


def connect(port, shape):
    """A client connection to the front: over TLS 1.3 for the `tls` shape (the certificate is not checked)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    if not SHAPES[shape].get("tls"):
        return s
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx.wrap_socket(s, server_hostname="localhost")


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


def send(port, n, shape, status="200"):
    """n GETs of the shape's path, 500 per keepalive connection (below nginx's keepalive_requests 1000); every answer
    must have `status` (the `limited` shape's are 503s, but the first of the warm-up). The `h2` shape's come from
    h2load: n streams, 8 at a time on each of 4 connections, every one answered 2xx."""
    if SHAPES[shape].get("h2load"):
        out = subprocess.run(["h2load", "-n", str(n), "-c", "4", "-m", "8", "-t", "1", f"http://127.0.0.1:{port}/"],
                             capture_output=True, text=True, timeout=600).stdout
        m = re.search(r"status codes: (\d+) 2xx", out)
        if not m or int(m.group(1)) != n:
            raise SystemExit(f"h2load did not get {n} 2xx answers:\n{out}")
        return
    while n > 0:
        send_on_one(port, min(n, 500), shape, status)
        n -= 500


def request(shape):
    parts = SHAPES[shape]
    path, headers = parts.get("path", "/"), parts.get("headers", "")
    return f"GET {path} HTTP/1.1\r\nHost: x\r\nUser-Agent: curl/8.0\r\n{headers}\r\n".encode()


def read_answer(s, buf):
    """One answer from socket `s` (bytes already read in `buf`): (head, body, what is left of buf). A body is framed
    by Content-Length or chunked (nginx's gzip answers)."""
    while True:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            head = buf[:end].decode("latin-1")
            if re.search(r"(?im)^transfer-encoding:\s*chunked", head):
                body, pos = b"", end + 4
                while True:
                    eol = buf.find(b"\r\n", pos)
                    if eol >= 0:
                        size = int(buf[pos:eol].split(b";")[0], 16)
                        if len(buf) >= eol + 2 + size + 2:
                            if size == 0:
                                # no trailers are sent: the last chunk is followed by the empty line
                                return head, body, buf[eol + 4:]
                            body += buf[eol + 2:eol + 2 + size]
                            pos = eol + 2 + size + 2
                            continue
                    chunk = s.recv(65536)
                    if not chunk:
                        raise SystemExit("the front closed the connection")
                    buf += chunk
            m = re.search(r"(?im)^content-length:\s*(\d+)", head)
            total = end + 4 + (int(m.group(1)) if m else 0)
            if len(buf) >= total:
                return head, buf[end + 4:total], buf[total:]
        chunk = s.recv(65536)
        if not chunk:
            raise SystemExit("the front closed the connection")
        buf += chunk


def send_on_one(port, n, shape, status="200"):
    req = request(shape)
    with connect(port, shape) as s:
        buf = b""
        for _ in range(n):
            s.sendall(req)
            head, _, buf = read_answer(s, buf)
            if not head.startswith("HTTP/1.1 " + status) and status != "any":
                raise SystemExit(f"unexpected answer: {head.splitlines()[0]}")


def check_body(port, shape, files_dir):
    """The `static` and `gzip` shapes' answer checked once, off the counted requests: the file's bytes (gzip: once
    decompressed, with Content-Encoding gzip). Returns the body's size on the wire."""
    import gzip
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(request(shape))
        head, body, _ = read_answer(s, b"")
    path = SHAPES[shape]["path"]
    with open(os.path.join(files_dir, path.lstrip("/")), "rb") as fh:
        want = fh.read()
    got = body
    if shape == "gzip":
        if not re.search(r"(?im)^content-encoding:\s*gzip", head):
            raise SystemExit(f"the gzip shape's answer is not gzip-encoded: {head!r}")
        got = gzip.decompress(body)
    if got != want:
        raise SystemExit(f"the {shape} shape's answer differs from {path} ({len(got)} bytes, not {len(want)})")
    return len(body)


def is_nginx(binary):
    return os.path.basename(binary).startswith("nginx")


def count(binary, requests, warmup, shape, keep=None):
    with tempfile.TemporaryDirectory() as d:
        ports = free_ports(4)
        front = ports[0]
        conf = os.path.join(d, "front.conf")
        nginx = is_nginx(binary)
        with open(conf, "w", encoding="utf-8") as fh:
            fh.write(config(shape, ports, d if nginx else None, os.path.join(d, "files")))
        if "path" in SHAPES[shape]:
            files(os.path.join(d, "files"))
        if SHAPES[shape].get("tls"):
            certificate(os.path.join(d, "files"))
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
            expect = "503" if shape == "limited" else "200"
            send(front, warmup, shape, "any" if shape == "limited" else expect)
            wire = check_body(front, shape, os.path.join(d, "files")) if "path" in SHAPES[shape] else None
            subprocess.run(["callgrind_control", "-z", str(proc.pid)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            send(front, requests, shape, expect)
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
        return total / requests, wire


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--keep", metavar="DIR", help="copy each binary's callgrind profiles under DIR")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="plain", help="the config (see above)")
    ap.add_argument("binaries", nargs="+")
    args = ap.parse_args()
    for b in args.binaries:
        if not os.access(b, os.X_OK):
            raise SystemExit(f"not an executable: {b}")
    results = []
    for b in args.binaries:
        per, wire = count(b, args.requests, args.warmup, args.shape, args.keep)
        results.append((b, per))
        size = f"  ({wire} body bytes on the wire)" if wire is not None else ""
        print(f"{per:12.0f} instructions per request  {b}{size}", flush=True)
    if len(results) > 1:
        base = results[0][1]
        for b, per in results[1:]:
            print(f"{per / base:.3f}x of the first  {b}")


if __name__ == "__main__":
    sys.exit(main())
