"""Progress lines for long fuzzing runs: executions, executions per second, corpus size,
failures, printed at most every ``interval`` seconds (and once at the end)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, name: str, *, interval: float = 5.0, stream: TextIO | None = None) -> None:
        self.name = name
        self.interval = interval
        self.stream = stream if stream is not None else sys.stdout
        self.started = time.monotonic()
        self.last = self.started

    def update(self, execs: int, corpus: int, failures: int, features: int, *,
               final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self.last < self.interval:
            return
        self.last = now
        elapsed = now - self.started
        rate = execs / elapsed if elapsed > 0 else 0.0
        tag = "done" if final else "    "
        self.stream.write(f"[{self.name}] {tag} {elapsed:7.1f}s  execs={execs}  "
                          f"exec/s={rate:.1f}  corpus={corpus}  features={features}  "
                          f"failures={failures}\n")
        self.stream.flush()
