"""A grpcio xDS-enabled server (gRFC A36): listens on ``--address``, takes its listener
(``xds.istio.io/grpc/lds/inbound/<address>``: its security and routes) from the control plane in the
bootstrap ``GRPC_XDS_BOOTSTRAP_CONFIG``, and answers ``/echo.Echo/Call`` with ``--name``. Prints
``serving`` once started (grpcio serves only after the listener arrives)."""

import argparse
import signal
import sys
import threading
from concurrent import futures

import grpc


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--address", required=True, help="host:port")
    p.add_argument("--name", required=True)
    a = p.parse_args()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), xds=True)
    handler = grpc.unary_unary_rpc_method_handler(lambda request, context: a.name.encode())
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("echo.Echo", {"Call": handler}),))
    server.add_secure_port(a.address, grpc.xds_server_credentials(grpc.insecure_server_credentials()))
    server.start()
    print("serving", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    server.stop(0)
    sys.exit(0)


if __name__ == "__main__":
    main()
