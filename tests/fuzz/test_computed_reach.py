"""What the decoder's aborted-request production reaches (when KV is written,
docs/CONTRACT.md): a hashed GPU chain freed around the mark of its batch, its prompt allocated again
and asked what is computed. Seeded inputs that keep picking the production pass against the
bundled allocator and emit the whole interleaving; they catch both computed zoo mutants with
COMPUTED."""

from __future__ import annotations

import random

import pytest

from fuzz.core.execution import Execution, execute
from fuzz.families.v0.decoder import Decoder, Level
from fuzz.families.v0.features import adapter_features
from models.families.v0.invariants import Family
from properties.core.targets import Target, load_target
from tests.fuzz.reach import extension_bytes

#: Block size 2, 6 GPU blocks, no CPU blocks.
CONFIG = bytes([1, 5, 0])


def _inputs(target: Target, seed: int) -> bytes:
    """Chain allocations (by their opcode byte) and the aborted-request production in turn,
    each followed by random choice bytes."""
    runner = execute(b"", target, Level.BLOCK).judge.runner
    assert runner is not None
    entry = extension_bytes(CONFIG, Level.BLOCK, target, "_aborted_request",
                            **adapter_features(runner))
    names = [make.__name__ for make in Decoder(CONFIG, Level.BLOCK, target.caps).table]
    chain = bytes([names.index("_allocate_chain")])
    rng = random.Random(seed)
    return CONFIG + b"".join(chain + rng.randbytes(6) + entry + rng.randbytes(10)
                             for _ in range(4))


def _run(data: bytes, target: Target) -> Execution:
    result = execute(data, target, Level.BLOCK)
    assert result.stopped is None, result.stopped
    return result


def _kinds(result: Execution) -> list[str]:
    return [op.kind for op in result.program]


def test_the_production_emits_the_interleaving_and_the_bundled_allocator_passes(
        bundled: Target) -> None:
    asked_after_reallocation = 0
    for seed in range(30):
        result = _run(_inputs(bundled, seed), bundled)
        assert result.violation is None, str(result.violation)
        kinds = _kinds(result)
        for i, kind in enumerate(kinds):
            if kind in ("computed_block_ids", "cached_prefix") and i >= 2 \
                    and kinds[i - 1] == "allocate_immutable_chain" \
                    and "free" in kinds[:i - 1]:
                asked_after_reallocation += 1
    assert asked_after_reallocation >= 10


@pytest.mark.parametrize("mutant", ["freed_unwritten_computed", "computed_ids_with_holes"])
def test_seeded_inputs_catch_the_computed_mutants(mutant: str) -> None:
    target = load_target(f"tests.zoo.v0.broken:{mutant}")
    caught = [r.violation for r in (_run(_inputs(target, seed), target) for seed in range(30))
              if r.violation is not None]
    assert caught, f"{mutant} not caught"
    assert all(v.family is Family.COMPUTED for v in caught), [str(v) for v in caught]
