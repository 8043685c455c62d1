"""SGLang 0.5.23's ``UnifiedRadixCache`` with the Python and the Rust tree core, judged by the
sglang family's model in lockstep: every generated program runs on both, each under its own
judge; the two must meet the same violation or none, and answer every operation alike
(matched lengths and slots, insert's prefix_len, evictions). Any disagreement is a finding:
the cores are one design in two languages.

The programs come from the family's own vocabulary; ``prev_zero`` finishes are included (both
cores share that deviation, ``conformance/sglang-0.5.23*.xfails.json``, so both must fail there
alike).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.core.invariants import Violation
from models.families.sglang.model import OutOfContract
from models.families.sglang.ops import Arrive, Evict, Finish, Match, Op, TreeConfig, Unlock
from properties.core.targets import Target, load_target
from properties.families.sglang import upstream as sgl
from properties.families.sglang.family import FAMILY, REF

pytestmark = pytest.mark.skipif(sgl.unavailable_reason() is not None,
                                reason=str(sgl.unavailable_reason()))

TOKENS = st.lists(st.integers(0, 2), max_size=8).map(tuple)
KEYS = st.sampled_from([None, None, "a"])
OPS = st.lists(st.one_of(
    st.builds(Arrive, TOKENS, KEYS),
    st.builds(Finish, st.integers(0, 7), st.booleans(), st.sampled_from([False, False, True])),
    st.builds(Unlock, st.integers(0, 7)),
    st.builds(Evict, st.integers(0, 8)),
    st.builds(Match, TOKENS, KEYS),
), max_size=30)


def run(target: Target, config: TreeConfig, program: list[Op]) -> list[Any]:
    """What the judge saw of each operation: its outcome (slots, lengths), an operation the
    model could not judge, or the violation (its invariant and message) that ended the run."""
    judge = FAMILY.judge(target, config)
    seen: list[Any] = []
    for op in program:
        try:
            seen.append(judge.step(op))
        except OutOfContract:
            seen.append("out of contract")
        except Violation as violation:
            seen.append((violation.family.value, violation.message))
            break
    return seen


@pytest.fixture(scope="module")
def cores() -> tuple[Target, Target]:
    python = load_target("properties.upstream:sglang_radix_cache", family=REF)
    try:
        rust = load_target("properties.upstream:sglang_radix_cache_rust", family=REF)
    except Exception as exc:  # the Rust extension needs its libtorch
        pytest.skip(f"the Rust tree core does not load here: {exc}")
    return python, rust


@pytest.mark.parametrize("page_size", [1, 4])
def test_python_and_rust_cores_agree_under_the_model(cores: tuple[Target, Target],
                                                     page_size: int) -> None:
    python, rust = cores

    @settings(max_examples=60, derandomize=True, database=None, deadline=None)
    @given(pages=st.integers(2, 12), program=OPS)
    def check(pages: int, program: list[Op]) -> None:
        config = TreeConfig(pages, page_size)
        assert run(python, config, program) == run(rust, config, program)

    check()


def test_the_differential_sees_a_disagreement(cores: tuple[Target, Target]) -> None:
    """The comparison is not vacuous: a program where the bundled reference and upstream part
    ways (the short prev_prefix_len) gives different records."""
    python, _ = cores
    bundled = load_target(family=REF)
    program: list[Op] = [Arrive((0, 1)), Finish(0), Arrive((0, 1)), Finish(1, prev_zero=True)]
    config = TreeConfig(4, 1)
    assert run(python, config, program) != run(bundled, config, program)
    assert run(python, config, program)[-1][0] == "OWN"
