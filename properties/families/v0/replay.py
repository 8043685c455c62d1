"""The v0 reproducers' entry point: a program replayed on a pool of a block size, GPU and CPU
blocks (what the scripts under ``conformance/`` and the reports' replays call)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from properties.core.replay import check


def check_program(spec: str, allocator_type: str, block_size: int, num_gpu: int, num_cpu: int,
                  program_json: str | list[dict[str, Any]],
                  tolerate: Sequence[str] = (), family: str | None = None) -> None:
    """Replay ``program_json`` on ``spec`` (an allocator of ``allocator_type``) under the
    judge, raising the first violation; ``tolerate``: upstream deviations the model follows
    (those of the other xfails entries)."""
    geometry = {"block_size": block_size, "num_gpu_blocks": num_gpu, "num_cpu_blocks": num_cpu}
    check(spec, geometry, program_json, family=family, allocator_type=allocator_type,
          tolerate=tolerate)
