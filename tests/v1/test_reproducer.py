"""v1 reproducers through the core (:func:`properties.core.reproducer.render_script`): the
family writes the prelude, the calls and the replay; the script runs the program's calls on
the pool and its ``__main__`` raises the violation under the model."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from fuzz.core.engine import Engine
from fuzz.core.machine_harness import MachineHarness
from fuzz.families.v1 import fuzz_pool_level
from models.core.invariants import Violation
from models.families.v1 import ops
from properties.core import selection
from properties.core.reproducer import render_script
from properties.families.v1.family import FAMILY, Step
from properties.families.v1.machine import default_config
from properties.families.v1.targets import PoolTarget
from tests.zoo.v1.bundled import VARIANTS
from tests.zoo.v1.bundled_copy import bundled_pool, patched_bundled_pool

VARIANT = next(v for v in VARIANTS if v.name == "free_drops_two_refs")


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    logging.getLogger("prefixcache").setLevel(logging.ERROR)
    logging.getLogger("prefixcache_zoo_v1").setLevel(logging.ERROR)
    with selection.kept():  # the fuzz harness selects its target for the machine
        yield


def _failing_program(pool: PoolTarget) -> tuple[Any, list[ops.Op], Violation]:
    """The pool machine driven by the fuzz engine (the v1 fuzz harness) until ``pool``
    fails: the pool shape, the program and the violation."""
    harness = MachineHarness(fuzz_pool_level.HARNESS.level, family=FAMILY.name)
    harness.bind(FAMILY.target_of(pool))
    engine = Engine(harness.run, harness.seeds(0), seed=0)
    stats = engine.fuzz(max_execs=500, stop_on_failure=True)
    assert stats.failures, f"{VARIANT.name} not found in {stats.execs} executions"
    result = stats.failures[0].result
    assert result.violation is not None and result.config is not None
    return result.config, list(result.program), result.violation


def test_the_script_replays_the_violation() -> None:
    pool = patched_bundled_pool(VARIANT.name, VARIANT.patches)
    config, program, violation = _failing_program(pool)
    target = FAMILY.target_of(pool)
    script = render_script(target, config, [Step(op, None) for op in program], violation)
    assert script.startswith('"""Counterexample found by prefixcache.')
    assert "B = pool.blocks" in script and "pool.free_blocks(" in script
    assert "from properties.families.v1.family import check_program" in script
    code = compile(script, "<reproducer>", "exec")
    exec(code, {"__name__": "not_main"})  # the calls alone run to the end
    with pytest.raises(Violation) as raised:
        exec(code, {"__name__": "__main__"})
    assert raised.value.family in (VARIANT.family, *VARIANT.also)


def test_the_script_of_a_clean_program_replays_clean(capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    target = FAMILY.target_of(bundled_pool())
    program = [ops.Req(tokens=(0, 1, 2, 0), lora=1, mm=(("img-a", 0, 3),)), ops.GetNew(2),
               ops.CacheFull(0, (1, 2), 0, 2, 0), ops.Probe("double_free", 1),
               ops.Lookup(0, 1, (0,)), ops.Free((2, 1)), ops.TakeEvents()]
    config = default_config(bundled_pool())
    script = render_script(target, config, [Step(op, None) for op in program])
    assert "# misuse probe double_free (arg 1)" in script
    exec(compile(script, "<reproducer>", "exec"), {"__name__": "__main__"})
    assert "the program runs clean" in capsys.readouterr().out
