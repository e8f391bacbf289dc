"""The per-request endpoint picker: an ``ext_proc`` service Envoy asks which server of a pool
should take each request (docs/picker.md)."""

from xds_control.picker.fleet import Fleet, picker_addresses
from xds_control.picker.picker import Picker
from xds_control.picker.service import PickerServer

__all__ = ["Fleet", "Picker", "PickerServer", "picker_addresses"]
