"""Harness: real processes (Envoy, Prometheus, backends) for the demo, benchmarks and tests.

Not part of the control plane: the core stages never import it.
"""
