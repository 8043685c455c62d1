"""A v1 ``BlockPool`` driven through the v0 serving trace (``--sections ops``'s ``vllm-v1`` column).

The trace's program (``benchmarks.serving_trace``: ``BlockTable`` operations in vLLM 0.8's
order) is replayed on a fresh v1 ``BlockPool(num_blocks, enable_caching=True,
hash_block_size=block_size)``, one thin state object per table (:class:`V1Table`: the token
list, the block hashes, the blocks, how many of them are cached; it is also the duck-typed
``Request`` the pool and the hasher read). Each operation becomes what vLLM 0.33.0's
``KVCacheManager`` / ``FullAttentionManager`` (``vllm/v1/core/kv_cache_manager.py``,
``single_type_kv_cache_manager.py``) asks of its pool for the same request event:

- ``table_allocate`` (a new request's prefill): the request block hasher of the pool's own
  release (``get_request_block_hasher(block_size, sha256)``, its default pickle-SHA-256 hash)
  hashes every full block (v0 hashes its full blocks too); ``find_longest_cache_hit``:
  ``get_cached_block`` on the hashes in order up to ``(tokens - 1) // block_size`` blocks (v1
  always recomputes the last token), stopping at the first miss; ``touch`` the hits
  (``add_local_computed_blocks``); ``get_new_blocks`` for the rest, partial tail included
  (``allocate_new_blocks``); ``cache_full_blocks`` for the full blocks past the hits
  (``cache_blocks``).
- ``table_append`` (decode tokens, with lookahead slots when speculative): extend the tokens
  and the block hashes (the hasher, as ``Request.append_output_token_ids`` does);
  ``get_new_blocks`` when the blocks hold fewer than ``tokens + lookahead`` slots
  (``allocate_slots(..., num_lookahead_tokens)``); ``cache_full_blocks`` when blocks filled.
- ``table_free``: ``free_blocks(reversed(blocks))`` (``SingleTypeKVCacheManager.free``: tail
  blocks first, so they are evicted first).
- ``table_fork`` (parallel sampling): v1 has no fork; each sample is a request of its own
  whose prompt hits the blocks its sibling cached. The child copies the parent's tokens and
  block hashes (the same hashes v1 would compute again for the child's identical prompt: not
  timed, as v0's fork hashes nothing), ``touch``-es the parent's first
  ``(tokens - 1) // block_size`` blocks (those its prefix lookup would return, without the
  lookups), takes ``get_new_blocks`` for the rest (the partial tail, or the last full block
  v1 recomputes) and caches the full ones among them. v0's fork shares every block and pays
  a copy-on-write on the first append into the shared tail; v1 pays the tail block up front.
- ``table_swap``: v1 has no CPU swap. To keep the pool's state what a v1 engine would have,
  a swap-out is v1's preemption (``free_blocks(reversed(blocks))``, tokens and hashes kept)
  and a swap-in its re-admission (prefix lookup over the kept hashes, ``touch``,
  ``get_new_blocks``, ``cache_full_blocks``). Timed and reported separately, never compared
  (the v0 operation moves KV between devices): the table prints ``n/a``.
- ``clear_cows``, ``table_mark_accessed``, ``mark_computed``: no v1 counterpart (no
  copy-on-write, LRU by free order, blocks computed when cached): nothing runs, ``n/a``.

What is timed: the hasher and the pool calls plus the shim (one Python call per operation,
list appends, the slot arithmetic). Timed apart from the pool's work, as its own sub-kind
(``<kind>.hash``), is the request hashing of ``table_allocate`` and ``table_append``;
the column's time for those kinds is the sum (the v0 columns' allocators hash inside the
same calls). Not timed on either side: the scheduler's admission checks
(``get_num_blocks_to_allocate``, ``can_allocate``), which the v0 trace leaves out too.

The replay is rendered to straight-line code (one line per operation calling the shim) and
compiled like ``benchmarks.compiled`` does for the v0 targets: plain code for the total,
the same code with a clock reading between operations for the per-kind times, the same
clock (this thread's CPU time) and calibrated clock overhead, best of ``repeats`` each.

A v1 pool can run out of blocks where v0's does not (it reserves a null block; a fork pays
its tail block up front): :func:`size_pool` starts at the trace's GPU pool size and grows it
until the replay never raises. :func:`check` compares, after a replay, the pool's free count
with ``num_blocks - 1 (the null block) - distinct blocks held by live tables`` and each held
block's ``ref_cnt`` with the number of tables holding it.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from types import CodeType
from typing import Any

from benchmarks.compiled import (
    CLOCK,
    TICK,
    chunk_ends,
    clean_heap,
    clock_overhead_ns,
    merge_min,
    no_gc,
    run_ticked,
)
from benchmarks.serving_trace import Trace
from models.families.v0 import operations as ops
from models.families.v0.operations import Dev, Op

__all__ = [
    "COMPARABLE",
    "NOT_COMPARABLE",
    "V1Program",
    "V1Table",
    "V1Timing",
    "Validation",
    "check",
    "compare",
    "compile_trace",
    "env_factory",
    "make_shim",
    "size_pool",
]

#: Kinds both a v0 allocator and the v1 pool run (the ratio's total is over these).
COMPARABLE = ("table_allocate", "table_append", "table_fork", "table_free")
#: Kinds the v1 column prints as ``n/a``: no v1 counterpart (the swaps run as v1's
#: preemption and re-admission, timed but not compared).
NOT_COMPARABLE = ("table_swap", "clear_cows", "table_mark_accessed", "mark_computed")
HASH = ".hash"  # suffix of the request-hashing sub-kind

class UnsupportedOp(ValueError):
    """The trace holds an operation the v1 replay has no mapping for."""


class _Lora:
    """The two fields of a ``LoRARequest`` v1's block hasher reads (a LoRA extra key)."""

    __slots__ = ("lora_name", "lora_path")

    def __init__(self, extra: Any) -> None:
        self.lora_name = str(extra)
        self.lora_path = ""


