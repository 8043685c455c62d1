"""The step watchdog when its timeout is swallowed: by a gc callback (Hypothesis registers
one), a ``__del__``, or a target's own ``except BaseException``. The step is still reported
as timed out when it returns, and one that spins on after swallowing it is interrupted again
at the next limit, on both of the watchdog's paths (SIGALRM on the main thread, the monitor
thread elsewhere)."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from properties.core.watchdog import StepTimeout, Watchdog

LIMIT = 0.05
BOUND = 3.0  # a step that is never interrupted again gives up after this
#: (timeouts seen inside the step, seconds it ran) of each ``swallow_then``
report: list[tuple[int, float]] = []


def swallow_then(after: str) -> None:
    """A step that spins until a :class:`StepTimeout` arrives, swallows it, then either
    returns (``after == "return"``) or spins on for at most ``BOUND`` seconds, letting a second
    one through; what it saw goes to ``report``, whatever ``disarm`` raises."""
    seen = 0
    started = time.monotonic()
    watchdog = Watchdog(LIMIT)
    watchdog.arm()
    try:
        try:
            while time.monotonic() - started < BOUND:
                pass
        except StepTimeout:
            seen += 1  # swallowed
        if after == "spin":
            try:
                while time.monotonic() - started < BOUND:
                    pass
            except StepTimeout:
                seen += 1
                raise
    finally:
        elapsed = time.monotonic() - started
        try:
            watchdog.disarm()
        finally:
            report.append((seen, elapsed))


def on_main(body: Callable[[], object]) -> BaseException | None:
    try:
        body()
    except BaseException as exc:  # the test inspects it
        return exc
    return None


def on_worker(body: Callable[[], object]) -> BaseException | None:
    box: list[BaseException | None] = [None]

    def run() -> None:
        try:
            body()
        except BaseException as exc:  # reported to the main thread
            box[0] = exc

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(2 * BOUND)
    assert not worker.is_alive()
    return box[0]


PATHS = {"main thread (SIGALRM)": on_main, "worker thread (monitor)": on_worker}


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    report.clear()
    handler = signal.getsignal(signal.SIGALRM)
    yield
    # nothing left armed: no timer running, the handler that was there before back
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is handler


@pytest.mark.parametrize("path", PATHS)
def test_a_swallowed_timeout_is_raised_at_disarm(path: str) -> None:
    error = PATHS[path](lambda: swallow_then("return"))
    assert isinstance(error, StepTimeout)
    ((seen, elapsed),) = report
    assert seen == 1 and elapsed < BOUND


@pytest.mark.parametrize("path", PATHS)
def test_a_step_that_spins_on_after_swallowing_is_interrupted_again(path: str) -> None:
    error = PATHS[path](lambda: swallow_then("spin"))
    assert isinstance(error, StepTimeout)
    ((seen, elapsed),) = report
    assert seen == 2
    assert elapsed < BOUND  # the second timeout came, a limit after the first


def test_a_timeout_raised_inside_a_gc_callback_is_reported(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A timeout raised into a gc callback is swallowed by the interpreter (an unraisable
    exception, as CI once printed from Hypothesis's callback); the step still counts as timed
    out."""
    import gc
    import sys

    swallowed: list[type[BaseException] | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: swallowed.append(u.exc_type))

    def callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            time.sleep(2 * LIMIT)  # the alarm is handled inside the callback

    watchdog = Watchdog(LIMIT)
    gc.callbacks.insert(0, callback)
    try:
        watchdog.arm()
        with pytest.raises(StepTimeout):
            try:
                gc.collect()
            finally:
                watchdog.disarm()
    finally:
        gc.callbacks.remove(callback)
    # the first one (and any re-raised while the callback still slept) did land there
    assert swallowed and set(swallowed) == {StepTimeout}


@pytest.mark.parametrize("path", PATHS)
def test_a_step_within_its_limit_is_not_reported(path: str) -> None:
    def quick() -> None:
        watchdog = Watchdog(1.0)
        for _ in range(3):
            watchdog.arm()
            watchdog.disarm()

    assert PATHS[path](quick) is None
