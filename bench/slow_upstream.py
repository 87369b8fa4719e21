#!/usr/bin/env python3
"""A deliberately slow HTTP/1.1 upstream for the admission scenario.

Every request is answered after a fixed delay (a timer, not CPU work) with a
1 KiB body, on keep-alive connections. It stands for an application that
takes DELAY to answer, like an LLM API or a slow database-backed page. nginx
cannot sleep without third-party modules and a rate-limited nginx location
only has one-second granularity, so this small asyncio server is used
instead; it needs about 100 us of CPU per request, far below what the
admission scenario asks of it (a gate of G requests / DELAY).

Usage: slow_upstream.py PORT DELAY_SECONDS
"""

import asyncio
import sys

BODY = b"s" * 1024
RESPONSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
    b"Content-Length: %d\r\n\r\n" % len(BODY)
) + BODY


class Slow(asyncio.Protocol):
    def __init__(self, delay):
        self.delay = delay
        self.buf = b""
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.buf += data
        # GET only: no request bodies. Proxies do not pipeline, so each
        # connection has at most one request waiting.
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > 65536:
                    self.transport.close()
                return
            self.buf = self.buf[end + 4:]
            asyncio.get_running_loop().call_later(self.delay, self.answer)

    def answer(self):
        if not self.transport.is_closing():
            self.transport.write(RESPONSE)


async def main():
    port, delay = int(sys.argv[1]), float(sys.argv[2])
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Slow(delay), "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
