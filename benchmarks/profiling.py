"""cProfile summaries for targets that are missed: where the time goes, by function and by
area of the code base (whose owner should look)."""

from __future__ import annotations

import cProfile
import os
import pstats
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from types import ModuleType
from typing import Any

import hypothesis

import benchmarks
import models
import prefixcache
import properties
from benchmarks.compiled import no_gc

__all__ = ["AREAS", "by_area", "package_dir", "profile", "top_functions"]


def package_dir(package: ModuleType) -> str:
    """The directory of ``package`` with a trailing separator, for path matching."""
    return os.path.dirname(os.path.abspath(str(package.__file__))) + os.sep


#: Path fragment -> area (first match wins; the wheel is cached under a "prefixcache" dir).
AREAS: tuple[tuple[str, str], ...] = (
    ("vllm_block" + os.sep, "vllm (wheel)"),
    (package_dir(prefixcache), "prefixcache/"),
    (package_dir(models), "models/"),
    (package_dir(properties), "properties/"),
    (package_dir(hypothesis), "hypothesis"),
    (package_dir(benchmarks), "benchmarks/"),
    ("<", "compiled program"),
    ("~", "builtins"),
)


def profile(fn: Callable[[], Any], *, gc_off: bool = True,
            cpu_timer: bool = False) -> pstats.Stats:
    """Run ``fn`` under cProfile (with the cyclic collector off unless ``gc_off`` is false, as
    in the timed runs: a collection would be billed to whichever function allocated).

    cProfile's clock is wall time: on a loaded machine, time spent descheduled lands on
    whatever function was running. ``cpu_timer`` uses this thread's CPU time instead (each
    reading is a system call: use it only for small runs)."""
    profiler = cProfile.Profile(time.thread_time) if cpu_timer else cProfile.Profile()
    with no_gc() if gc_off else nullcontext():
        profiler.enable()
        try:
            fn()
        finally:
            profiler.disable()
    return pstats.Stats(profiler)


_ROOT = os.path.dirname(package_dir(prefixcache).rstrip(os.sep)) + os.sep


def _short(path: str) -> str:
    if path.startswith(_ROOT):
        return path[len(_ROOT):]
    for marker in ("vllm_block" + os.sep, "site-packages" + os.sep):
        at = path.find(marker)
        if at >= 0:
            return path[at:] if marker.startswith("vllm") else path[at + len(marker):]
    return path


def _area(path: str) -> str:
    for fragment, area in AREAS:
        if fragment in path:
            return area
    return "other"


def _rows(stats: pstats.Stats) -> dict[tuple[str, int, str], tuple[int, int, float, float]]:
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    return {key: value[:4] for key, value in raw.items()}


def top_functions(stats: pstats.Stats, n: int = 10,
                  under: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The ``n`` functions with the most own time (optionally only paths containing one of
    ``under``), with their share of all profiled time."""
    total = sum(row[2] for row in _rows(stats).values()) or 1.0
    rows: list[dict[str, Any]] = []
    for (path, line, func), (_, calls, own, cumulative) in _rows(stats).items():
        if under is not None and not any(u in path for u in under):
            continue
        rows.append({"function": f"{_short(path)}:{line}({func})", "calls": calls,
                     "own_s": own, "cumulative_s": cumulative, "own_share": own / total})
    rows.sort(key=lambda r: r["own_s"], reverse=True)
    return rows[:n]


def by_area(stats: pstats.Stats) -> dict[str, float]:
    """Share of own time per area of the code base."""
    totals: dict[str, float] = {}
    for (path, _, _), (_, _, own, _) in _rows(stats).items():
        area = _area(path)
        totals[area] = totals.get(area, 0.0) + own
    whole = sum(totals.values()) or 1.0
    return dict(sorted(((k, v / whole) for k, v in totals.items()), key=lambda kv: -kv[1]))
