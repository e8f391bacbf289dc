"""Is a pattern RE2, the regex engine Envoy matches headers with? (Python's ``re`` accepts more.)"""

from __future__ import annotations

import re2

__all__ = ["re2_error"]

_QUIET = re2.Options()
_QUIET.log_errors = False  # the error comes back in the exception; RE2's own log is noise


def re2_error(pattern: str) -> str | None:
    """RE2's reason for rejecting ``pattern``, or ``None`` when it compiles."""
    try:
        re2.compile(pattern, _QUIET)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        return reason.decode() if isinstance(reason, bytes) else str(reason)
    return None
