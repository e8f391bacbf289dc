"""Harness: real processes (Envoy, Prometheus, ``xds-control serve``, backends) and the one
``Stack`` that composes them for the demo, the benchmarks and the end-to-end tests.

Not part of the control plane: the core stages never import it.
"""