class V1Table:
    """One table's state, and the duck-typed ``Request`` the hasher and the pool read."""

    __slots__ = ("all_token_ids", "block_hashes", "blocks", "cache_salt", "lora_request",
                 "mm_features", "num_cached", "prompt_embeds")

    def __init__(self, tokens: list[int], extra: Any = None) -> None:
        self.all_token_ids = tokens
        self.block_hashes: list[Any] = []
        self.blocks: list[Any] = []
        self.num_cached = 0  # leading blocks registered in the cache by this table
        self.lora_request = None if extra is None else _Lora(extra)
        self.mm_features: list[Any] = []
        self.cache_salt = None
        self.prompt_embeds = None

    @property
    def num_tokens(self) -> int:
        return len(self.all_token_ids)

    @property
    def _all_token_ids(self) -> list[int]:
        """vLLM 0.34's hasher slices the token buffer under this name."""
        return self.all_token_ids


def make_shim(pool: Any, hasher: Callable[[Any], list[Any]], block_size: int,
              touch_per_group: bool = False) -> dict[str, Callable[..., Any]]:
    """The functions the rendered lines call, bound to ``pool`` (see the module docstring)."""
    bs = block_size
    get_cached = pool.get_cached_block
    get_new = pool.get_new_blocks
    cache_full = pool.cache_full_blocks
    free_blocks = pool.free_blocks
    groups = [0]
    touch: Callable[[list[Any]], None]
    if touch_per_group:  # vLLM 0.11: one list per KV-cache group
        def touch(blocks: list[Any], _touch: Callable[..., None] = pool.touch) -> None:
            _touch((blocks,))
    else:
        touch = pool.touch

    def new(tokens: Sequence[int], extra: Any = None) -> V1Table:
        t = V1Table(list(tokens), extra)
        t.block_hashes = hasher(t)
        return t

    def admit(t: V1Table) -> None:
        """Prefix lookup over the table's hashes, touch, new blocks, cache the full ones."""
        n = len(t.all_token_ids)
        hits: list[Any] = []
        for block_hash in t.block_hashes[:(n - 1) // bs]:
            found = get_cached(block_hash, groups)
            if found is None:
                break
            hits.append(found[0])
        if hits:
            touch(hits)
        need = -(-n // bs) - len(hits)
        blocks = hits + get_new(need) if need > 0 else hits
        full = n // bs
        cache_full(t, blocks, len(hits), full, bs, 0)
        t.blocks = blocks
        t.num_cached = full

    def extend(t: V1Table, tokens: Sequence[int]) -> None:
        t.all_token_ids += tokens
        more = hasher(t)
        if more:
            t.block_hashes += more

    def grow(t: V1Table, lookahead: int) -> None:
        n = len(t.all_token_ids)
        blocks = t.blocks
        need = -(-(n + lookahead) // bs) - len(blocks)
        if need > 0:
            blocks += get_new(need)
        full = n // bs
        if full > t.num_cached:
            cache_full(t, blocks, t.num_cached, full, bs, 0)
            t.num_cached = full

    def fork(parent: V1Table) -> V1Table:
        child = V1Table(list(parent.all_token_ids), None)
        child.lora_request = parent.lora_request
        child.block_hashes = list(parent.block_hashes)
        n = len(child.all_token_ids)
        shared = parent.blocks[:(n - 1) // bs]
        if shared:
            touch(shared)
        need = -(-n // bs) - len(shared)
        blocks = shared + get_new(need) if need > 0 else list(shared)
        full = n // bs
        cache_full(child, blocks, len(shared), full, bs, 0)
        child.blocks = blocks
        child.num_cached = full
        return child

    def free(t: V1Table) -> None:
        if t.blocks:
            free_blocks(reversed(t.blocks))
            t.blocks = []

    def swap_in(t: V1Table) -> None:
        admit(t)

    return {"_new": new, "_admit": admit, "_extend": extend, "_grow": grow, "_fork": fork,
            "_free": free, "_swap_out": free, "_swap_in": swap_in}


def env_factory(target: Any, block_size: int) -> Callable[[int], dict[str, Any]]:
    """``num_blocks -> namespace`` (a fresh pool of ``target``, a
    :class:`properties.families.v1.targets.PoolTarget`, and the shim bound to it)."""
    hasher = target.hasher(block_size)
    caps = target.caps

    def make(num_blocks: int) -> dict[str, Any]:
        if caps.hash_block_size:
            pool = target.pool_cls(num_blocks, True, block_size)
        else:
            pool = target.pool_cls(num_blocks, True)
        return {"pool": pool, **make_shim(pool, hasher, block_size, caps.touch_per_group)}

    return make


# --------------------------------------------------------------------------- rendering


Rendered = tuple[list[tuple[str, str]], tuple[tuple[int, ...], ...]]


def render(program: Sequence[Op]) -> Rendered:
    """``(kind, line)`` per timed unit and the token tuples the lines name (``_K[i]``), table
    handles numbered as the v0 runner does (``t<n>`` for the n-th table allocated or forked);
    allocate and append are two units each (the hashing, ``<kind>.hash``, then the pool's
    work). Kinds without a v1 counterpart render as ``pass`` (they keep their clock slot;
    their time is never reported)."""
    out: list[tuple[str, str]] = []
    consts: list[tuple[int, ...]] = []
    tables = 0
    for op in program:
        if isinstance(op, ops.TableAllocate):
            if op.device is not Dev.GPU or op.window is not None:
                raise UnsupportedOp(f"{op.kind} on {op.device.name} / sliding window")
            handle = f"t{tables}"
            tables += 1
            consts.append(tuple(op.tokens))
            out.append((op.kind + HASH, f"{handle} = _new(_K[{len(consts) - 1}], "
                                        f"{op.extra_hash!r})"))
            out.append((op.kind, f"_admit({handle})"))
        elif isinstance(op, ops.TableAppend):
            if op.computed is not None:
                raise UnsupportedOp(f"{op.kind} with num_computed_slots (sliding window)")
            consts.append(tuple(op.tokens))
            out.append((op.kind + HASH, f"_extend(t{op.table}, _K[{len(consts) - 1}])"))
            out.append((op.kind, f"_grow(t{op.table}, {op.lookahead})"))
        elif isinstance(op, ops.TableFork):
            out.append((op.kind, f"t{tables} = _fork(t{op.table})"))
            tables += 1
        elif isinstance(op, ops.TableFree):
            out.append((op.kind, f"_free(t{op.table})"))
        elif isinstance(op, ops.TableSwap):
            call = "_swap_out" if op.src is Dev.GPU else "_swap_in"
            out.append((op.kind, f"{call}(t{op.table})"))
        elif op.kind in NOT_COMPARABLE:
            out.append((op.kind, "pass"))
        else:
            raise UnsupportedOp(f"no v1 mapping for {op.kind}")
    return out, tuple(consts)


@dataclass(frozen=True)
class V1Program:
    """The rendered replay compiled in chunks, for one pool factory (``make_env``: a fresh
    pool and its shim functions, untimed)."""

    make_env: Callable[[], dict[str, Any]]
    num_blocks: int
    kinds: tuple[str, ...]
    plain: tuple[CodeType, ...]
    timed: tuple[CodeType, ...]
    lines: tuple[str, ...]
    consts: tuple[tuple[int, ...], ...]

    def fresh_env(self) -> dict[str, Any]:
        env = self.make_env()
        env["_K"] = self.consts
        return env

    def run_plain(self, env: dict[str, Any] | None = None,
                  clock: Callable[[], int] = CLOCK) -> float:
        """Seconds for every operation once (on ``env``, or a fresh pool)."""
        env = self.fresh_env() if env is None else env
        elapsed = 0
        clean_heap()
        with no_gc():
            for code in self.plain:
                start = clock()
                exec(code, env)
                elapsed += clock() - start
        return elapsed / 1e9

    def run_timed(self, overhead_ns: float, clock: Callable[[], int] = CLOCK,
                  ) -> dict[str, float]:
        """Seconds per (sub-)kind on a fresh pool, one clock reading's cost subtracted per
        unit."""
        env = self.fresh_env()
        clean_heap()
        return run_ticked(self.timed, env, self.kinds, overhead_ns, clock)[0]


def compile_trace(trace: Trace, make_env: Callable[[], dict[str, Any]], num_blocks: int,
                  chunk: int = 1_000) -> V1Program:
    rendered, consts = render(trace.program)
    ends = chunk_ends(len(rendered), None, chunk)
    tick = TICK
    plain: list[CodeType] = []
    timed: list[CodeType] = []
    start = 0
    for end in ends:
        body = [line for _, line in rendered[start:end]]
        plain.append(compile("\n".join(body) + "\n", f"<vllm-v1:plain[{start}]>", "exec"))
        ticked = [tick]
        for line in body:
            ticked += [line, tick]
        timed.append(compile("\n".join(ticked) + "\n", f"<vllm-v1:timed[{start}]>", "exec"))
        start = end
    return V1Program(make_env, num_blocks, tuple(k for k, _ in rendered), tuple(plain),
                     tuple(timed), tuple(line for _, line in rendered), consts)


# --------------------------------------------------------------------------- validation


@dataclass(frozen=True, slots=True)
class Validation:
    num_blocks: int
    free: int
    held: int  # distinct blocks held by live tables
    live_tables: int
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def expected_free(self) -> int:
        return self.num_blocks - 1 - self.held

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "num_blocks": self.num_blocks, "free": self.free,
                "held": self.held, "expected_free": self.expected_free,
                "live_tables": self.live_tables, "error": self.error}


def check(env: dict[str, Any], num_blocks: int) -> Validation:
    """After a replay in ``env``: the pool's free count is ``num_blocks`` less the null block
    less the distinct blocks the live tables hold, and each held block's ``ref_cnt`` is the
    number of tables holding it."""
    pool = env["pool"]
    tables = [v for k, v in env.items() if k[:1] == "t" and k[1:].isdigit()
              and isinstance(v, V1Table)]
    holders: Counter[int] = Counter()
    objects: dict[int, Any] = {}
    for t in tables:
        for block in t.blocks:
            holders[block.block_id] += 1
            objects[block.block_id] = block
    free = int(pool.get_num_free_blocks())
    live = sum(1 for t in tables if t.blocks)
    result = Validation(num_blocks, free, len(holders), live, None)
    errors = []
    if free != result.expected_free:
        errors.append(f"free count {free} != {num_blocks} blocks - 1 null - {len(holders)} "
                      f"held = {result.expected_free}")
    wrong = [(i, objects[i].ref_cnt, n) for i, n in sorted(holders.items())
             if objects[i].ref_cnt != n]
    if wrong:
        i, got, want = wrong[0]
        errors.append(f"{len(wrong)} held blocks with ref_cnt != holders (block {i}: ref_cnt "
                      f"{got}, held by {want} tables)")
    if 0 in holders:
        errors.append("a table holds the null block")
    if errors:
        return Validation(num_blocks, free, len(holders), live, "; ".join(errors))
    return result


def size_pool(trace: Trace, make_env: Callable[[int], dict[str, Any]],
              max_factor: int = 16) -> tuple[V1Program, dict[str, Any], list[int]]:
    """The program (compiled once) on the smallest pool tried (the trace's GPU size, then 1/8
    more each time, up to ``max_factor`` times the trace's) on which one untimed replay raises
    nothing; with that replay's namespace (for :func:`check`) and the sizes that refused."""
    size = trace.config.num_gpu_blocks
    program = compile_trace(trace, lambda: make_env(size), size)
    refused: list[int] = []
    last: Exception | None = None
    while size <= max_factor * trace.config.num_gpu_blocks:
        program = replace(program, make_env=functools.partial(make_env, size),
                          num_blocks=size)
        env = program.fresh_env()
        try:
            program.run_plain(env)
        except ValueError as exc:  # get_new_blocks: "Cannot get N free blocks from the pool"
            refused.append(size)
            last = exc
            size += max(1, size // 8)
            continue
        return program, env, refused
    raise RuntimeError(f"the v1 pool refused the trace up to {refused[-1]} blocks: {last}")


# --------------------------------------------------------------------------- timing


@dataclass
class V1Timing:
    label: str
    total_s: float = float("inf")  # plain run, every operation (swaps included)
    per_kind_s: dict[str, float] = field(default_factory=dict)  # hashing folded in
    hash_s: dict[str, float] = field(default_factory=dict)  # the hashing share, per kind

    def comparable_s(self, kinds: Sequence[str] = COMPARABLE) -> float:
        return sum(self.per_kind_s.get(k, 0.0) for k in kinds)

    def as_dict(self, counts: dict[str, int]) -> dict[str, Any]:
        return {"label": self.label, "total_s": self.total_s, "per_kind_s": self.per_kind_s,
                "hash_s": self.hash_s, "comparable_kinds": list(COMPARABLE),
                "comparable_s": self.comparable_s(),
                "per_kind_us_per_op": {k: v * 1e6 / counts[k]
                                       for k, v in self.per_kind_s.items() if counts.get(k)}}


def compare(program: V1Program, repeats: int, label: str = "vllm-v1") -> V1Timing:
    """Best-of-``repeats`` plain total and per-kind times (each on a fresh pool); a kind's
    time includes its ``.hash`` sub-kind, which ``hash_s`` also reports alone."""
    overhead = clock_overhead_ns()
    timing = V1Timing(label)
    runs: list[dict[str, float]] = []
    for _ in range(max(1, repeats)):
        timing.total_s = min(timing.total_s, program.run_plain())
        runs.append(program.run_timed(overhead))
    best = merge_min(runs)
    for kind, seconds in best.items():
        base = kind.removesuffix(HASH)
        if base in NOT_COMPARABLE and base != "table_swap":
            continue
        timing.per_kind_s[base] = timing.per_kind_s.get(base, 0.0) + seconds
        if kind.endswith(HASH):
            timing.hash_s[base] = seconds
    return timing
