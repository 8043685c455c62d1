"""What every fuzz harness shares (:class:`fuzz.core.machine_harness.MachineHarness` is the
one kind): crash artifacts, the libFuzzer entry, quiet target logs, and ``--allocator`` taken
out of libFuzzer's arguments.

Target selection is the plugin's: ``--allocator SPEC`` (taken out of ``sys.argv`` before
libFuzzer sees it) or ``$PREFIXCACHE_ALLOCATOR``, else the family's bundled allocator.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from fuzz.core.execution import Execution
from properties.core import selection
from properties.core.targets import ENV_VAR

#: Environment variable naming the directory for crash artifacts (default: current dir).
ARTIFACTS_VAR = "PREFIXCACHE_FUZZ_ARTIFACTS"
#: Set to ``weak`` to inject the family's weak hash into its bundled allocator
#: (:class:`properties.core.roles.WeakHashing`).
HASH_MODE_VAR = "PREFIXCACHE_FUZZ_HASH"


def write_crash_files(name: str, data: bytes, record: dict[str, Any], directory: Path) -> Path:
    """``crash-<name>-<sha1>`` (the raw input) and the same name ``.json`` (``record``) in
    ``directory``; returns the input's path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"crash-{name}-{hashlib.sha1(data).hexdigest()[:16]}"
    path.write_bytes(data)
    path.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return path


class Fuzzable(Protocol):
    """What :func:`libfuzzer_entry` reads of a harness."""

    @property
    def name(self) -> str: ...

    def run(self, data: bytes) -> Execution: ...

    def write_crash(self, data: bytes, result: Execution, directory: Path) -> Path: ...

    def listing(self, result: Execution) -> str: ...


def libfuzzer_entry(harness: Fuzzable) -> Callable[[bytes], None]:
    """``harness``'s libFuzzer entry: progress lines on stderr and, on a violation, the
    program printed and a crash record written (in ``$PREFIXCACHE_FUZZ_ARTIFACTS``, default
    the current directory) before the violation is raised for libFuzzer to save its
    artifact."""
    started = time.monotonic()
    state = {"execs": 0, "last": started}
    artifacts = Path(os.environ.get(ARTIFACTS_VAR, "."))

    def entry(data: bytes) -> None:
        state["execs"] += 1
        now = time.monotonic()
        if now - state["last"] >= 5.0:
            state["last"] = now
            rate = state["execs"] / max(now - started, 1e-9)
            sys.stderr.write(f"[{harness.name}] {now - started:7.1f}s  execs={state['execs']}"
                             f"  exec/s={rate:.1f}  failures=0\n")
        result = harness.run(data)
        if result.violation is not None:
            path = harness.write_crash(data, result, artifacts)
            sys.stderr.write(f"\n[{harness.name}] VIOLATION\n{result.violation}\n\n"
                             f"{harness.listing(result)}"
                             f"\n\ncrash input: {path}\n")
            raise result.violation

    return entry


def quiet_target_logs() -> None:
    """Allocators may log a warning per refused call (e.g. a cache reset while blocks are in
    use), thousands of times a second under a fuzzer."""
    logging.getLogger("prefixcache").setLevel(logging.ERROR)


def take_allocator(argv: list[str]) -> list[str]:
    """Remove ``--allocator SPEC`` / ``--allocator=SPEC`` from ``argv`` and export it as
    ``$PREFIXCACHE_ALLOCATOR`` (libFuzzer would read it as a corpus directory)."""
    out: list[str] = []
    it = iter(argv)
    for arg in it:
        if arg == "--allocator":
            spec = next(it, None)
            if spec:
                os.environ[ENV_VAR] = spec
        elif arg.startswith("--allocator="):
            os.environ[ENV_VAR] = arg.split("=", 1)[1]
        else:
            out.append(arg)
    if os.environ.get(ENV_VAR):
        selection.select(os.environ[ENV_VAR])
    return out
