"""Plain reproducer scripts: a v1 program as direct calls on a pool.

A script builds the pool (a vLLM release through :mod:`properties.families.v1.upstream`, no
torch; any other target from its spec), builds the stand-in requests and hashes them with the
target's own hasher, then makes exactly the program's calls and prints what a reader needs to
see (the events, the queue, the keys). :func:`render` writes the conformance scripts of a
release; the core's :func:`properties.core.reproducer.render_script` the deviations
``prefixcache check`` reports for any target from this module's parts (:func:`script_prelude`,
:func:`call_lines`, :func:`check_lines`), ending with a replay of the same program under the
model (which raises the violation).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from models.families.v1 import ops
from models.families.v1.pool_model import PoolConfig
from properties.families.v1.targets import PoolTarget


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


def _lookahead(config: PoolConfig) -> str:
    return f", num_hash_lookahead_tokens={config.lookahead}" if config.lookahead else ""


def _ctor(config: PoolConfig, hash_block_size: bool) -> str:
    if hash_block_size:
        return (f"BlockPool({config.num_blocks}, {config.caching}, {config.hash_block_size}, "
                f"enable_kv_cache_events={config.events}{_lookahead(config)})")
    return (f"BlockPool({config.num_blocks}, {config.caching}, "
            f"enable_kv_cache_events={config.events}{_lookahead(config)})")


def release_prelude(version: str, config: PoolConfig, source: str = "",
                    hash_block_size: bool | None = None) -> list[str]:
    """Build ``pool`` and ``hasher`` from vLLM ``version``'s wheel, or from ``source`` (a tree
    or wheel of that version, loaded by path; the version in a comment)."""
    load = (f"m = load_vllm_v1({source!r})  # vllm {version}" if source
            else f"m = load_vllm_v1(version={version!r})")
    sized = version != "0.11.0" if hash_block_size is None else hash_block_size
    return [
        "from properties.families.v1.upstream import hash_function, load_vllm_v1",
        "",
        load,
        f"pool = m.block_pool.{_ctor(config, sized)}",
        f"hasher = m.kv_cache_utils.get_request_block_hasher({config.hash_block_size}, "
        f"hash_function(m){_lookahead(config)})",
    ]


def target_prelude(target: PoolTarget, config: PoolConfig) -> list[str]:
    """Build ``pool`` and ``hasher`` for ``target``: a vLLM release from its wheel, a pool class
    by importing it, any other spec through :func:`properties.families.v1.targets.load`."""
    if target.name == "vllm" and target.spec.startswith("properties.upstream:"):
        return release_prelude(target.version, config, target.source,
                               target.caps.hash_block_size)
    module, _, path = target.spec.partition(":")
    if path == "BlockPool" and target.pool_cls.__name__ == "BlockPool":
        return [
            f"from {module} import BlockPool",
            f"from {target.kv_cache_utils.__name__} import get_request_block_hasher",
            f"from {target.hash_fn.__module__} import {target.hash_fn.__name__} as hash_fn",
            "",
            f"pool = {_ctor(config, target.caps.hash_block_size)}",
            f"hasher = get_request_block_hasher({config.hash_block_size}, hash_fn"
            f"{_lookahead(config)})",
        ]
    return [
        "from models.families.v1.pool_model import PoolConfig",
        "from properties.families.v1.targets import load",
        "",
        f"target = load({target.spec!r})",
        f"pool = target.create({config!r})",
        f"hasher = target.hasher({config.hash_block_size}, {config.lookahead})",
    ]


def render(version: str, config: PoolConfig, program: Sequence[ops.Op], title: str,
           touch_per_group: bool = False, prelude: Sequence[str] | None = None) -> str:
    """A script making ``program``'s calls (``prelude``: the lines building ``pool`` and
    ``hasher``; default: vLLM ``version``'s): the conformance scripts of a release."""
    lines = [
        f'"""{title}"""',
        "",
        "from properties.families.v1.stand_ins import " + ", ".join(_names(program)),
        *(release_prelude(version, config) if prelude is None else prelude),
        "B = pool.blocks",
        "",
        *call_lines(config, program, touch_per_group),
    ]
    return "\n".join(lines)


