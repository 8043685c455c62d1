"""Plain reproducer scripts: a v1 program as direct calls on the upstream pool.

The script loads the release through :mod:`properties.families.v1.upstream` (no torch), builds the
stand-in requests and hashes them with the release's own hasher, then makes exactly the
program's calls and prints what a reader needs to see (the events, the queue, the keys).
"""

from __future__ import annotations

from collections.abc import Sequence

from models.families.v1 import ops
from models.families.v1.pool_model import PoolConfig


def _req_line(i: int, r: ops.Req) -> str:
    lora = "None" if r.lora is None else f"LoraRef({r.lora}, 'lora{r.lora}', '/l/{r.lora}')"
    mm = ", ".join(f"MMFeature({a!r}, MMPosition({b}, {c}))" for a, b, c in r.mm)
    return (f"r{i} = StandInRequest(\n    'r{i}', {list(r.tokens)!r}, lora_request={lora},\n"
            f"    cache_salt={r.salt!r}, mm_features=[{mm}], prompt_embeds={r.embeds!r})\n"
            f"r{i}.block_hashes.extend(hasher(r{i}))\n"
            f"print('r{i} block_hashes', [bytes(h).hex()[:12] for h in r{i}.block_hashes])")


def _names(program: Sequence[ops.Op]) -> list[str]:
    reqs = [op for op in program if isinstance(op, ops.Req)]
    names = {"StandInRequest"}
    if any(r.lora is not None for r in reqs):
        names.add("LoraRef")
    if any(r.mm for r in reqs):
        names |= {"MMFeature", "MMPosition"}
    return sorted(names)


def render(version: str, config: PoolConfig, program: Sequence[ops.Op], title: str,
           touch_per_group: bool = False) -> str:
    sizes = config.group_block_sizes
    ctor = (f"BlockPool({config.num_blocks}, True, {config.hash_block_size}, "
            f"enable_kv_cache_events={config.events})" if version != "0.11.0" else
            f"BlockPool({config.num_blocks}, True, enable_kv_cache_events={config.events})")
    lines = [
        f'"""{title}"""',
        "",
        "from properties.families.v1.stand_ins import " + ", ".join(_names(program)),
        "from properties.families.v1.upstream import hash_function, load_vllm_v1",
        "",
        f"m = load_vllm_v1(version={version!r})",
        f"pool = m.block_pool.{ctor}",
        f"hasher = m.kv_cache_utils.get_request_block_hasher({config.hash_block_size}, "
        "hash_function(m))",
        "B = pool.blocks",
        "",
    ]
    reqs = 0
    for op in program:
        if isinstance(op, ops.Req):
            lines.append(_req_line(reqs, op))
            reqs += 1
        elif isinstance(op, ops.GetNew):
            lines.append(f"print('get_new_blocks', [b.block_id for b in "
                         f"pool.get_new_blocks({op.n})])")
        elif isinstance(op, ops.Touch):
            blocks = f"[B[i] for i in {list(op.ids)}]"
            lines.append(f"pool.touch(({blocks},))" if touch_per_group
                         else f"pool.touch({blocks})")
        elif isinstance(op, ops.Free):
            lines.append(f"pool.free_blocks([B[i] for i in {list(op.ids)}])")
        elif isinstance(op, ops.CacheFull):
            mask = "" if op.mask is None else f", block_mask={list(op.mask)}"
            lines.append(f"pool.cache_full_blocks(r{op.req}, [B[i] for i in {list(op.ids)}], "
                         f"{op.num_cached}, {op.num_full}, {sizes[op.group]}, {op.group}{mask})")
        elif isinstance(op, ops.CachePartial):
            lines.append(f"pool.cache_partial_block(r{op.req}, B[{op.id}], {op.num_tokens}, "
                         f"{op.group}, {sizes[op.group]})")
        elif isinstance(op, ops.Lookup):
            lines.append(f"print('get_cached_block', pool.get_cached_block("
                         f"r{op.req}.block_hashes[{op.index}], {list(op.groups)}))")
        elif isinstance(op, ops.Evict):
            lines.append(f"pool.evict_blocks({set(op.ids)!r})")
        elif isinstance(op, ops.Reset):
            lines.append("print('reset_prefix_cache', pool.reset_prefix_cache())")
        elif isinstance(op, ops.TakeEvents):
            lines.append("for e in pool.take_events():\n    print(e)")
    lines += ["", "print('free queue', [b.block_id for b in "
              "pool.free_block_queue.get_all_free_blocks()])",
              "print('ref_cnt', [b.ref_cnt for b in B])", ""]
    return "\n".join(lines)
