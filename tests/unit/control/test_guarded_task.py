"""guarded_task: a crash reaches on_crash; a cancellation or a clean end does not."""

from __future__ import annotations

import asyncio

from xds_control.tasks import guarded_task


async def test_a_crash_calls_on_crash_with_the_task_name() -> None:
    crashes: list[tuple[str, str]] = []

    async def boom() -> None:
        raise RuntimeError("boom")

    task = guarded_task(boom(), name="critical", on_crash=lambda n, e: crashes.append((n, str(e))))
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(0)  # done callbacks run on the next loop iteration
    assert crashes == [("critical", "boom")]


async def test_cancelled_or_finished_tasks_are_not_crashes() -> None:
    crashes: list[str] = []

    async def fine() -> None:
        return None

    done = guarded_task(fine(), name="done", on_crash=lambda n, e: crashes.append(n))
    cancelled = guarded_task(
        asyncio.sleep(10), name="cancelled", on_crash=lambda n, e: crashes.append(n)
    )
    await asyncio.sleep(0)
    cancelled.cancel()
    await asyncio.gather(done, cancelled, return_exceptions=True)
    await asyncio.sleep(0)
    assert crashes == []