def script_prelude(target: PoolTarget, config: PoolConfig) -> list[str]:
    """A ``prefixcache check`` reproducer's first lines: the stand-ins, ``pool`` and
    ``hasher`` (:func:`target_prelude`), ``B`` the pool's blocks."""
    return ["from properties.families.v1.stand_ins import LoraRef, MMFeature, MMPosition, "
            "StandInRequest  # noqa: F401",
            *target_prelude(target, config), "B = pool.blocks", ""]


def call_lines(config: PoolConfig, program: Sequence[ops.Op],
               touch_per_group: bool = False) -> list[str]:
    """``program``'s calls on ``pool`` (requests ``r0``, ``r1``, ... hashed with ``hasher``),
    printing what a reader needs to see, then the free queue and the reference counts."""
    sizes = config.group_block_sizes
    lines: list[str] = []
    reqs = 0
    for op in program:
        if isinstance(op, ops.Req):
            lines.append(_req_line(reqs, op))
            reqs += 1
        elif isinstance(op, ops.GetNew):  # refused (ValueError) past the free count
            lines += ["try:", f"    print('get_new_blocks', [b.block_id for b in "
                      f"pool.get_new_blocks({op.n})])",
                      "except ValueError as exc:", "    print('get_new_blocks refused:', exc)"]
        elif isinstance(op, ops.Touch):
            blocks = f"[B[i] for i in {list(op.ids)}]"
            lines.append(f"pool.touch(({blocks},))" if touch_per_group
                         else f"pool.touch({blocks})")
        elif isinstance(op, ops.Free):
            first = ", evict_first=True" if op.evict_first else ""
            lines.append(f"pool.free_blocks([B[i] for i in {list(op.ids)}]{first})")
        elif isinstance(op, ops.Unpin):
            if "reused = []  # what on_reuse reports" not in lines:
                lines.append("reused = []  # what on_reuse reports")
            lines.append(f"pool.unpin_blocks([B[i] for i in {list(op.ids)}], "
                         "lambda b: reused.append(b.block_id))")
        elif isinstance(op, ops.MoveHashes):
            lines.append(f"pool.move_block_hashes(B[{op.src}], B[{op.dst}])")
        elif isinstance(op, ops.EmitCached):
            lines.append(f"pool.emit_cached_block_events(r{op.req}, {op.num_cached}, "
                         f"{sizes[op.group]}, {op.group})")
        elif isinstance(op, ops.CacheFull):
            mask = "" if op.mask is None else f", block_mask={list(op.mask)}"
            lines.append(f"pool.cache_full_blocks(r{op.req}, [B[i] for i in {list(op.ids)}], "
                         f"{op.num_cached}, {op.num_full}, {sizes[op.group]}, {op.group}{mask})")
        elif isinstance(op, ops.CachePartial):
            flag = ", replace_existing_hashes=True" if op.replace else ""
            lines.append(f"pool.cache_partial_block(r{op.req}, B[{op.id}], {op.num_tokens}, "
                         f"{op.group}, {sizes[op.group]}{flag})")
        elif isinstance(op, ops.Lookup):
            lines.append(f"print('get_cached_block', pool.get_cached_block("
                         f"r{op.req}.block_hashes[{op.index}], {list(op.groups)}))")
        elif isinstance(op, ops.Evict):
            lines.append(f"pool.evict_blocks({set(op.ids)!r})")
        elif isinstance(op, ops.Reset):
            lines.append("print('reset_prefix_cache', pool.reset_prefix_cache())")
        elif isinstance(op, ops.TakeEvents):
            lines.append("for e in pool.take_events():\n    print(e)")
        elif isinstance(op, ops.Probe):
            lines.append(f"# misuse probe {op.misuse} (arg {op.arg}) on a copy of the pool: "
                         "the replay below makes it")
    lines += ["", "print('free queue', [b.block_id for b in "
              "pool.free_block_queue.get_all_free_blocks()])",
              "print('ref_cnt', [b.ref_cnt for b in B])", ""]
    return lines


def check_lines(target: PoolTarget, config: PoolConfig, program: Sequence[ops.Op]) -> list[str]:
    """The replay of ``program`` under the model (raises the violation):
    :func:`properties.families.v1.family.check_program`."""
    return [
        "from properties.families.v1.family import check_program",
        f"check_program({target.spec!r}, {json.dumps(config_json(config))!r},",
        f"              {json.dumps(ops.program_json(list(program)))!r})",
    ]


