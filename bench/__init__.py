"""Benchmarks: ``make bench`` runs them all (see ``__main__``); they print tables, not verdicts."""

import os

# The benchmarks run a grpc.aio server in this process and spawn Envoys from it. With gRPC's
# fork support on, its fork handlers race the spawn and about 4% of Envoy starts die with
# SIGABRT ("epoll_wait error: Bad file descriptor") before exec. gRPC reads this variable once,
# when it is first imported, so it is set here, before anything imports grpc.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
