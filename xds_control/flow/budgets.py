"""Output-token budgets per tenant: the estimate admits, the response's usage settles.

A request that matches a pool's ``TokenBudget`` is charged its estimate in the budget's current
window when admitted (``charge``) and, once its response reports what it generated, the
difference (``settle``). A window renews at each multiple of ``window_s`` on the controller's
clock. With several control-plane replicas (``config.control_planes``) each holds its share of
a budget: ``output_tokens`` over their number. Pure: no IO, the clock and the count injected.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xds_control.config.flow import TokenBudget
from xds_control.flow.metrics import FLOW_OUTCOMES, OUTPUT_TOKENS
from xds_control.flow.queues import Band
from xds_control.flow.refused import Refused

__all__ = ["Charge", "TokenBudgets", "budget_label", "estimate_tokens"]


def estimate_tokens(body: bytes, *, default: int) -> int:
    """What a completion request with ``body`` may generate: its ``max_tokens`` (or
    ``max_completion_tokens``), else ``default``."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return default
    if not isinstance(parsed, dict):
        return default
    for key in ("max_tokens", "max_completion_tokens"):
        value = parsed.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return default


def budget_label(budget: TokenBudget) -> str:
    """The budget as metrics and the admin API name it: ``TENANT/BAND`` (``*``, ``all``)."""
    return f"{budget.tenant}/{budget.priority or 'all'}"


def _matches(budget: TokenBudget, *, tenant: str, band: Band) -> bool:
    return budget.tenant in ("*", tenant) and (
        budget.priority is None or Band.of(budget.priority) == band
    )


_MAX_WINDOWS = 10_000
"""Windows kept before those of past windows are forgotten."""


@dataclass(frozen=True)
class Charge:
    """What one admitted request was charged: settle it with its usage."""

    pool: str
    budget: TokenBudget
    tenant: str
    window: int
    tokens: int


@dataclass
class _Window:
    index: int
    charged: int = 0


class TokenBudgets:
    """The charged tokens of each pool's budgets, per tenant, in their current windows."""

    def __init__(
        self, *, clock: Callable[[], float], replicas: Callable[[], int] = lambda: 1
    ) -> None:
        """``replicas()`` is how many control planes share every budget now (at least 1)."""
        self._clock = clock
        self._replicas = replicas
        self._windows: dict[tuple[str, TokenBudget, str], _Window] = {}

    def share(self, budget: TokenBudget) -> int:
        """The output tokens a window of ``budget`` holds on this replica: its share."""
        return max(1, budget.output_tokens // max(1, self._replicas()))

    def charge(
        self,
        *,
        pool: str,
        budgets: Sequence[TokenBudget],
        tenant: str,
        band: Band,
        estimate: int,
    ) -> Charge | None:
        """Charge ``estimate`` to the first of ``budgets`` the request matches (``None``: it
        matches none); raise ``Refused`` (429 ``token-budget``) when it does not fit what is
        left, with ``retry-after`` the seconds until the window renews. A window with
        nothing charged admits any one request, however large."""
        budget = next((b for b in budgets if _matches(b, tenant=tenant, band=band)), None)
        if budget is None:
            return None
        now = self._clock()
        index = math.floor(now / budget.window_s)
        key = (pool, budget, tenant)
        window = self._windows.get(key)
        if window is None or window.index != index:
            if len(self._windows) >= _MAX_WINDOWS:  # tenants of `*` budgets come and go
                self._forget_renewed(now)
            window = self._windows[key] = _Window(index=index)
        if window.charged and window.charged + estimate > self.share(budget):
            renews = (index + 1) * budget.window_s - now
            FLOW_OUTCOMES.labels(pool=pool, outcome="token-budget").inc()
            raise Refused(
                status=429, reason="token-budget", retry_after_s=max(1, math.ceil(renews))
            )
        window.charged += estimate
        return Charge(pool=pool, budget=budget, tenant=tenant, window=index, tokens=estimate)

    def _forget_renewed(self, now: float) -> None:
        for key, window in list(self._windows.items()):
            if window.index != math.floor(now / key[1].window_s):
                del self._windows[key]

    def settle(self, charge: Charge, *, tokens: int | None) -> None:
        """The response of ``charge``'s request generated ``tokens`` (``None``: it did not
        say; the estimate stays charged)."""
        if tokens is None:
            return
        OUTPUT_TOKENS.labels(pool=charge.pool, budget=budget_label(charge.budget)).inc(tokens)
        window = self._windows.get((charge.pool, charge.budget, charge.tenant))
        if window is None or window.index != charge.window:
            return  # its window has renewed: what it overshot is not carried over
        window.charged = max(0, window.charged + tokens - charge.tokens)

    def rows(self) -> list[dict[str, object]]:
        """What each budget has charged in its current window, for the admin API: the
        fleet-wide ``output_tokens``, the control planes sharing it, this replica's share
        (``here``), what is charged and ``left`` of that share."""
        now = self._clock()
        out: list[dict[str, object]] = []
        for (pool, budget, tenant), window in sorted(
            self._windows.items(),
            key=lambda item: (item[0][0], budget_label(item[0][1]), item[0][2]),
        ):
            current = window.index == math.floor(now / budget.window_s)
            charged = window.charged if current else 0
            share = self.share(budget)
            out.append(
                {
                    "pool": pool,
                    "budget": budget_label(budget),
                    "tenant": tenant,
                    "window_s": budget.window_s,
                    "output_tokens": budget.output_tokens,
                    "replicas": max(1, self._replicas()),
                    "here": share,
                    "charged": charged,
                    "left": max(0, share - charged),
                    "renews_in_s": round(
                        (math.floor(now / budget.window_s) + 1) * budget.window_s - now, 3
                    ),
                }
            )
        return out
