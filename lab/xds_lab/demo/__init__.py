"""The demo: a mixed simulated fleet behind a real Envoy, weighted by the engine, with a fault.

``tour.py`` plays it; ``stack.py`` says what it runs on the harness's ``Stack``; ``traffic.py``
sends the load; ``phases.py``, ``window.py`` and ``verdict.py`` are the pure script,
aggregation and judgement; ``view.py`` draws the table.
"""
