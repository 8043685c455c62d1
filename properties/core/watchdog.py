"""A per-step time limit for calls into a target, which never kills the process.

:class:`Watchdog` arms before a step and disarms after it; a step that outlived its limit gets
:class:`StepTimeout` raised inside it, and again every limit after that while it runs on, and
``disarm`` raises it once more: a timeout that something swallowed (a gc callback, a
``__del__``, a target's ``except BaseException``) is still reported, and cannot leave a spinning
step running forever. Every family's runner uses it, and reports a step past its limit as a
:class:`Hang`.
"""

from __future__ import annotations

import ctypes
import importlib
import signal
import threading
import time
from typing import Any, cast

from models.core.invariants import Violation


class StepTimeout(BaseException):
    """Raised into a target call that outlived its step's time limit. Not an ``Exception``, so
    a target's own ``except Exception`` does not swallow it."""


class Hang(Violation):
    """A step outlived the target's per-step limit: a TARGET violation of its own type, so a
    caller can tell a hung call from a wrong answer."""


class _Monitor:
    """One daemon thread that injects :class:`StepTimeout` into stepping threads past their
    deadline, and again every limit after that until they disarm
    (``PyThreadState_SetAsyncExc``: delivered at the thread's next bytecode, so a pure-Python
    loop is interrupted and a blocking C call is reported when it returns)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        #: thread id -> (next deadline, the limit, fired flag)
        self._armed: dict[int, tuple[float, float, list[bool]]] = {}
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float) -> list[bool]:
        fired = [False]
        with self._cond:
            self._armed[threading.get_ident()] = (time.monotonic() + seconds, seconds, fired)
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="prefixcache-watchdog",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()
        return fired

    def disarm(self, fired: list[bool]) -> None:
        ident = threading.get_ident()
        with self._cond:
            self._armed.pop(ident, None)
        if fired[0]:
            # Drop the exception if it is still pending, and raise it here instead.
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), None)
            raise StepTimeout

    def _watch(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                waits = []
                for ident, (deadline, seconds, fired) in list(self._armed.items()):
                    if deadline <= now:
                        fired[0] = True
                        ctypes.pythonapi.PyThreadState_SetAsyncExc(
                            ctypes.c_ulong(ident), ctypes.py_object(StepTimeout))
                        deadline = now + seconds  # again, should this one be swallowed
                        self._armed[ident] = (deadline, seconds, fired)
                    waits.append(deadline - now)
                self._cond.wait(min(waits) if waits else None)


_MONITOR = _Monitor()
_MAIN = threading.main_thread().ident
#: SIGALRM where ``setitimer`` exists (POSIX), else None: the monitor thread does it all.
_ALARM: int | None = int(signal.SIGALRM) if hasattr(signal, "setitimer") else None
try:  # ``signal.signal`` wraps these with enum conversions that cost ~10 us per step
    _raw_signal: Any = importlib.import_module("_signal")
except ImportError:  # pragma: no cover - CPython always has it
    _raw_signal = signal


class Watchdog:
    """A per-step time limit that never kills the process.

    On the main thread of a POSIX process with no interval timer running, ``setitimer`` plus a
    SIGALRM handler raises :class:`StepTimeout` inside the hanging call. Elsewhere (worker
    threads, or a timer owned by someone else, e.g. pytest-timeout) the shared monitor thread
    raises it asynchronously in the stepping thread. Pure-C loops that never return cannot be
    interrupted by either; sleeps and Python loops can."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self._armed = False  # the SIGALRM handler is ours and raises while this is true
        self._alarmed = False  # it raised since ``arm``
        self._previous: Any = None
        self._fired: list[bool] | None = None

    def arm(self) -> None:
        if self.seconds is None:
            return
        if _ALARM is not None and threading.get_ident() == _MAIN \
                and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0):
            self._previous = _raw_signal.signal(_ALARM, self._on_alarm)
            self._alarmed = False
            self._armed = True
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        else:
            self._fired = _MONITOR.arm(self.seconds)

    def disarm(self) -> None:
        """Stop the clock; raises :class:`StepTimeout` if it ran out meanwhile (whether or not
        the one raised inside the step came through)."""
        if self._fired is not None:
            fired, self._fired = self._fired, None
            _MONITOR.disarm(fired)
        elif self._armed:
            try:
                self._armed = False  # from here on the handler raises nothing
            except StepTimeout:  # an alarm handled just before: ``_alarmed`` records it
                self._armed = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            _raw_signal.signal(_ALARM, self._previous)
            if self._alarmed:
                self._alarmed = False
                raise StepTimeout

    def _on_alarm(self, signum: int, frame: Any) -> None:
        if self._armed:
            self._alarmed = True
            # Again after another limit, should this one be swallowed; ``disarm`` cancels it.
            signal.setitimer(signal.ITIMER_REAL, cast(float, self.seconds))
            raise StepTimeout
