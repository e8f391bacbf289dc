"""The lab around xds-control: what proves the control plane, never what an operator deploys.

``sim`` (simulated inference servers), ``loadgen`` (open-loop load), ``harness`` (real Envoy,
Prometheus and control-plane processes), ``bench`` (benchmarks), ``demo`` (the tour) and
``commands`` (``xds-control sim|demo|bench``, plugged into the product's CLI through the
``xds_control.commands`` entry-point group). The lab imports the product; never the reverse.
"""

import os

__all__: list[str] = []

# The harness forks (a subprocess with a preexec_fn is a real fork) to start Envoy, sometimes
# next to an in-process gRPC server (the push-latency benchmark). gRPC core's fork support,
# on by default in grpcio's builds, registers pthread_atfork handlers when a server or channel
# starts; they raced the child and about 4% of Envoy starts died with SIGABRT. gRPC reads
# GRPC_ENABLE_FORK_SUPPORT once, when `grpc` is first imported (setting it later, even before
# the first server starts, changes nothing), so it is set here, and `python -m xds_lab...`
# imports this before anything imports gRPC. Through `xds-control <lab command>` the CLI has
# imported gRPC first, but those commands start no gRPC server or channel in-process, so no
# handlers are registered. setdefault: an explicit value in the environment still wins.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
