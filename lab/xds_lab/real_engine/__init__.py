"""A real vLLM in the lab: the engine's CPU build, installed by ``make`` into a tools venv of
its own, serving a tiny model the lab makes itself (``make_model.py``); the harness starts its
servers as it starts Envoy and Prometheus (``server.py``)."""
