"""The lab around xds-control: what proves the control plane, never what an operator deploys.

``sim`` (simulated inference servers), ``loadgen`` (open-loop load), ``harness`` (real Envoy,
Prometheus and control-plane processes), ``bench`` (benchmarks), ``demo`` (the tour) and
``commands`` (``xds-control sim|demo|bench``, plugged into the product's CLI through the
``xds_control.commands`` entry-point group). The lab imports the product; never the reverse.
"""

__all__: list[str] = []
