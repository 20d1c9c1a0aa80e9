#!/usr/bin/env python3
"""Loopback HTTP/1.1 backends for the conformance oracle (stdlib only).

  backends.py NAME=PORT[:MODE] ...

Every backend answers with its own NAME as the body (and in `X-Backend`), so the client sees who served it. MODE:
  ok       answer at once (the default)
  reset    accept, read the request head, then reset the connection
  eNNN     answer with status NNN (e.g. e502)
  slowMS   answer after MS milliseconds
A path /sleep/MS answers after MS milliseconds in any answering mode. A "dead" server is one the oracle does not
start. Prints `ready` once every port listens, then `got NAME PATH` for each request head it reads (the oracle
waits on these lines instead of sleeping). Runs until killed.
"""
import asyncio
import http
import sys


def parse_spec(spec):
    name, _, rest = spec.partition("=")
    port, _, mode = rest.partition(":")
    return name, int(port), mode or "ok"


async def read_body(reader, head):
    """Reads (and drops) the request body the head announces: Content-Length or chunked."""
    length, chunked = 0, False
    for line in head.split("\r\n")[1:]:
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key == "content-length":
            length = int(value.strip())
        elif key == "transfer-encoding" and "chunked" in value.lower():
            chunked = True
    if length:
        await reader.readexactly(length)
    while chunked:
        size = int((await reader.readline()).split(b";")[0].strip(), 16)
        await reader.readexactly(size + 2)
        chunked = size != 0


def delay_ms(path, mode):
    ms = int(mode[4:]) if mode.startswith("slow") else 0
    if path.startswith("/sleep/"):
        ms += int(path.split("/")[2].split("?")[0])
    return ms


async def handle(reader, writer, name, mode):
    try:
        while True:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            path = head.split(" ", 2)[1]
            print(f"got {name} {path}", flush=True)
            if mode == "reset":
                writer.transport.abort()
                return
            await read_body(reader, head)
            if delay_ms(path, mode):
                await asyncio.sleep(delay_ms(path, mode) / 1000)
            status = int(mode[1:]) if mode[:1] == "e" and mode[1:].isdigit() else 200
            body = name.encode()
            reason = http.HTTPStatus(status).phrase
            writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\nContent-Type: text/plain\r\n"
                         f"X-Backend: {name}\r\n\r\n".encode() + body)
            await writer.drain()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, IndexError, ValueError):
        pass
    finally:
        writer.close()


async def main(specs):
    servers = []
    for spec in specs:
        name, port, mode = parse_spec(spec)
        servers.append(await asyncio.start_server(
            lambda r, w, n=name, m=mode: handle(r, w, n, m), "127.0.0.1", port, reuse_address=True, backlog=1024))
    print("ready", flush=True)
    await asyncio.gather(*(s.serve_forever() for s in servers))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
