"""Lua that Envoy runs for xds-control: the request classifier and its settings."""

from xds_control.xds.lua.source import classifier_settings, classifier_source, lua_literal

__all__ = ["classifier_settings", "classifier_source", "lua_literal"]
