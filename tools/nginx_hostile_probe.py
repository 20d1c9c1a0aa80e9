#!/usr/bin/env python3
"""Sends the hostile requests of engine/tests/smuggling.rs to a real nginx (1.22 on loopback) in front of a
recording backend, and prints, per case, nginx's status (or "close"), and the requests the backend saw.

Usage: python3 tools/nginx_hostile_probe.py [--nginx /usr/sbin/nginx] [--corelb target/debug/corelb] [CASE...]
Starts nginx with a temporary prefix on 127.0.0.1:18190 and the backend on 127.0.0.1:18191; stops both. With
--corelb, starts corelb on the same config instead, and prints nginx's answer beside it (differences marked).
"""
import argparse, os, re, socket, subprocess, sys, tempfile, threading, time

NGINX_PORT, BACKEND_PORT = 18190, 18191
H = b"POST / HTTP/1.1\r\nHost: a\r\n"

def big(n, c=b"x"):
    return c * n

CASES = {
    "cl_te": H + b"Content-Length: 13\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nSMUGGLED",
    "te_cl": H + b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n",
    "te_xchunked": H + b"Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n",
    "te_leading_spaces": H + b"Transfer-Encoding:   chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "te_trailing_space": H + b"Transfer-Encoding: chunked \r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "te_tab_value": H + b"Transfer-Encoding:\tchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "te_upper": H + b"Transfer-Encoding: CHUNKED\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "te_space_before_colon": H + b"Transfer-Encoding : chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n",
    "te_line_leading_space": H + b" Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n",
    "te_first_line_leading_space": b"POST / HTTP/1.1\r\n Transfer-Encoding: chunked\r\nHost: a\r\n\r\n0\r\n\r\n",
    "te_chunked_identity": H + b"Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
    "te_identity_chunked": H + b"Transfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n",
    "te_gzip_chunked": H + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    "te_gzip": H + b"Transfer-Encoding: gzip\r\n\r\n",
    "te_duplicate": H + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "te_duplicate_identity": H + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n",
    "te_obs_fold": H + b"Transfer-Encoding: identity\r\n\tchunked\r\n\r\n0\r\n\r\n",
    "te_in_fold_line": H + b"X-A: b\r\n\tTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "te_vtab": H + b"Transfer-Encoding:\x0bchunked\r\n\r\n0\r\n\r\n",
    "te_http10": b"POST / HTTP/1.0\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "cl_duplicate_differing": H + b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    "cl_duplicate_equal": H + b"Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
    "cl_plus": H + b"Content-Length: +5\r\n\r\nhello",
    "cl_minus": H + b"Content-Length: -1\r\n\r\n",
    "cl_hex": H + b"Content-Length: 0x5\r\n\r\nhello",
    "cl_space_inside": H + b"Content-Length: 5 5\r\n\r\nhello",
    "cl_comma_list": H + b"Content-Length: 5,5\r\n\r\nhello",
    "cl_empty": H + b"Content-Length: \r\n\r\n",
    "cl_overflow": H + b"Content-Length: 99999999999999999999999\r\n\r\n",
    "cl_i64_max": H + b"Content-Length: 9223372036854775807\r\n\r\n",
    "cl_i64_max_plus_1": H + b"Content-Length: 9223372036854775808\r\n\r\n",
    "cl_too_large": H + b"Content-Length: 1048577\r\n\r\n",
    "cl_leading_zeros": H + b"Content-Length: 0005\r\n\r\nhello",
    "chunk_size_non_hex": H + b"Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
    "chunk_size_overflow": H + b"Transfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\nhello\r\n0\r\n\r\n",
    "chunk_size_leading_zeros": H + b"Transfer-Encoding: chunked\r\n\r\n000000000000000000005\r\nhello\r\n0\r\n\r\n",
    "chunk_size_negative": H + b"Transfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n0\r\n\r\n",
    "chunk_size_0x": H + b"Transfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n",
    "chunk_data_no_crlf": H + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
    "chunk_data_too_long": H + b"Transfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n",
    "chunk_ext": H + b"Transfer-Encoding: chunked\r\n\r\n5;name=value\r\nhello\r\n0\r\n\r\n",
    "chunk_ext_long": H + b"Transfer-Encoding: chunked\r\n\r\n5;" + big(20000) + b"\r\nhello\r\n0\r\n\r\n",
    "chunk_size_space_junk": H + b"Transfer-Encoding: chunked\r\n\r\n5 junk\r\nhello\r\n0\r\n\r\n",
    "chunk_size_trailing_space": H + b"Transfer-Encoding: chunked\r\n\r\n5 \r\nhello\r\n0\r\n\r\n",
    "chunk_bare_lf_after_size": H + b"Transfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n",
    "chunk_bare_lf_after_data": H + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\n0\r\n\r\n",
    "chunk_bare_cr_after_size": H + b"Transfer-Encoding: chunked\r\n\r\n5\rhello\r\n0\r\n\r\n",
    "chunk_trailer": H + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n",
    "bare_lf_head": b"GET / HTTP/1.1\nHost: a\n\n",
    "bare_lf_one_line": b"GET / HTTP/1.1\r\nHost: a\nX-A: b\r\n\r\n",
    "bare_cr_in_value": b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\rc\r\n\r\n",
    "obs_fold": b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n",
    "nul_in_value": b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x00c\r\n\r\n",
    "nul_in_name": b"GET / HTTP/1.1\r\nHost: a\r\nX-\x00A: b\r\n\r\n",
    "ctl_in_value": b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x01c\r\n\r\n",
    "del_in_value": b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x7fc\r\n\r\n",
    "ctl_in_name": b"GET / HTTP/1.1\r\nHost: a\r\nX-\x01A: b\r\n\r\n",
    "space_in_name": b"GET / HTTP/1.1\r\nHost: a\r\nBad Header: b\r\n\r\n",
    "no_colon": b"GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n",
    "empty_name": b"GET / HTTP/1.1\r\nHost: a\r\n: b\r\n\r\n",
    "long_request_line": b"GET /" + big(9000, b"a") + b" HTTP/1.1\r\nHost: a\r\n\r\n",
    "long_request_line_20k": b"GET /" + big(20000, b"a") + b" HTTP/1.1\r\nHost: a\r\n\r\n",
    "long_header_line": b"GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + big(9000) + b"\r\n\r\n",
    "header_block_too_large": b"GET / HTTP/1.1\r\nHost: a\r\n" + b"".join(b"X-H%d: " % i + big(7000) + b"\r\n" for i in range(6)) + b"\r\n",
    "many_headers": b"GET / HTTP/1.1\r\nHost: a\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(150)) + b"\r\n",
    "absolute_form": b"GET http://evil.example/x?q HTTP/1.1\r\nHost: a\r\n\r\n",
    "absolute_form_no_host": b"GET http://evil.example/x HTTP/1.1\r\n\r\n",
    "absolute_form_https": b"GET https://evil.example/x HTTP/1.1\r\nHost: a\r\n\r\n",
    "absolute_form_ftp": b"GET ftp://evil.example/x HTTP/1.1\r\nHost: a\r\n\r\n",
    "absolute_form_userinfo": b"GET http://u@evil.example/x HTTP/1.1\r\nHost: a\r\n\r\n",
    "http09": b"GET /\r\n\r\n",
    "http2_preface": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "http20_get": b"GET / HTTP/2.0\r\nHost: a\r\n\r\n",
    "http12_get": b"GET / HTTP/1.2\r\nHost: a\r\n\r\n",
    "http30_get": b"GET / HTTP/3.0\r\nHost: a\r\n\r\n",
    "no_host_11": b"GET / HTTP/1.1\r\n\r\n",
    "duplicate_host": b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    "smuggled_in_body": H + b"Content-Length: 38\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n",
    "pipelined_two": b"GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    "lowercase_method": b"get / HTTP/1.1\r\nHost: a\r\n\r\n",
    "double_space_request_line": b"GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
    "tab_request_line": b"GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n",
    "host_empty": b"GET / HTTP/1.1\r\nHost:\r\n\r\n",
    "host_trailing_dot": b"GET / HTTP/1.1\r\nHost: a.\r\n\r\n",
    "host_space": b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
    "host_bad_port": b"GET / HTTP/1.1\r\nHost: a:x\r\n\r\n",
    "host_dotdot": b"GET / HTTP/1.1\r\nHost: a..b\r\n\r\n",
    "uri_space": b"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n",
    "uri_nul": b"GET /a\x00b HTTP/1.1\r\nHost: a\r\n\r\n",
    "uri_ctl": b"GET /a\x01b HTTP/1.1\r\nHost: a\r\n\r\n",
    "uri_fragment": b"GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n",
    "uri_dotdot": b"GET /../x HTTP/1.1\r\nHost: a\r\n\r\n",
    "uri_high_bytes": b"GET /caf\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n",
    "options_star": b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
    "connect": b"CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n",
    "expect_unknown": b"GET / HTTP/1.1\r\nHost: a\r\nExpect: x\r\n\r\n",
    "hop_by_hop": b"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, X-Secret\r\nKeep-Alive: 5\r\nTE: trailers\r\n"
                  b"Trailer: X-T\r\nUpgrade: websocket\r\nProxy-Connection: keep-alive\r\nX-Secret: 1\r\nX-Kept: 1\r\n"
                  b"X-Forwarded-For: 1.2.3.4\r\nX-Forwarded-For: 5.6.7.8\r\n\r\n",
}

