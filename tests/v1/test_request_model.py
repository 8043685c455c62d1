"""The request level's model (no torch, no upstream): shadow KV states and the hit rules."""

from __future__ import annotations

import pytest

from models.core.invariants import Violation
from models.families.v1 import request_ops as ops
from models.families.v1.request_invariants import ManagerInvariants as Family
from models.families.v1.request_model import (
    Geometry,
    Identities,
    KVShadow,
    ReqState,
    check_hit,
    check_reads,
)

FULL = Geometry((4,), (None,))
WINDOW = Geometry((4,), (3,))


def _written(shadow: KVShadow, ids: Identities, r: ReqState, blocks: list[int], upto: int,
             req: int = 0) -> None:
    shadow.schedule(req, {(blocks[p // 4], p % 4): ids.of(r, p) for p in range(upto)})


def test_kv_is_valid_only_once_its_step_ends() -> None:
    shadow, ids = KVShadow(), Identities()
    r = ReqState((1, 2, 3, 4, 5), [], None, None)
    _written(shadow, ids, r, [7, 8], 4)
    want = ids.of(r, 0)
    assert shadow.read(7, 0, want, pending_ok=False) is Family.COMPUTED
    assert shadow.read(7, 0, want, pending_ok=True) is None  # the same forward writes it
    shadow.commit()
    assert shadow.read(7, 0, want, pending_ok=False) is None
    shadow.handed_out(7)  # a fresh block: what it holds is stale
    assert shadow.read(7, 0, want, pending_ok=False) is Family.COMPUTED


def test_dropped_writes_never_become_valid_and_other_content_is_content() -> None:
    shadow, ids = KVShadow(), Identities()
    a = ReqState((1, 1, 1, 1), [], None, None)
    b = ReqState((1, 1, 1, 1), [], "s", None)  # same tokens, another salt: other content
    _written(shadow, ids, a, [3], 4, req=0)
    shadow.drop(0)
    shadow.commit()
    assert shadow.read(3, 0, ids.of(a, 0), pending_ok=True) is Family.COMPUTED
    _written(shadow, ids, b, [3], 4, req=1)
    assert shadow.read(3, 0, ids.of(a, 0), pending_ok=True) is Family.CONTENT
    shadow.commit()
    assert shadow.read(3, 0, ids.of(a, 0), pending_ok=False) is Family.CONTENT


def test_hit_rules() -> None:
    shadow, ids = KVShadow(), Identities()
    r = ReqState(tuple(range(9)), [], None, None)
    _written(shadow, ids, r, [1, 2, 3], 9)
    shadow.commit()
    check_hit(shadow, ids, r, 8, ((1, 2),), FULL)
    with pytest.raises(Violation) as unaligned:
        check_hit(shadow, ids, r, 6, ((1,),), FULL)
    assert unaligned.value.family is Family.COMPUTED
    short = ReqState(tuple(range(8)), [], None, None)
    with pytest.raises(Violation, match="last token"):
        check_hit(shadow, ids, short, 8, ((1, 2),), FULL)
    with pytest.raises(Violation) as count:
        check_hit(shadow, ids, r, 8, ((1,),), FULL)
    assert count.value.family is Family.TABLE


def test_a_window_reads_only_its_last_tokens() -> None:
    shadow, ids = KVShadow(), Identities()
    r = ReqState(tuple(range(9)), [], None, None)
    _written(shadow, ids, r, [1, 2, 3], 9)
    shadow.commit()
    # 8 computed, window 3: positions 6 and 7 are read, block 0 may be the null block.
    check_reads(shadow, ids, r, ((0, 2),), WINDOW, [WINDOW.needed(0, 8, 8)], pending_ok=False,
                what="r")
    with pytest.raises(Violation) as null:
        check_reads(shadow, ids, r, ((0, 2),), FULL, [FULL.needed(0, 8, 8)], pending_ok=False,
                    what="r")
    assert null.value.family is Family.TABLE


def test_programs_round_trip_through_json() -> None:
    program = [ops.Add((1, 2), (0,), "s", 1), ops.Schedule(0, 2, 1), ops.Preempt(0),
               ops.EndStep(), ops.Abort(0), ops.ResetCache()]
    assert [ops.from_json(j) for j in ops.program_json(program)] == program
