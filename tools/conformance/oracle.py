#!/usr/bin/env python3
"""The nginx oracle: each scenario's config and requests go through a real nginx, then through the candidate, with
the same backends on the same ports; the backend that served each request (or the status, or the error) must be the
same for every request.

  python3 tools/conformance/oracle.py [--scenarios FILE]... [--only SUBSTRING] [--show] [--nginx BIN] CANDIDATE
  python3 tools/conformance/oracle.py --render PORT [--scenarios FILE]...

CANDIDATE is a shell command with {conf} (the config path) and optionally {dir} (a scratch directory), e.g.
"target/release/corelb -c {conf}". The scenario files default to tools/conformance/basic.py and
tools/conformance/scenarios.py (their format is described in basic.py). The last line is `N/M scenarios match`;
the exit status is 0 when all match. `--render PORT` prints every scenario's config as one JSON line (listen on
PORT, servers on PORT+1...) and starts nothing: engine/tests/config_conformance.rs parses them.
Needs nginx (and libnginx-mod-stream for stream scenarios); stdlib only.
"""
import argparse
import http.client
import json
import os
import queue
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SCENARIOS = [os.path.join(HERE, "basic.py"), os.path.join(HERE, "scenarios.py")]
STREAM_MODULE = "/usr/lib/nginx/modules/ngx_stream_module.so"
START_TIMEOUT = 10.0


def load_scenarios(path):
    """The SCENARIOS list a scenario file defines."""
    ns = {"__file__": path}
    with open(path) as f:
        exec(compile(f.read(), path, "exec"), ns)
    return ns["SCENARIOS"]


def render(sc, ports, listen):
    """The nginx config of a scenario: one upstream `backend` with the scenario's servers on `ports`, a front on
    127.0.0.1:`listen` (an http `location /`, or a stream server) that passes to it."""
    method = "".join(f"        {d}\n" for d in sc.get("upstream", []))
    servers = "".join(f"        server 127.0.0.1:{port}{' ' + params if params else ''};\n"
                      for (_, params, _), port in zip(sc["servers"], ports))
    upstream = f"    upstream backend {{\n{method}{servers}    }}\n"
    if sc.get("context", "http") == "stream":
        extra = "".join(f"        {d}\n" for d in sc.get("server", []))
        front = f"    server {{\n        listen 127.0.0.1:{listen};\n        proxy_pass backend;\n{extra}    }}\n"
        return f"worker_processes 1;\nevents {{\n}}\nstream {{\n{upstream}{front}}}\n"
    extra = "".join(f"            {d}\n" for d in sc.get("location", []))
    front = (f"    server {{\n        listen 127.0.0.1:{listen};\n        location / {{\n"
             f"            proxy_pass http://backend;\n{extra}        }}\n    }}\n")
    return f"worker_processes 1;\nevents {{\n}}\nhttp {{\n{upstream}{front}}}\n"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port):
    """Whether a socket listens on 127.0.0.1:port, read from /proc/net/tcp: no probe connection, which a stream
    front would answer with a balancer pick of its own."""
    want = f"0100007F:{port:04X}"
    try:
        with open("/proc/net/tcp") as f:
            return any(cols[1] == want and cols[3] == "0A" for cols in (line.split() for line in f) if len(cols) > 3)
    except OSError:
        return False


