"""The demo: a real Envoy driven by the control plane, with traffic that follows the weights."""