def config_json(config: PoolConfig) -> dict[str, Any]:
    """``config`` as the xfails files and reproducers write it."""
    return {"num_blocks": config.num_blocks, "hash_block_size": config.hash_block_size,
            "group_block_sizes": list(config.group_block_sizes), "events": config.events,
            **({} if config.caching else {"caching": False}),
            **({"lookahead": config.lookahead} if config.lookahead else {})}


def config_of(data: Mapping[str, Any]) -> PoolConfig:
    """The :class:`PoolConfig` written by :func:`config_json` (an xfails entry's ``config``)."""
    c = dict(data)
    c["group_block_sizes"] = tuple(c["group_block_sizes"])
    return PoolConfig(**c)


def probe_lines(config: PoolConfig, kind: str, arg: int,
                chosen: Mapping[str, Any] | None = None) -> list[str]:
    """The misuse probe ``kind`` (:meth:`~properties.families.v1.executor.Executor.probe`)
    as calls on ``pool``, between two prints of what it may change; ``chosen``: the block ids
    (and request) the probe took from the model's lists (``Executor.probe_call``), for the
    kinds whose choice a script cannot redraw from the pool alone."""
    chosen = chosen or {}
    ids = list(chosen.get("ids", ()))
    req = chosen.get("req")
    request = (f"r{req}" if req is not None
               else "StandInRequest('x', [])")  # no request has hashes: an empty one
    show = ["print('ref_cnt', [b.ref_cnt for b in B])",
            "print('keyed', [b.block_id for b in B if b.block_hash is not None])",
            "print('num_free', pool.get_num_free_blocks())"]
    calls = {
        "double_free": ["free = [b.block_id for b in pool.free_block_queue.get_all_free_blocks()]",
                        f"pool.free_blocks([B[free[{arg} % len(free)]]])  # a free block, again"],
        "negative_count": [f"print(pool.get_new_blocks({-1 - arg % 2}))  # a negative count"],
        "evict_out_of_range": [f"pool.evict_blocks({{{config.num_blocks + arg}}})  "
                               "# an id past the pool"],
        "evict_negative": [f"pool.evict_blocks({{{-1 - arg % 2}}})  # a negative id"],
        "unpin_null": ["pool.unpin_blocks([pool.null_block], print)  # the null block"],
        "unpin_unheld": [f"pool.unpin_blocks([B[i] for i in {ids}], print)  "
                         "# a held block (if any), then a free one"],
        "cache_beyond_hashes": [f"print('hashes', len({request}.block_hashes))",
                                f"pool.cache_full_blocks({request}, [B[i] for i in {ids}], 0, "
                                f"{chosen.get('num_full', 0)}, {config.group_block_sizes[0]}, 0)"
                                "  # more full blocks than the request has hashes"],
        "move_onto_null": ["keyed = [b for b in B if b.block_hash is not None]",
                           f"pool.move_block_hashes(keyed[{arg} % len(keyed)], pool.null_block)"],
        "move_onto_keyed": ["keyed = [b for b in B if b.block_hash is not None]",
                            f"pool.move_block_hashes(keyed[{arg} % len(keyed)], "
                            f"keyed[({arg} + 1) % len(keyed)])  # onto a keyed block"],
        "touch_foreign": [f"other = {_ctor(config, True)}  # a second pool",
                          f"pool.touch([other.blocks[1 + {arg} % {config.num_blocks - 1}]])"],
        "free_foreign": [f"other = {_ctor(config, True)}  # a second pool",
                         f"pool.free_blocks([other.blocks[1 + {arg} % {config.num_blocks - 1}]])"
                         "  # free there already"],
    }
    misuse = calls.get(kind, [f"# misuse probe {kind} (arg {arg}): see "
                                "properties/families/v1/executor.py, Executor.probe"])
    return ["# the misuse", *show, "try:", *[f"    {line}" for line in misuse],
            "except Exception as exc:", "    print('raised', repr(exc))", *show]


def robustness_script(target: PoolTarget, config: PoolConfig, program: Sequence[ops.Op],
                      kind: str, arg: int, chosen: Mapping[str, Any] | None = None) -> str:
    """A script that builds the state ``program`` leaves, then makes the misuse (``chosen``:
    :func:`probe_lines`) and prints what it changed."""
    lines = ['"""Robustness finding of prefixcache: misuse the pool accepts, changing it."""',
             *script_prelude(target, config),
             *call_lines(config, program, target.caps.touch_per_group),
             *probe_lines(config, kind, arg, chosen)]
    return "\n".join(lines) + "\n"
