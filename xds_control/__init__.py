"""xds-control: an Envoy xDS control plane for fleets of LLM inference servers."""

import os

__all__ = ["__version__"]

__version__ = "0.1.0"

# gRPC's fork support runs handlers on every fork of a process that imported gRPC; when the
# harness forks to start Envoy next to an in-process gRPC server, those handlers race the child
# and about 4% of Envoy starts died with SIGABRT. Nothing here forks a gRPC user, so turn it off
# before anything imports grpc (setdefault: an operator's explicit value still wins).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
