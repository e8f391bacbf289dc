"""One JSON line per fault case, appended to the file named by ``XDS_FAULT_REPORT`` (if set),
so a run of the suite can fill the table in docs/reliability.md."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from fault.load import Counts


def record(case: str, counts: Counts, *, recover_s: float | None = None, **extra: Any) -> None:
    """Append ``case``'s counts (and its time to recover, in seconds) to the report, and print
    them so ``pytest -s`` shows them too."""
    line = {
        "case": case,
        "rate": counts.rate,
        "sent": counts.sent,
        "answered": counts.answered,
        "failed": counts.failed,
        "errors": counts.errors,
        "max_lag_s": counts.max_lag_s,
        "recover_s": None if recover_s is None else round(recover_s, 2),
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load1": round(os.getloadavg()[0], 2),
        **extra,
    }
    print(json.dumps(line))
    path = os.environ.get("XDS_FAULT_REPORT")
    if path:
        with Path(path).open("a") as out:
            out.write(json.dumps(line) + "\n")
