#!/usr/bin/env python3
"""The XDP data path beside corelb's user-space stream proxy and nginx's stream proxy, on the same network
namespaces: new connections per second, throughput, and the balancer's CPU for each.

  sudo python3 tools/bench/xdp.py [--corelb target/release/corelb] [--nginx /usr/sbin/nginx]
                                  [--rounds N] [--duration S] [--conns C] [--big-conns C]

The lab is bin/tests/xdp_lab's (made here with `ip`, removed at the end): a client, a balancer and three real
servers on a bridge, addresses 10.218.1.0/24 (clients) and 10.218.2.0/24 (real servers) that exist only inside
the namespaces. The real servers are corelb HTTP servers (`return 200` at `/`, a 1 MiB file at `/big`) holding
the VIP on their loopback, so that the XDP front (`mode=dr`) sends replies past the balancer, while the
user-space fronts (corelb's `stream` and nginx's, one worker each) proxy both ways. `corelb bench` in the client's
namespace runs two loads per front and round (fronts in reverse order on odd rounds):

- new connections: `Connection: close` to `/`, one TCP connection per request, C connections at once;
- throughput: keep-alive GETs of `/big` over --big-conns connections.

CPU on the balancer: for the user-space fronts their process's utime+stime; for XDP the program's own run time
(`kernel.bpf_stats_enabled`, the prog's `run_time_ns`, set for the run and put back), which leaves out the veth
driver's work around it (the same kernel work a user-space front's packets cost too, not counted there either).
Everything shares the machine's cores, so the absolute rates are the lab's; the ratios measured side by side are
the result. The last lines are the medians. Stdlib only.
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TAG = "xb"
ROLES = ["sw", "c", "lb", "r1", "r2", "r3"]
VIP = "10.218.1.100"
TICK = os.sysconf("SC_CLK_TCK")


def sh(*args, check=True):
    return subprocess.run(args, capture_output=True, text=True, check=check).stdout


def ns(role):
    return f"{TAG}-{role}"


def in_ns(role, *args):
    return ["ip", "netns", "exec", ns(role), *args]


def lab_up(scratch):
    lab_down()
    for r in ROLES:
        sh("ip", "netns", "add", ns(r))
        sh("ip", "-n", ns(r), "link", "set", "lo", "up")
    sh("ip", "-n", ns("sw"), "link", "add", "br0", "type", "bridge")
    sh("ip", "-n", ns("sw"), "link", "set", "br0", "up")
    for r in ROLES[1:]:
        sh("ip", "-n", ns("sw"), "link", "add", f"p-{r}", "type", "veth", "peer", "name", "eth0", "netns", ns(r))
        sh("ip", "-n", ns("sw"), "link", "set", f"p-{r}", "master", "br0", "up")
        sh("ip", "-n", ns(r), "link", "set", "eth0", "up")
        if r != "lb":
            sh(*in_ns(r, "ethtool", "-K", "eth0", "tx", "off"))
    # XDP_TX on the balancer's veth needs its peer's XDP ring: a program that passes everything
    src = os.path.join(scratch, "pass.c")
    with open(src, "w") as f:
        f.write('#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n'
                'SEC("xdp") int pass(struct xdp_md *c) { return XDP_PASS; }\nchar L[] SEC("license") = "GPL";\n')
    obj = os.path.join(scratch, "pass.o")
    sh("clang", "-O2", "-target", "bpf", f"-I/usr/include/{os.uname().machine}-linux-gnu", "-c", src, "-o", obj)
    sh("ip", "-n", ns("sw"), "link", "set", "dev", "p-lb", "xdp", "obj", obj, "sec", "xdp")
    # a new connection per request: TIME_WAIT ports reused
    for r in ("c", "lb"):
        sh(*in_ns(r, "sysctl", "-qw", "net.ipv4.tcp_tw_reuse=1"))
    sh("ip", "-n", ns("c"), "addr", "add", "10.218.1.2/24", "dev", "eth0")
    sh("ip", "-n", ns("c"), "route", "add", "default", "via", "10.218.1.1")
    for a in ["10.218.1.1/24", "10.218.2.1/24", f"{VIP}/32"]:
        sh("ip", "-n", ns("lb"), "addr", "add", a, "dev", "eth0")
    for n in (1, 2, 3):
        r = f"r{n}"
        sh("ip", "-n", ns(r), "addr", "add", f"10.218.2.1{n}/24", "dev", "eth0")
        sh("ip", "-n", ns(r), "addr", "add", f"{VIP}/32", "dev", "lo")
        sh(*in_ns(r, "sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1", "net.ipv4.conf.all.arp_announce=2"))
        sh("ip", "-n", ns(r), "route", "add", "10.218.1.0/24", "dev", "eth0")


def lab_down():
    for r in ROLES:
        sh("ip", "netns", "del", ns(r), check=False)


def start(cmd, role, log):
    p = subprocess.Popen(in_ns(role, *cmd), stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    return p


def wait_port(role, port, proc, limit=15.0):
    end = time.time() + limit
    while time.time() < end and proc.poll() is None:
        probe = f"import socket; socket.create_connection(('{VIP}', {port}), 1).close()"
        if subprocess.run(in_ns(role, sys.executable, "-c", probe), capture_output=True).returncode == 0:
            return True
        time.sleep(0.2)
    return False


def reals_conf(d, n):
    root = os.path.join(d, "www")
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "big"), "wb") as f:
        f.write(b"x" * (1 << 20))
    conf = os.path.join(d, f"r{n}.conf")
    with open(conf, "w") as f:
        f.write(f"worker_processes 1;\npid {d}/r{n}.pid;\nerror_log {d}/r{n}.err;\nevents {{}}\nhttp {{\n"
                f"    access_log off;\n    keepalive_requests 1000000;\n    server {{\n        listen 80;\n"
                f"        location = / {{ return 200 \"r{n}\\n\"; }}\n        location /big {{ root {root}; }}\n"
                "    }\n}\n")
    return conf


def front_conf(d, kind):
    ups = "    upstream reals {\n" + "".join(f"        server 10.218.2.1{n}:80;\n" for n in (1, 2, 3)) + "    }\n"
    listen = f"listen {VIP}:80 xdp=eth0 mode=dr;" if kind == "xdp" else f"listen {VIP}:80;"
    conf = os.path.join(d, f"{kind}.conf")
    module = "/usr/lib/nginx/modules/ngx_stream_module.so"
    load = f"load_module {module};\n" if kind == "nginx-stream" and os.path.exists(module) else ""
    with open(conf, "w") as f:
        f.write(f"{load}worker_processes 1;\npid {d}/{kind}.pid;\nerror_log {d}/{kind}.err;\nevents {{\n"
                f"    worker_connections 8192;\n}}\nstream {{\n{ups}    server {{\n        {listen}\n"
                "        proxy_pass reals;\n    }\n}\n")
    return conf


def proc_cpu(pid):
    """utime+stime of `pid` and its children that ran (nginx's workers), seconds."""
    total = 0.0
    for p in [pid] + [int(c) for c in sh("pgrep", "-P", str(pid), check=False).split()]:
        try:
            fields = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / TICK
        except OSError:
            pass
    return total


def xdp_cpu(pid):
    """The XDP program's run time so far (seconds), from its fd's fdinfo in `pid`."""
    total = 0
    for info in glob.glob(f"/proc/{pid}/fdinfo/*"):
        try:
            text = open(info).read()
        except OSError:
            continue
        if "prog_type:\t6" in text:
            for line in text.splitlines():
                if line.startswith("run_time_ns:"):
                    total = max(total, int(line.split()[1]))
    return total / 1e9


def bench(corelb, scratch, path, conns, seconds, close):
    report = os.path.join(scratch, "bench.json")
    extra = ["-H", "Connection: close"] if close else []
    subprocess.run(in_ns("c", corelb, "bench", "-c", str(conns), "-d", f"{seconds}s", "--warmup", "1s",
                         "--json", report, *extra, f"http://{VIP}{path}"), capture_output=True, check=True)
    with open(report) as f:
        r = json.load(f)
    return r["requests"], r["requests_per_sec"], r["non_2xx_3xx"] + sum(r["errors"].values())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corelb", default="target/release/corelb")
    ap.add_argument("--nginx", default="/usr/sbin/nginx")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--conns", type=int, default=32)
    ap.add_argument("--big-conns", type=int, default=4)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP tools/bench/xdp.py: needs root (network namespaces)")
        return 0
    corelb = os.path.abspath(a.corelb)
    fronts = ["xdp", "corelb-stream"] + (["nginx-stream"] if os.path.exists(a.nginx) else [])
    scratch = tempfile.mkdtemp(prefix="corelb-xdp-bench-")
    stats_was = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    results = {f: {"conn_rps": [], "conn_cpu_us": [], "mbps": [], "mb_cpu_us": []} for f in fronts}
    reals = []
    try:
        lab_up(scratch)
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write("1")
        for n in (1, 2, 3):
            reals.append(start([corelb, "-c", reals_conf(scratch, n)], f"r{n}", os.devnull))
        for rnd in range(a.rounds):
            order = fronts if rnd % 2 == 0 else fronts[::-1]
            for kind in order:
                conf = front_conf(scratch, "xdp" if kind == "xdp" else kind)
                cmd = [a.nginx, "-c", conf, "-g", "daemon off;"] if kind == "nginx-stream" else [corelb, "-c", conf]
                p = start(cmd, "lb", os.path.join(scratch, f"{kind}.log"))
                try:
                    if not wait_port("c", 80, p):
                        print(f"{kind}: did not start: {open(os.path.join(scratch, kind + '.log')).read()}")
                        continue
                    cpu = (lambda: xdp_cpu(p.pid)) if kind == "xdp" else (lambda: proc_cpu(p.pid))
                    c0 = cpu()
                    n, rps, bad = bench(corelb, scratch, "/", a.conns, a.duration, True)
                    c1 = cpu()
                    m, mrps, mbad = bench(corelb, scratch, "/big", a.big_conns, a.duration, False)
                    c2 = cpu()
                    r = results[kind]
                    r["conn_rps"].append(rps)
                    r["conn_cpu_us"].append((c1 - c0) * 1e6 / max(n, 1))
                    r["mbps"].append(mrps * 8 * (1 << 20) / 1e6)
                    r["mb_cpu_us"].append((c2 - c1) * 1e6 / max(m, 1))
                    print(f"round {rnd + 1} {kind:14} new conns/s {rps:9.0f} ({bad} bad)  CPU/conn "
                          f"{r['conn_cpu_us'][-1]:7.2f} us | 1 MiB GETs: {r['mbps'][-1]:8.0f} Mbit/s ({mbad} bad) "
                          f"CPU/MiB {r['mb_cpu_us'][-1]:8.2f} us", flush=True)
                finally:
                    p.terminate()
                    p.wait(10)
        print("median:")
        for kind in fronts:
            r = results[kind]
            if r["conn_rps"]:
                med = {k: statistics.median(v) for k, v in r.items()}
                print(f"  {kind:14} new conns/s {med['conn_rps']:9.0f}  balancer CPU/conn {med['conn_cpu_us']:7.2f} us"
                      f"  throughput {med['mbps']:8.0f} Mbit/s  balancer CPU/MiB {med['mb_cpu_us']:8.2f} us")
    finally:
        for p in reals:
            p.terminate()
            p.wait(10)
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(stats_was)
        lab_down()
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
