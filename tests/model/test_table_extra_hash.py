"""A table call's ``extra_hash`` (docs/API.md §12.1: ``append_token_ids`` and
``ensure_num_empty_slots`` take one): a malformed value is misuse even when the call needs no
new block (nothing else would read it), refused by the bundled allocator with a typed error and
nothing changed; an accepted one is flagged."""

from __future__ import annotations

import pytest

from models.families.v0 import operations as ops
from models.families.v0.contract import OutOfContract
from models.families.v0.operations import ErrorKind, Malformed
from tests.model.judged import run_judged

#: A table of 3 tokens at block size 2: one empty slot, so neither call below allocates.
_TABLE = ops.TableAllocate((1, 2, 3))


@pytest.mark.parametrize("call", [ops.TableEnsureSlots(0, 1), ops.TableAppend(0, (4,)),
                                  ops.TableEnsureSlots(0, 0), ops.TableAppend(0, ())])
@pytest.mark.parametrize("bad", ["x", 1.5, True, (1,)])
def test_malformed_table_extra_hash_is_refused(call: ops.Op, bad: object) -> None:
    values, oracle = run_judged([_TABLE, Malformed(call, "extra_hash", bad)], shape=(2, 4, 2))
    assert values[1][0] is ErrorKind.MISUSE
    assert oracle.table_len(0) == 3  # nothing appended


@pytest.mark.parametrize("good", [None, 7])
def test_a_well_formed_extra_hash_is_out_of_contract(good: object) -> None:
    with pytest.raises(OutOfContract):
        run_judged([_TABLE, Malformed(ops.TableEnsureSlots(0, 1), "extra_hash", good)],
                   shape=(2, 4, 2))


def test_vllm_without_typed_errors_is_never_fed_it() -> None:
    with pytest.raises(OutOfContract):
        run_judged([_TABLE, Malformed(ops.TableEnsureSlots(0, 1), "extra_hash", "x")],
                   spec="properties.upstream:vllm_v0_allocator", shape=(2, 4, 2))
