"""The per-request endpoint picker: an ``ext_proc`` service Envoy asks which server of a pool
should take each request (docs/picker.md)."""

from xds_control.picker.fleet import Fleet, picker_addresses
from xds_control.picker.pick import Pick
from xds_control.picker.picker import Picker
from xds_control.picker.server import PickerServer

__all__ = ["Fleet", "Pick", "Picker", "PickerServer", "picker_addresses"]
