#!/usr/bin/env python3
"""Open N client connections, make one HTTP/1.1 request on each, hold them idle.

Used by the memory scenario: after every connection has had its answer the
proxy holds N idle keep-alive connections, and the harness reads its RSS.

Prints `READY opened=X failed=Y seconds=T errors={...}` once every attempt has
finished, then waits until stdin is closed (or --hold seconds pass), then
prints `DONE held=X closed_by_server=C` and exits, closing everything.

With --upload BYTES the one request is a PUT of that many bytes to
/upload/hold instead (does an idle connection's footprint depend on what it
carried before?).

Usage: hold.py --port P --count N [--tls] [--upload BYTES] [--parallel 200] [--hold 120]
"""

import argparse
import asyncio
import collections
import json
import os
import re
import ssl
import sys
import time

REQUEST = b"GET /1k HTTP/1.1\r\nHost: localhost\r\nUser-Agent: weir-bench-hold\r\n\r\n"
LENGTH = re.compile(rb"(?im)^content-length:\s*(\d+)\s*$")


def upload_request(size):
    return (b"PUT /upload/hold HTTP/1.1\r\nHost: localhost\r\nUser-Agent: weir-bench-hold\r\n"
            b"Content-Length: %d\r\n\r\n" % size)


async def open_one(port, ctx, gate, held, errors, upload):
    async with gate:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port, ssl=ctx), 30
            )
            if upload:
                writer.write(upload_request(upload))
                chunk = bytes(64 * 1024)
                left = upload
                while left:
                    writer.write(chunk[:min(left, len(chunk))])
                    left -= min(left, len(chunk))
                    await writer.drain()
            else:
                writer.write(REQUEST)
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            m = LENGTH.search(head)
            # a GET answers 200 with a body; a PUT 201/204, maybe without a length
            ok = head.startswith(b"HTTP/1.1 2") if upload else head.startswith(b"HTTP/1.1 200") and m
            if not ok:
                errors["bad response: " + head.split(b"\r\n", 1)[0].decode(errors="replace")] += 1
                writer.close()
                return
            if m:
                await asyncio.wait_for(reader.readexactly(int(m.group(1))), 30)
            held.append((reader, writer))
        except Exception as e:  # noqa: BLE001 - every failure is counted and reported
            errors[type(e).__name__] += 1


async def closed_by_server(reader):
    try:
        data = await reader.read(1)
        return data == b""
    except Exception:  # noqa: BLE001
        return True


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--tls", action="store_true")
    ap.add_argument("--parallel", type=int, default=200)
    ap.add_argument("--hold", type=float, default=120)
    ap.add_argument("--upload", type=int, default=0)
    a = ap.parse_args()

    ctx = None
    if a.tls:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    gate = asyncio.Semaphore(a.parallel)
    held, errors = [], collections.Counter()
    t0 = time.monotonic()
    await asyncio.gather(*(open_one(a.port, ctx, gate, held, errors, a.upload) for _ in range(a.count)))
    failed = a.count - len(held)
    print(
        f"READY opened={len(held)} failed={failed} seconds={time.monotonic() - t0:.1f} "
        f"errors={json.dumps(dict(errors))}",
        flush=True,
    )

    watchers = [asyncio.ensure_future(closed_by_server(r)) for r, _ in held]
    loop = asyncio.get_running_loop()
    stdin_closed = loop.run_in_executor(None, sys.stdin.read)
    try:
        await asyncio.wait_for(asyncio.shield(stdin_closed), a.hold)
    except asyncio.TimeoutError:
        pass
    closed = sum(1 for w in watchers if w.done() and w.result())
    print(f"DONE held={len(held)} closed_by_server={closed}", flush=True)
    for w in watchers:
        w.cancel()
    for _, writer in held:
        writer.transport.abort()
    sys.stdout.flush()
    # The stdin reader thread may still be blocked; do not wait for it.
    os._exit(0)


if __name__ == "__main__":
    asyncio.run(main())
