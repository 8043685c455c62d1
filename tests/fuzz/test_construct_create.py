"""The decoder's construction production reaches ``Construct(..., create=True)``: built by the
device-aware ``create`` and numbered as it numbers ids (GPU ``0..G-1``, CPU ``G..G+C-1``), and
a program of such constructions passes on the bundled allocator."""

from __future__ import annotations

import random

from fuzz.families.v0.decoder import Decoder, Level
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Config
from models.families.v0.ops import construction
from models.families.v0.oracle import Oracle
from properties.core.targets import load_target
from tests.model.judged import run_judged

#: Block size 4, 12 GPU blocks, 3 CPU blocks.
CONFIG = bytes([3, 11, 3])


def _constructions(seeds: range) -> list[ops.Construct]:
    target = load_target()
    out: list[ops.Construct] = []
    for seed in seeds:
        data = CONFIG + random.Random(seed).randbytes(32)
        decoder = Decoder(data, Level.BLOCK, target.caps, construct=True)
        oracle = Oracle(Config(decoder.bs, decoder.config.num_gpu_blocks,
                               decoder.config.num_cpu_blocks, target.caps))
        op = decoder._construct(oracle)
        if isinstance(op, ops.Construct):
            out.append(op)
    return out


def test_the_decoder_builds_through_create_in_create_numbering() -> None:
    made = _constructions(range(300))
    created = [op for op in made if op.create]
    assert created and len(created) < len(made)
    assert {op.allocator for op in created} == set(ops.CONSTRUCT_ALLOCATORS)
    for op in created:
        assert construction.construct_misuse(op) is None
        g = len(op.ids)
        assert op.devices and op.ids == tuple(range(g))
        assert op.cpu_ids == tuple(range(g, g + len(op.cpu_ids)))


def test_decoded_constructions_through_create_pass() -> None:
    created = [op for op in _constructions(range(300)) if op.create][:6]
    values = run_judged(created, shape=(4, 12, 3))[0]
    assert all(error is None for error, _ in values)
    for op, (_, value) in zip(created, values, strict=True):
        assert value["handed"] == [*op.ids, *op.cpu_ids]
