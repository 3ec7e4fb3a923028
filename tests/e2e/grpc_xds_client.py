"""A grpcio xDS client: resolves ``xds:///<target>`` via the bootstrap in ``GRPC_XDS_BOOTSTRAP_CONFIG``
and calls ``/echo.Echo/Call`` ``--count`` times, printing each answering backend's name per line.
With ``--mtls CERT KEY CA`` it uses xDS credentials (workload mTLS from the CDS transport socket)."""

import argparse
import sys
import time

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
    a = p.parse_args()
    if a.xds_creds:
        creds = grpc.xds_channel_credentials(grpc.experimental.insecure_channel_credentials())
        channel = grpc.secure_channel(a.target, creds)
    else:
        channel = grpc.insecure_channel(a.target)
    call = channel.unary_unary("/echo.Echo/Call")
    end = time.monotonic() + a.duration if a.duration else None
    for _ in range(a.count):
        if end is not None and time.monotonic() > end:
            break
        try:
            print(call(b"hi", timeout=a.timeout, wait_for_ready=True).decode(), flush=True)
        except grpc.RpcError as e:
            print(f"ERROR {e.code()} {e.details()}", file=sys.stderr, flush=True)
            if not a.forever:
                sys.exit(1)
        time.sleep(a.interval)
    while a.forever:
        try:
            call(b"hi", timeout=a.timeout, wait_for_ready=True)
        except grpc.RpcError:
            time.sleep(0.5)


if __name__ == "__main__":
    main()
