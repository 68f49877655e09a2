#!/usr/bin/env python3
"""A loopback HTTP/1.1 server that stalls: for the open-loop (coordinated omission) check.

    stall-server.py [PORT] [--period 5] [--stall 1]

Answers every request at once with a small 200 (keep-alive), except that in the last
STALL seconds of every PERIOD seconds (counted from the first request) it holds every answer
until the stall ends: the server is frozen 1 s out of every 5 by default.

What the stall implies for a constant-rate client (rate R spread evenly, one request in flight
per connection, latency counted from each request's intended send time): a fraction
STALL/PERIOD of the requests is due during a stall, and one due at time t into the stall is
answered at its end, after STALL - t. So the corrected latency is above L for a fraction
(STALL/PERIOD) x (1 - L/STALL) of all requests, and the percentile p is
    L(p) = STALL x (1 - (1 - p/100) x PERIOD/STALL)
With 1 s every 5 s: p99 = 0.95 s, p99.9 = 0.995 s, p90 = 0.5 s, p50 = 0 (the service time).
Measured from the actual send instead (uncorrected), only the requests in flight when the stall
began see it: c of R x PERIOD per period, so the uncorrected p99 stays at the service time when
c / (R x PERIOD) < 1%.
"""
import asyncio
import sys
import time

port = int(sys.argv[1]) if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else 8090
period = 5.0
stall = 1.0
for i, a in enumerate(sys.argv):
    if a == "--period":
        period = float(sys.argv[i + 1])
    if a == "--stall":
        stall = float(sys.argv[i + 1])

start = None
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"


def hold_for():
    """Seconds until the current stall ends (0 outside a stall)."""
    global start
    now = time.monotonic()
    if start is None:
        start = now
    into = (now - start) % period
    if into >= period - stall:
        return period - into
    return 0.0


async def handle(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            if length:
                await reader.readexactly(length)
            wait = hold_for()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(RESPONSE)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=4096)
    print(f"stall-server on 127.0.0.1:{port}: stalls {stall}s every {period}s", flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
