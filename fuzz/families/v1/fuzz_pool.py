"""Fuzz harness (OSS-Fuzz naming): the v1 ``BlockPool`` at block level.

Bytes decode into the v1 pool vocabulary (:mod:`fuzz.families.v1.execution`); each step is
judged by the v1 executor (model, key contract, event replay, misuse probes) and a
:class:`~models.core.invariants.Violation` is the crash. The pool is ``--pool SPEC`` (taken out
of ``sys.argv`` before libFuzzer sees it), ``$PREFIXCACHE_POOL``, else the bundled pool.

    python fuzz/families/v1/fuzz_pool.py [--pool SPEC] [libFuzzer flags] [CORPUS...]   (atheris)
    python fuzz/families/v1/fuzz_pool.py --builtin [--pool SPEC] [--runs N] [--seed N]
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Sequence

from fuzz.core.instrumentation import instrumented

with instrumented(__name__ == "__main__"):
    from fuzz.core.engine import Engine
    from fuzz.families.v1.execution import V1Execution, execute
    from models.families.v1 import ops
    from properties.families.v1 import targets

_TARGET: list[targets.PoolTarget] = []


def target() -> targets.PoolTarget:
    """The selected pool (loaded once)."""
    if not _TARGET:
        _TARGET.append(targets.load(os.environ.get(targets.ENV_VAR) or targets.default_spec()))
    return _TARGET[0]


def run(data: bytes) -> V1Execution:
    return execute(data, target())


def TestOneInput(data: bytes) -> None:
    result = run(data)
    if result.violation is not None:
        result.violation.add_note("program: " + json.dumps(ops.program_json(result.program)))
        raise result.violation


def _take_pool(argv: list[str]) -> list[str]:
    out: list[str] = []
    it = iter(argv)
    for arg in it:
        if arg == "--pool":
            os.environ[targets.ENV_VAR] = next(it)
        elif arg.startswith("--pool="):
            os.environ[targets.ENV_VAR] = arg.partition("=")[2]
        else:
            out.append(arg)
    return out


def builtin(runs: int | None, seed: int, seconds: float | None = None) -> int:
    """The core engine over this harness: until ``runs`` executions or ``seconds`` (from seed
    ``seed``), stopping at the first failure; 1 if it found one."""
    stats = Engine(run, [b"", bytes(range(64))], seed=seed).fuzz(
        max_execs=runs, seconds=seconds, stop_on_failure=True)
    print(f"[v1_pool] {target().describe()}: {stats.execs} execs, corpus {stats.corpus}, "
          f"features {stats.features}, failures {len(stats.failures)}")
    for failure in stats.failures:
        print(failure.result.violation)
    return 1 if stats.failures else 0


def main(argv: Sequence[str]) -> int:
    args = _take_pool(list(argv))
    logging.getLogger("prefixcache").setLevel(logging.ERROR)
    if "--builtin" in args:
        def value(flag: str, default: int) -> int:
            return int(args[args.index(flag) + 1]) if flag in args else default
        return builtin(value("--runs", 2000), value("--seed", 0))
    from fuzz.core.instrumentation import atheris_module

    atheris = atheris_module()
    if atheris is None:
        raise SystemExit("atheris is not installed: pip install 'prefixcache[fuzz]', or use "
                         "the built-in engine: python fuzz/families/v1/fuzz_pool.py --builtin")
    target()
    atheris.Setup(args, TestOneInput)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
