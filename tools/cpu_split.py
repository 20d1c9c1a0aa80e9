#!/usr/bin/env python3
"""User and kernel CPU per request of a front against nginx, with /work/shared/bench/perf.py's setup (same
config, nginx backends and wrk -t1 -c64 on CPU 0, the front on the last CPU), alternated, medians.

  python3 tools/cpu_split.py ROUNDS "target/release/corelb -c {conf}"
"""
import importlib.util, os, sys, time, statistics, shlex, tempfile
spec = importlib.util.spec_from_file_location("perf", "/work/shared/bench/perf.py")
perf = importlib.util.module_from_spec(spec); spec.loader.exec_module(perf)

def split_cpu(pgid):
    tick = os.sysconf("SC_CLK_TCK"); u = s = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit(): continue
        try: f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError: continue
        if int(f[2]) == pgid: u += int(f[11]); s += int(f[12])
    return u / tick, s / tick

rounds = int(sys.argv[1]); cand = sys.argv[2]
d = tempfile.mkdtemp(); bports = [perf.free_port(), perf.free_port()]; listen = perf.free_port()
bconf = os.path.join(d, "backend.conf")
open(bconf, "w").write("worker_processes 1;\nevents { worker_connections 4096; }\nhttp {\n access_log off;\n keepalive_requests 1000000;\n"
    + "".join(f" server {{ listen 127.0.0.1:{p}; location / {{ return 200 'hello from {p}\\n'; }} }}\n" for p in bports) + "}\n")
conf = os.path.join(d, "front.conf")
open(conf, "w").write(f"worker_processes 1;\nevents {{ worker_connections 4096; }}\nhttp {{\n    access_log off;\n    upstream backend {{\n"
    + "".join(f"        server 127.0.0.1:{p};\n" for p in bports) + "        keepalive 64;\n    }\n"
    f"    server {{\n        listen 127.0.0.1:{listen};\n        location / {{\n            proxy_pass http://backend;\n            proxy_http_version 1.1;\n"
    "            proxy_set_header Connection \"\";\n        }\n    }\n}\n")
fronts = {"candidate": cand.format(conf=shlex.quote(conf)),
          "nginx": f"nginx -c {conf} -g 'daemon off; pid {d}/nginx.pid; error_log {d}/nginx.err;'"}
cpus = str(perf.NCPU - 1)
be = perf.start(f"nginx -c {bconf} -g 'daemon off; pid {d}/be.pid; error_log {d}/be.err;'", "0", os.path.join(d, "be.log"))
for p in bports: perf.wait_port(p)
res = {k: [] for k in fronts}
try:
    for r in range(rounds):
        order = list(fronts.items())
        if r % 2: order.reverse()
        for name, cmd in order:
            p = perf.start(cmd, cpus, os.path.join(d, name + ".log"))
            perf.wait_port(listen); perf.wrk(listen, 1, 64)
            u0, s0 = split_cpu(p.pid)
            rps, lat, bad, sock = perf.wrk(listen, 4, 64)
            u1, s1 = split_cpu(p.pid); n = rps * 4
            res[name].append((rps, (u1 - u0) / n * 1e6, (s1 - s0) / n * 1e6))
            perf.stop(p); time.sleep(0.3)
finally:
    perf.stop(be)
for name, runs in res.items():
    print(f"{name:10} rps {statistics.median(x[0] for x in runs):8.0f}  user us/req {statistics.median(x[1] for x in runs):6.2f}"
          f"  sys us/req {statistics.median(x[2] for x in runs):6.2f}")