class Recorder:
    def __init__(self, port):
        self.requests, self.raw = [], []
        self.sock = socket.socket(); self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port)); self.sock.listen(64)
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            c, _ = self.sock.accept()
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        c.settimeout(5); buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                try:
                    d = c.recv(65536)
                except OSError:
                    d = b""
                if not d:
                    c.close(); return
                buf += d
            head, buf = buf.split(b"\r\n\r\n", 1)
            m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
            n = int(m.group(1)) if m else 0
            while len(buf) < n:
                buf += c.recv(65536)
            body, buf = buf[:n], buf[n:]
            self.requests.append((head, body))
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"); c.close(); return

def send(raw):
    s = socket.create_connection(("127.0.0.1", NGINX_PORT)); s.settimeout(3)
    s.sendall(raw); out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d: break
            out += d
    except (socket.timeout, ConnectionResetError):
        out += b"<timeout>" if not out else b""
    s.close()
    statuses = re.findall(rb"HTTP/1\.[01] (\d{3})", out)
    return [int(x) for x in statuses] or [out[:40]]

def main():
    ap = argparse.ArgumentParser(); ap.add_argument("--nginx", default="/usr/sbin/nginx"); ap.add_argument("cases", nargs="*")
    ap.add_argument("--corelb", help="also run this corelb binary on the same config and compare")
    a = ap.parse_args()
    rec = Recorder(BACKEND_PORT)
    prefix = tempfile.mkdtemp(prefix="ngxprobe")
    os.makedirs(prefix + "/logs")
    conf = f"""worker_processes 1; daemon off; error_log {prefix}/logs/error.log info; pid {prefix}/nginx.pid;
events {{ worker_connections 64; }}
http {{ access_log off; client_body_temp_path {prefix}; proxy_temp_path {prefix};
  upstream u {{ server 127.0.0.1:{BACKEND_PORT}; }}
  server {{ listen 127.0.0.1:{NGINX_PORT}; location / {{ proxy_pass http://u;
    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for; }} }} }}
"""
    open(prefix + "/nginx.conf", "w").write(conf)
    # corelb refuses nginx's process and temp-file directives: the same http block without them
    plain = f"""events {{ }}
http {{ upstream u {{ server 127.0.0.1:{BACKEND_PORT}; }}
  server {{ listen 127.0.0.1:{NGINX_PORT}; location / {{ proxy_pass http://u;
    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for; }} }} }}
"""
    open(prefix + "/corelb.conf", "w").write(plain)
    names = a.cases or list(CASES)
    nginx = run_all(rec, [a.nginx, "-p", prefix, "-c", prefix + "/nginx.conf"], names, prefix)
    if not a.corelb:
        for name in names:
            print(f"{name:32} {nginx[name]}")
        return
    ours = run_all(rec, [a.corelb, "-c", prefix + "/corelb.conf"], names, prefix)
    for name in names:
        mark = "  " if ours[name][0] == nginx[name][0] else "<>"
        print(f"{mark} {name:32} corelb {ours[name]}  nginx {nginx[name]}")

def run_all(rec, argv, names, prefix):
    """Starts the proxy in argv, sends every case, stops it; returns name -> (statuses, backend request lines)."""
    proc = subprocess.Popen(argv, stderr=open(prefix + "/logs/stderr.log", "a"))
    out = {}
    try:
        time.sleep(0.7)
        for name in names:
            before = len(rec.requests)
            status = send(CASES[name])
            time.sleep(0.05)
            seen = [r[0].split(b"\r\n")[0].decode(errors="replace") for r in rec.requests[before:]]
            out[name] = (status, seen)
            if name == "hop_by_hop":
                for r in rec.requests[before:]:
                    print(argv[0], "hop_by_hop:", r[0].decode(errors="replace").replace("\r\n", " | "))
    finally:
        proc.terminate(); proc.wait()
    return out

if __name__ == "__main__":
    main()
