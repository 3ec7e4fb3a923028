"""A grpcio xDS client: resolves ``xds:///<target>`` via the bootstrap in ``GRPC_XDS_BOOTSTRAP_CONFIG``
and calls ``/echo.Echo/Call`` ``--count`` times, printing each answering backend's name per line.
With ``--xds-creds`` it uses xDS credentials (workload mTLS from the CDS transport socket).

Traffic modes (backends answer with their name): ``--report`` prints one JSON object at the end,
``{"backends": {name: count}, "statuses": {code: count}}``; ``--stream`` prints one JSON line per RPC,
``{"t": <wall-clock seconds>, "backend": name or null, "status": code}``. Both count failures instead
of stopping, and send the RPCs without wait-for-ready, so a failing RPC is seen as the application
would see it. ``--metadata KEY=VALUE`` (repeatable) is sent with every RPC."""

import argparse
import json
import sys
import time
from collections import Counter

import grpc
import grpc.experimental


def main():
    p = argparse.ArgumentParser()
    p.add_argument("target")
    p.add_argument("--count", type=int, default=4)
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("--xds-creds", action="store_true")
    p.add_argument("--forever", action="store_true", help="keep the channel (and its xDS stream) open, ignoring call errors")
    p.add_argument("--duration", type=float, help="stop after this many seconds (or --count calls)")
    p.add_argument("--interval", type=float, default=0.0, help="pause between calls")
    p.add_argument("--metadata", action="append", default=[], metavar="KEY=VALUE", help="sent with every RPC")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--report", action="store_true", help="per-backend and per-status counts as JSON at the end")
    mode.add_argument("--stream", action="store_true", help="one JSON line per RPC")
    a = p.parse_args()
    if a.xds_creds:
        creds = grpc.xds_channel_credentials(grpc.experimental.insecure_channel_credentials())
        channel = grpc.secure_channel(a.target, creds)
    else:
        channel = grpc.insecure_channel(a.target)
    call = channel.unary_unary("/echo.Echo/Call")
    metadata = tuple(tuple(kv.split("=", 1)) for kv in a.metadata)
    end = time.monotonic() + a.duration if a.duration else None
    if a.report or a.stream:
        return traffic(call, metadata, a, end)
    for _ in range(a.count):
        if end is not None and time.monotonic() > end:
            break
        try:
            print(call(b"hi", timeout=a.timeout, wait_for_ready=True, metadata=metadata).decode(), flush=True)
        except grpc.RpcError as e:
            print(f"ERROR {e.code()} {e.details()}", file=sys.stderr, flush=True)
            if not a.forever:
                sys.exit(1)
        time.sleep(a.interval)
    while a.forever:
        try:
            call(b"hi", timeout=a.timeout, wait_for_ready=True, metadata=metadata)
        except grpc.RpcError:
            time.sleep(0.5)


def traffic(call, metadata, a, end):
    """``--report`` / ``--stream``: every RPC counted by backend and status code."""
    backends, statuses = Counter(), Counter()
    sent = 0
    while (a.forever and a.stream) or sent < a.count:
        if end is not None and time.monotonic() > end:
            break
        sent += 1
        try:
            backend, status = call(b"hi", timeout=a.timeout, metadata=metadata).decode(), "OK"
        except grpc.RpcError as e:
            backend, status = None, e.code().name
        if a.stream:
            print(json.dumps({"t": time.time(), "backend": backend, "status": status}), flush=True)
        else:
            statuses[status] += 1
            if backend is not None:
                backends[backend] += 1
        time.sleep(a.interval)
    if a.report:
        print(json.dumps({"backends": dict(backends), "statuses": dict(statuses)}), flush=True)


if __name__ == "__main__":
    main()
