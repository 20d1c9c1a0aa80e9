#!/usr/bin/env python3
"""Cost of being scraped: one corelb worker (CPU 0) proxying to a keepalive upstream in the same process, loaded by
`corelb bench` (CPU 1), while a Prometheus-like scraper fetches, every INTERVAL seconds from a second listener,
either /metrics ("on") or a `return 200` page ("off": the same scraper and connections, no metrics rendering), so
that the difference is the rendering alone. Rounds alternate; prints req/s and CPU per request (the process's
utime+stime over the requests the generator counted) for each round, then the medians.

Usage: tools/metrics_overhead.py [ROUNDS] [INTERVAL]   (run from the repository root after cargo build --release)
"""
import json, os, re, subprocess, sys, tempfile, threading, time, urllib.request

BIN = "target/release/corelb"
CONF = """worker_processes 1;
events { worker_connections 1024; }
http {
  upstream b { zone b 64k; server 127.0.0.1:18391; server 127.0.0.1:18392; keepalive 16; }
  server { listen 127.0.0.1:18390;
    location / { proxy_pass http://b; proxy_http_version 1.1; proxy_set_header Connection ""; } }
  server { listen 127.0.0.1:18393; location = /metrics { metrics; } location = /plain { return 200 "x"; } }
  server { listen 127.0.0.1:18391; return 200 "hello\\n"; }
  server { listen 127.0.0.1:18392; return 200 "hello\\n"; }
}
"""


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def listening(port):
    """Whether 127.0.0.1:port listens (/proc/net/tcp, state 0A)."""
    want = f"0100007F:{port:04X}"
    with open("/proc/net/tcp") as f:
        return any(c[1] == want and c[3] == "0A" for c in (line.split() for line in f) if len(c) > 3)


def wait_listening(ports, proc, timeout=10.0):
    end = time.monotonic() + timeout
    while not all(map(listening, ports)):
        if proc.poll() is not None or time.monotonic() > end:
            sys.exit(f"{BIN} did not start listening on {ports}")
        time.sleep(0.02)


def scraper(stop, interval, count, path):
    while not stop.is_set():
        with urllib.request.urlopen("http://127.0.0.1:18393" + path, timeout=5) as r:
            r.read()
        count[0] += 1
        stop.wait(interval)


def one_round(conf, scrape, interval):
    proc = subprocess.Popen(["taskset", "-c", "0", BIN, "-c", conf])
    try:
        wait_listening([18390, 18391, 18392, 18393], proc)
        stop, count = threading.Event(), [0]
        path = "/metrics" if scrape else "/plain"
        t = threading.Thread(target=scraper, args=(stop, interval, count, path))
        t.start()
        before = cpu_seconds(proc.pid)
        report = os.path.join(os.path.dirname(conf), "bench.json")
        out = subprocess.run([BIN, "bench", "--cores", "1", "-c50", "-d3s", "--json", report,
                              "http://127.0.0.1:18390/"], capture_output=True, text=True, check=True)
        used = cpu_seconds(proc.pid) - before
        stop.set()
        t.join()
        rep = json.load(open(report))
        reqs = rep["requests"]
        return reqs / rep["duration_s"], used * 1e6 / reqs, count[0]
    finally:
        proc.terminate()
        proc.wait()


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    interval = float(sys.argv[2]) if len(sys.argv) > 2 else 0.1
    conf = os.path.join(tempfile.mkdtemp(prefix="metrics-overhead-"), "corelb.conf")
    open(conf, "w").write(CONF)
    print(f"{'round':>5} {'scrape':>6} {'req/s':>10} {'cpu us/req':>11} {'scrapes':>8}")
    results = {False: [], True: []}
    for r in range(1, rounds + 1):
        for scrape in (False, True):
            rps, cpu, n = one_round(conf, scrape, interval)
            results[scrape].append((rps, cpu))
            print(f"{r:>5} {('on' if scrape else 'off'):>6} {rps:>10.0f} {cpu:>11.2f} {n:>8}")
    med = lambda xs: sorted(xs)[len(xs) // 2]
    for scrape in (False, True):
        rps = med([x[0] for x in results[scrape]])
        cpu = med([x[1] for x in results[scrape]])
        print(f"median {('on' if scrape else 'off'):>4} {rps:>10.0f} {cpu:>11.2f}")


if __name__ == "__main__":
    main()
