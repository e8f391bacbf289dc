"""`serve` failing on its way up (here: an unreadable admin token file, read after the HTTP
session is open) closes what it opened: the xDS port is free and the session closed."""

from __future__ import annotations

import gc
import socket
import warnings
from pathlib import Path

import pytest

from xds_control.cli.serve import serve
from xds_control.config import parse_config
from xds_control.errors import ServeError
from xds_lab.harness.ports import free_port

CONFIG = """\
pools:
  - name: chat
    endpoints: [{address: 127.0.0.1:8001}]
listeners:
  - name: gateway
    address: 127.0.0.1:10000
    routes: [{name: all, pool: chat}]
"""


async def test_a_failed_start_up_leaves_the_port_free_and_the_session_closed(
    tmp_path: Path,
) -> None:
    config = parse_config(text=CONFIG + f"admin_token_file: {tmp_path / 'missing'}\n")
    port = free_port()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ServeError, match="admin token file"):
            await serve(
                config=config,
                config_path=tmp_path / "config.yaml",
                xds_address=f"127.0.0.1:{port}",
                admin_address=f"127.0.0.1:{free_port()}",
            )
        gc.collect()  # an unclosed aiohttp session warns when it is collected
    assert not [w for w in caught if "Unclosed client session" in str(w.message)]
    with socket.socket() as again:
        again.bind(("127.0.0.1", port))  # nothing holds it any more
