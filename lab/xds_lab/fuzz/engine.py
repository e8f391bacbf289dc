"""Run one fuzz target under atheris, with a dictionary of the tokens its format is made of."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from pathlib import Path

import atheris  # type: ignore[import-untyped,import-not-found,unused-ignore]

__all__ = ["INSTRUMENTED", "fuzz", "instrumented"]

INSTRUMENTED = ["xds_control", "yaml", "prometheus_client"]
"""Packages whose code coverage guides the mutations: the product and the pure-Python parsers
it calls. Instrumenting everything loaded (aiohttp, pydantic, grpc...) took most of a short
run's time and mostly measured code no input reaches."""


def instrumented() -> AbstractContextManager[None]:
    """Import a target's product modules inside this block, before anything else imports them
    (``python -m xds_lab.fuzz.<target>`` imports nothing of the product before the target)."""
    manager: AbstractContextManager[None] = atheris.instrument_imports(include=INSTRUMENTED)
    return manager


def fuzz(target: Callable[[bytes], None], *, tokens: Iterable[str], max_len: int = 4096) -> None:
    """Fuzz ``target`` with libFuzzer's flags from ``sys.argv`` (``-atheris_runs=N``, ``-max_len``,
    ``-artifact_prefix``...). ``tokens`` become a libFuzzer dictionary unless ``-dict=`` is
    given: random bytes rarely spell ``endpoints:`` or ``&anchor``, and a parser that
    rejects the first token teaches coverage nothing."""
    argv = list(sys.argv)
    with tempfile.TemporaryDirectory(prefix="xds-fuzz-") as scratch:
        if not any(arg.startswith("-dict=") for arg in argv):
            entries = "".join(f"{_quoted(token)}\n" for token in tokens)
            dictionary = Path(scratch) / "tokens.dict"
            dictionary.write_text(entries, encoding="utf-8")
            argv.append(f"-dict={dictionary}")
        # Inputs up to ``max_len`` from the start (libFuzzer otherwise grows the limit from a
        # few bytes, and a short run never gets past one YAML line).
        for flag, default in (("-max_len=", str(max_len)), ("-len_control=", "0")):
            if not any(arg.startswith(flag) for arg in argv):
                argv.append(flag + default)
        atheris.Setup(argv, target)
        atheris.Fuzz()


def _quoted(token: str) -> str:
    escaped = "".join(
        c if 32 <= ord(c) < 127 and c not in '"\\' else "".join(f"\\x{b:02x}" for b in c.encode())
        for c in token
    )
    return f'"{escaped}"'
