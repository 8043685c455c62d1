"""``FreeKVCacheBlockQueue`` against a plain list model, over generated operation sequences."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from prefixcache.errors import PrefixCacheError
from prefixcache.v1.core.kv_cache_utils import FreeKVCacheBlockQueue, KVCacheBlock

OPS = st.lists(
    st.tuples(
        st.sampled_from(["popleft", "popleft_n", "remove", "append", "append_n", "prepend_n"]),
        st.lists(st.integers(0, 7), max_size=4),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_queue_matches_a_list_model(ops: list[tuple[str, list[int]]]) -> None:
    blocks = [KVCacheBlock(i) for i in range(8)]
    queue = FreeKVCacheBlockQueue(blocks[:5])
    model = [0, 1, 2, 3, 4]
    for op, ids in ops:
        chosen = [blocks[i] for i in ids]
        first = ids[:1]
        valid = {
            "popleft": bool(model),
            "popleft_n": len(ids) <= len(model),
            "remove": all(i in model for i in first),
            "append": not any(i in model for i in first),
        }.get(op, len(set(ids)) == len(ids) and not set(ids) & set(model))
        before = list(model)
        try:
            if op == "popleft":
                assert queue.popleft().block_id == model.pop(0)
            elif op == "popleft_n":
                got = queue.popleft_n(len(ids))
                assert [b.block_id for b in got] == model[: len(ids)]
                del model[: len(ids)]
            elif op == "remove":
                for block in chosen[:1]:
                    queue.remove(block)
                    model.remove(block.block_id)
            elif op == "append":
                for block in chosen[:1]:
                    queue.append(block)
                    model.append(block.block_id)
            else:
                getattr(queue, op)(chosen)
                model = model + ids if op == "append_n" else ids + model
            assert valid, (op, ids, before)
        except PrefixCacheError:
            assert not valid, (op, ids, before)
            assert model == before  # refused: nothing changed
        assert [b.block_id for b in queue.get_all_free_blocks()] == model
        assert queue.num_free_blocks == len(model)
        for block in blocks:
            assert (block.prev_free_block is not None) == (block.block_id in model)
            assert (block.next_free_block is not None) == (block.block_id in model)


def test_iter_blocks_after_a_cursor() -> None:
    blocks = [KVCacheBlock(i) for i in range(4)]
    queue = FreeKVCacheBlockQueue(blocks)
    assert [b.block_id for b in queue.iter_blocks_after(blocks[1])] == [2, 3]
    assert [b.block_id for b in queue.iter_blocks_after(None)] == [0, 1, 2, 3]
