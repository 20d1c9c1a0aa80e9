#!/usr/bin/env python3
"""Where a reuseport BPF program choosing by CPU puts loopback connections (BENCHMARKS.md, *Per-core scaling*).

Binds one SO_REUSEPORT listening socket per CPU on 127.0.0.1, attaches the classic BPF program
`ld #cpu; ret a` (SO_ATTACH_REUSEPORT_CBPF: the socket whose index is the CPU that handles the SYN, the
SO_INCOMING_CPU steering), then connects N times from a client pinned to each CPU in turn and counts which
socket each connection came to. On loopback the SYN is handled on the connecting CPU, so the client's CPU picks
the socket: a load generator on one CPU sends every connection to one shard.

    python3 tools/bench/incoming_cpu.py [N]
"""

import ctypes
import os
import select
import socket
import struct
import sys

SO_ATTACH_REUSEPORT_CBPF = 51
# struct sock_filter { u16 code; u8 jt; u8 jf; u32 k; }
BPF_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
BPF_RET_A = 0x16  # BPF_RET | BPF_A
SKF_AD_OFF = -0x1000
SKF_AD_CPU = 36


def cpu_program() -> bytes:
    """`A = the current CPU; return A`, as a packed struct sock_fprog (kept alive by the caller)."""
    insns = struct.pack("HBBI", BPF_LD_W_ABS, 0, 0, (SKF_AD_OFF + SKF_AD_CPU) & 0xFFFFFFFF)
    insns += struct.pack("HBBI", BPF_RET_A, 0, 0, 0)
    buf = ctypes.create_string_buffer(insns, len(insns))
    cpu_program.keep = buf
    return struct.pack("HxxxxxxP", 2, ctypes.addressof(buf))


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    cpus = sorted(os.sched_getaffinity(0))
    listeners = []
    port = 0
    for _ in cpus:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.bind(("127.0.0.1", port))
        port = s.getsockname()[1]
        s.listen(4096)
        s.setblocking(False)
        listeners.append(s)
    listeners[0].setsockopt(socket.SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, cpu_program())
    poller = select.poll()
    for s in listeners:
        poller.register(s, select.POLLIN)
    by_fd = {s.fileno(): i for i, s in enumerate(listeners)}
    for cpu in cpus:
        os.sched_setaffinity(0, {cpu})
        counts = [0] * len(listeners)
        for _ in range(n):
            c = socket.create_connection(("127.0.0.1", port))
            while True:
                ready = poller.poll(1000)
                if not ready:
                    print("no listener got the connection", file=sys.stderr)
                    return 1
                fd = ready[0][0]
                try:
                    conn, _ = listeners[by_fd[fd]].accept()
                except BlockingIOError:
                    continue
                counts[by_fd[fd]] += 1
                conn.close()
                break
            c.close()
        shares = ", ".join(f"socket {i}: {k}" for i, k in enumerate(counts))
        print(f"client on CPU {cpu}: {n} connections -> {shares}")
    os.sched_setaffinity(0, set(cpus))
    return 0


if __name__ == "__main__":
    sys.exit(main())
