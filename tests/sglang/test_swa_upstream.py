"""Upstream SGLang's FULL + SWA trees under the SWA judge: 0.5.23's UnifiedRadixCache (FULL,
SWA) on both tree cores and 0.5.18's SWARadixCache load as targets, and the hand-written
programs where SWA bugs showed upstream (a re-insert over tombstones while a request holds
their full KV, SWA eviction under a full-locked leaf whose window was released) pass on all
three; 0.5.18's eviction count departs exactly as its xfails entry says, 0.5.23 does not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from models.core.invariants import Violation
from models.families.sglang.ops import (
    Arrive,
    Evict,
    Finish,
    Match,
    ReleaseWindow,
    TreeConfig,
    Unlock,
    op_from_json,
)
from properties.families.sglang import upstream as sgl
from properties.families.sglang.swa_judge import SWATreeJudge
from properties.families.sglang.targets import upstream_swa_target

ROOT = Path(__file__).resolve().parents[2]
KINDS = [(sgl.DEFAULT_VERSION, "swa-unified-python"), (sgl.DEFAULT_VERSION, "swa-unified-rust"),
         (sgl.CLASSIC_VERSION, "swa-classic")]


def judge(version: str, kind: str, config: TreeConfig) -> SWATreeJudge:
    why = sgl.unavailable_reason(version)
    if why is not None:
        pytest.skip(why)
    return SWATreeJudge(upstream_swa_target(version, kind).create, config)


@pytest.mark.parametrize(("version", "kind"), KINDS)
def test_reinsert_over_tombstones_under_a_full_lock(version: str, kind: str) -> None:
    j = judge(version, kind, TreeConfig(8, 1, 1, 4))
    j.step(Arrive((1, 2, 3)))
    j.step(Finish(0, hold=True))  # holds [1, 2, 3]: full lock on all, window = token 3
    j.step(ReleaseWindow(0))  # decoding passed the window
    j.step(Evict(0, 8))  # tombstones what the target lets go; full KV stays locked
    j.step(Arrive((1, 2, 3)))  # recomputes the tombstoned prefix
    j.step(Finish(1))  # insert over tombstones whose full KV is locked
    assert j.step(Match((1, 2, 3))) == 3
    j.step(Unlock(0))
    j.step(Evict(8, 8))


@pytest.mark.parametrize(("version", "kind"), KINDS)
def test_swa_eviction_spares_windows_and_cuts_matches(version: str, kind: str) -> None:
    j = judge(version, kind, TreeConfig(8, 1, 2, 6))
    j.step(Arrive((1, 2, 3, 4, 5)))
    j.step(Finish(0))
    j.step(Arrive((1, 2, 3)))  # holds the prefix [1, 2, 3]: window 2, 3
    j.step(Evict(0, 8))
    assert j.step(Match((1, 2, 3, 4, 5))) == 3
    j.step(Finish(1))


def test_the_0518_xfails_entry_reproduces_there_and_not_on_0523() -> None:
    entry = json.loads((ROOT / "conformance" / "sglang-0.5.18-swa.xfails.json").read_text())[0]
    config = TreeConfig(**entry["config"])
    program = [op_from_json(op) for op in entry["program"]]
    old = judge(sgl.CLASSIC_VERSION, "swa-classic", config)
    with pytest.raises(Violation, match="evict reports the full and SWA tokens it freed"):
        for op in program:
            old.step(op)
    for kind in ("swa-unified-python", "swa-unified-rust"):
        new = judge(sgl.DEFAULT_VERSION, kind, config)
        for op in program:
            new.step(op)


@pytest.mark.parametrize(("version", "kind"), KINDS)
def test_reinsert_over_an_unlocked_tombstoned_internal_node(version: str, kind: str) -> None:
    j = judge(version, kind, TreeConfig(12, 1, 1, 12))
    for tail in (4, 5):
        j.step(Arrive((1, 2, 3, tail)))
        j.step(Finish(len(j.model.requests) - 1))
    j.step(Evict(0, 3))  # the least recently used SWA KV, the shared prefix's among it
    _, prefix = j.model.tree.peek((1, 2, 3), None)
    assert [s for s in prefix if s not in j.model.swa], "the prefix kept its SWA KV"
    j.step(Arrive((1, 2, 3)))  # recomputes the tombstoned prefix; nobody locks it
    j.step(Finish(2))
    assert j.step(Match((1, 2, 3))) == 3
    j.step(Match((1, 2, 3, 4)))  # judged: its window's SWA KV decides how far it goes
