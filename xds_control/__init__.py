"""xds-control: an Envoy xDS control plane for fleets of LLM inference servers."""

__all__ = ["__version__"]

__version__ = "0.1.0"