def wait_listening(port, proc, timeout=START_TIMEOUT):
    """True once 127.0.0.1:port listens; False if `proc` exits first or the timeout passes."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        if listening(port):
            return True
        time.sleep(0.02)
    return False


def ask(listen, src, path, timeout=10.0):
    """One GET from source address `src`: the body (the backend's name) on 200, else `status:N` or `error:KIND`."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", listen, timeout=timeout, source_address=(src, 0))
        c.request("GET", path, headers={"Connection": "close"})
        r = c.getresponse()
        body = r.read().decode("latin-1")
        c.close()
        return body if r.status == 200 else f"status:{r.status}"
    except (OSError, http.client.HTTPException) as e:
        return f"error:{type(e).__name__}"


class PortsTaken(Exception):
    """The backends could not listen on the ports chosen (another process took one in between): pick new ones."""


class Backends:
    """backends.py for a scenario's live servers; `seen` gets the PATH of every request head they read."""

    def __init__(self, sc, ports):
        live = [f"{name}={port}:{mode}" for (name, _, mode), port in zip(sc["servers"], ports) if mode != "dead"]
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "backends.py"), *live],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.seen = queue.Queue()
        if self.proc.stdout.readline().strip() != "ready":
            self.proc.wait()
            raise PortsTaken(self.proc.stderr.read().strip().splitlines()[-1:])
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            parts = line.split()
            if parts[:1] == ["got"] and len(parts) == 3:
                self.seen.put(parts[2])

    def wait_for(self, path, timeout=START_TIMEOUT):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                if self.seen.get(timeout=max(end - time.monotonic(), 0.01)) == path:
                    return True
            except queue.Empty:
                break
        return False

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def run_front(sc, cmd, workdir, ports, listen):
    """Runs one front (nginx or the candidate) over the scenario: (answers, None) or (None, why it did not start)."""
    backends = Backends(sc, ports)
    conf = os.path.join(workdir, "front.conf")
    with open(conf, "w") as f:
        f.write(render(sc, ports, listen))
    err = os.path.join(workdir, "front.err")
    with open(err, "w") as errf:
        front = subprocess.Popen("exec " + cmd.format(conf=shlex.quote(conf), dir=shlex.quote(workdir)), shell=True,
                                 stdout=subprocess.DEVNULL, stderr=errf, start_new_session=True)
    try:
        if not wait_listening(listen, front):
            with open(err) as f:
                return None, f.read()[-500:]
        holds = []
        for src, path in sc.get("hold", []):
            t = threading.Thread(target=ask, args=(listen, src, path), daemon=True)
            t.start()
            holds.append(t)
            backends.wait_for(path)  # the held request is at its backend before the next one is sent
        answers = [ask(listen, src, path) for src, path in sc["requests"]]
        for t in holds:
            t.join()
        return answers, None
    finally:
        try:
            os.killpg(front.pid, signal.SIGTERM)
            front.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(front.pid, signal.SIGKILL)
            front.wait()
        except ProcessLookupError:
            pass
        end = time.monotonic() + START_TIMEOUT
        while listening(listen) and time.monotonic() < end:  # nginx's master may outlive the shell a moment
            time.sleep(0.02)
        backends.stop()


def nginx_command(binary):
    load = f" load_module {STREAM_MODULE};" if binary == "nginx" and os.path.exists(STREAM_MODULE) else ""
    return f"{binary} -c {{conf}} -g 'daemon off; pid {{dir}}/nginx.pid; error_log {{dir}}/nginx.err;{load}'"


def both_fronts(sc, candidate, nginx):
    """(nginx's answers, the candidate's answers, why one did not start) over the same ports for both: consistent
    hashing hashes "host:port". Ports another process takes in between are chosen again (up to 3 times)."""
    for attempt in range(3):
        ports = [free_port() for _ in sc["servers"]]
        listen = free_port()
        try:
            with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as d2:
                want, why = run_front(sc, nginx_command(nginx), d1, ports, listen)
                if want is None:
                    return None, None, f"nginx did not start: {why.strip()}"
                got, why = run_front(sc, candidate, d2, ports, listen)
                return want, got, why
        except PortsTaken as e:
            print(f"{sc['name']}: the backends could not listen ({e}), new ports", flush=True)
    return None, None, "the backends could not listen three times"


def compare(sc, candidate, nginx, show):
    """True when the candidate answers the scenario as nginx does; prints one line (and both traces with --show)."""
    want, got, why = both_fronts(sc, candidate, nginx)
    if want is None:
        print(f"{sc['name']}: {why}")
        return False
    if got is None:
        print(f"{sc['name']}: the candidate did not start: {why.strip()[-300:]}")
        return False
    if got == want:
        print(f"{sc['name']}: match ({len(want)} requests)")
        return True
    differ = [i for i, (w, g) in enumerate(zip(want, got)) if w != g]
    print(f"{sc['name']}: MISMATCH at request {differ[0] if differ else len(want)} of {len(want)} "
          f"({len(differ)} differ)")
    if show:
        print("  nginx:    ", " ".join(want[:60]))
        print("  candidate:", " ".join(got[:60]))
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("candidate", nargs="?")
    ap.add_argument("--scenarios", action="append", help="a scenario file (repeatable)")
    ap.add_argument("--only", help="run the scenarios whose name contains this")
    ap.add_argument("--show", action="store_true", help="print both traces of a mismatch")
    ap.add_argument("--nginx", default="nginx", help="the nginx binary that is the oracle")
    ap.add_argument("--render", type=int, metavar="PORT", help="print the rendered configs as JSON lines and exit")
    a = ap.parse_args()
    scenarios = [sc for path in (a.scenarios or DEFAULT_SCENARIOS) for sc in load_scenarios(path)
                 if not a.only or a.only in sc["name"]]
    if a.render is not None:
        for sc in scenarios:
            ports = [a.render + 1 + i for i in range(len(sc["servers"]))]
            print(json.dumps({"name": sc["name"], "ports": ports, "conf": render(sc, ports, a.render)}))
        return
    if not a.candidate:
        ap.error("the candidate command is required")
    ok = sum(compare(sc, a.candidate, a.nginx, a.show) for sc in scenarios)
    print(f"{ok}/{len(scenarios)} scenarios match")
    sys.exit(0 if scenarios and ok == len(scenarios) else 1)


if __name__ == "__main__":
    main()
