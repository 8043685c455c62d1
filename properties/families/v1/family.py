"""The v1 family as the core sees it (:class:`properties.core.family.Family`): vLLM v1's
``BlockPool`` at the block level.

``prefixcache check --family v1`` runs :attr:`V1Family.machines` (the pool machine on the core's
``OracleMachine``, and the replay of each ``--xfails-file`` entry) against the bundled pool
(``prefixcache.v1.core.block_pool:BlockPool``), and ``--allocator SPEC`` picks this family by
itself for a pool class or a function returning a
:class:`~properties.families.v1.targets.PoolTarget` (``properties.upstream:vllm_v1_block_pool``).
``--all``, ``--write-xfails``, shrinking and reproducers are the core's. The xfails files are the
core's format, with its ``versions`` (the releases an entry applies to) and ``avoid`` (generator
features the machine leaves out, ``machine.AVOIDABLE``); ``vllm_tests_miss`` rides along.

One operation, one place: the v1 executor applies an operation to the pool and the model and
judges it in the same step; :class:`PoolJudge` runs it and then re-checks what needs no model
(the free queue and the counts agree with the reference counts). The operations name blocks by
id, not by handle, so the family shrinks programs by dropping operations and lowering the pool
size (:class:`~properties.core.roles.PoolShrinking`) only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from models.core.invariants import Violation
from models.families.v1 import ops
from models.families.v1.invariants import Family
from models.families.v1.pool_model import Observed, PoolConfig
from properties.core.family import Script, TargetOptions
from properties.core.targets import Target, TargetError, speaks, step_timeout_setting
from properties.families.v1 import dynamo, targets
from properties.families.v1.adapter import PoolAdapter
from properties.families.v1.executor import Executor, run_program
from properties.families.v1.reproducer import (
    call_lines,
    check_lines,
    config_json,
    config_of,
    script_prelude,
)
from properties.families.v1.targets import PoolTarget

if TYPE_CHECKING:
    from fuzz.core.tools import ZooMutant

__all__ = ["FAMILY", "OutOfContract", "V1Family", "check_program", "pool_of"]

#: The pool methods that make a class a v1 ``BlockPool`` (detection reads the API only).
POOL_METHODS = ("get_new_blocks", "cache_full_blocks", "free_blocks", "touch",
                "get_cached_block", "reset_prefix_cache", "get_num_free_blocks")


def pool_of(target: Target) -> PoolTarget:
    """The v1 view of a core target of this family: its :class:`PoolTarget` (pool class,
    release hasher, detected capabilities), which the core keeps as the target's ``caps``."""
    if not isinstance(target.caps, PoolTarget):
        raise TargetError(f"{target.spec!r} is not a v1 target (its caps are a "
                          f"{type(target.caps).__name__})")
    return target.caps


class OutOfContract(Exception):
    """A program the v1 model cannot judge (an operation on a request the program never made)."""


@dataclass
class Step:
    """One executed operation: the operation and what the pool returned (v1 scripts are
    rendered from the operations, so no call statements are logged)."""

    op: ops.Op
    outcome: Any
    stmts: list[Any] = field(default_factory=list)


class PoolJudge:
    """A fresh pool of the target and the model, side by side (the :class:`Executor`), then
    what a snapshot must show whatever the program: the free queue holds each id once, only
    unreferenced ids, and ``get_num_free_blocks`` counts it; no reference count is negative.
    ``log`` holds every step that reached the target, the failing one included (its outcome
    None)."""

    def __init__(self, target: Target, config: PoolConfig) -> None:
        self.target = target
        self.config = config
        self.executor = Executor(pool_of(target), config)
        self.adapter = self.executor.adapter
        self.log: list[Step] = []
        self.executor.check()
        #: What the pool showed after the last judged step.
        self.snapshot: Observed = self.adapter.snapshot()
        self._check(self.snapshot)
        if self.snapshot.num_free != config.num_blocks - 1:
            raise Violation(Family.FREE, "a fresh pool has every block but the null one free",
                            expected=config.num_blocks - 1, observed=self.snapshot.num_free)

    def step(self, op: Any) -> Any:
        if not isinstance(op, ops.Op):
            raise OutOfContract(f"not a v1 operation: {op!r}")
        if isinstance(op, ops.CacheFull | ops.CachePartial | ops.Lookup) \
                and op.req >= len(self.executor.reqs):
            raise OutOfContract(f"{op.kind} names request {op.req}, the program made "
                                f"{len(self.executor.reqs)}")
        self._in_contract(op)
        index = len(self.log)
        try:
            outcome = self.executor.step(op)
        except Violation as violation:
            self.log.append(Step(op, None))  # it reached the target: a replay fails here too
            raise (violation if violation.op is not None else violation.at(op, index)) from None
        self.log.append(Step(op, outcome))
        self.snapshot = self.adapter.snapshot()
        try:
            self._check(self.snapshot)
        except Violation as violation:
            raise violation.at(op, index) from None
        return outcome

    def _in_contract(self, op: ops.Op) -> None:
        """The callers' side of the contract the model assumes (a fuzz program or a stored one
        may break it): unpin only held, non-null blocks; move keys onto a keyless, non-null
        block other than the source; only operations the target has."""
        model, caps = self.executor.model, self.executor.target.caps
        if isinstance(op, ops.EmitCached) and op.req >= len(self.executor.reqs):
            raise OutOfContract(f"{op.kind} names request {op.req}, the program made "
                                f"{len(self.executor.reqs)}")
        if isinstance(op, ops.Unpin):
            counts: dict[int, int] = {}
            for b in op.ids:
                counts[b] = counts.get(b, 0) + 1
                if b not in model.ref or counts[b] > model.ref[b]:
                    raise OutOfContract(f"unpin_blocks of block {b}, not held that often")
        if isinstance(op, ops.MoveHashes) and (
                op.dst not in model.ref or op.src not in model.ref or op.src == op.dst
                or model.keys_of(op.dst)):
            raise OutOfContract("move_block_hashes onto a keyed, null or the same block")
        needs = {ops.Unpin: caps.unpin_blocks, ops.MoveHashes: caps.move_block_hashes,
                 ops.EmitCached: caps.emit_cached_events}
        if not needs.get(type(op), True) or (isinstance(op, ops.Free) and op.evict_first
                                             and not caps.free_evict_first):
            raise OutOfContract(f"{op.kind} is not in {self.target.spec}'s API")

    def _check(self, snap: Observed) -> None:
        free = list(snap.free)
        if len(set(free)) != len(free):
            raise Violation(Family.LEAK, "the free queue holds an id twice", observed=free)
        if snap.num_free != len(free):
            raise Violation(Family.FREE, "get_num_free_blocks() counts the free queue",
                            expected=len(free), observed=snap.num_free)
        held = sorted(b for b in free if snap.ref.get(b, 0) != 0)
        if held:
            raise Violation(Family.RC, "a block in the free queue has references",
                            observed={b: snap.ref[b] for b in held})
        negative = sorted(b for b, n in snap.ref.items() if n < 0)
        if negative:
            raise Violation(Family.RC, "negative reference counts", observed=negative)


class V1Vocabulary:
    """The v1 pool operations (:mod:`models.families.v1.ops`) and pool shapes."""

    def op_from_json(self, data: Mapping[str, Any]) -> ops.Op:
        return ops.from_json(dict(data))

    def op_to_json(self, op: Any) -> dict[str, Any]:
        return dict(op.to_json())

    def is_op(self, value: object) -> bool:
        return isinstance(value, ops.Op)

    def config(self, target: Any, geometry: Mapping[str, Any]) -> PoolConfig:
        return config_of(geometry)

    def geometry(self, config: Any) -> dict[str, Any]:
        return config_json(config)


class V1Family:
    """The v1 ``BlockPool`` family (see the module docstring)."""

    name = "v1"
    description = "vLLM v1 BlockPool (vllm/v1/core/block_pool.py), block level"
    default_spec = targets.DEFAULT_SPEC
    machines = Path(__file__).resolve().parent / "machines"
    out_of_contract: type[Exception] = OutOfContract
    invariants: type[Family] = Family
    vocabulary: V1Vocabulary = V1Vocabulary()
    pool_fields: tuple[tuple[str, int], ...] = (("num_blocks", 2),)

    def zoo(self) -> Mapping[str, ZooMutant]:
        """Optional role (fuzz.core.tools.Zoo): the broken bundled pools
        (``fuzz/families/v1/zoo.py``)."""
        from fuzz.families.v1.zoo import zoo

        return zoo()

    def accepts(self, spec_or_factory: str | Callable[..., Any]) -> bool:
        """A ``BlockPool`` class (it has :data:`POOL_METHODS`), or a callable annotated to
        return a :class:`PoolTarget`. A spec that does not resolve is not ours."""
        return speaks(spec_or_factory, self.default_spec, POOL_METHODS, PoolTarget)

    def load_target(self, spec: str | None = None, options: TargetOptions | None = None
                    ) -> Target:
        """``spec`` (None: ``$PREFIXCACHE_POOL`` or the bundled pool). A pool has one kind
        (``block_pool``) and no feature to switch off (``disable`` must be empty). The core
        target's ``caps`` is the :class:`PoolTarget` (:func:`pool_of`)."""
        options = options or TargetOptions()
        allocator_type, step_timeout = options.allocator_type, options.step_timeout
        if allocator_type not in (None, "block_pool"):
            raise TargetError(f"the v1 family has one allocator type, not {allocator_type!r}")
        disabled = tuple(options.disable)
        if disabled:
            raise TargetError("the v1 family has no features to disable "
                              f"(--disable-feature {', '.join(disabled)})")
        chosen = spec or os.environ.get(targets.ENV_VAR) or self.default_spec
        seconds = step_timeout_setting(step_timeout)
        return self.target_of(targets.load(chosen, step_timeout=seconds))

    def target_of(self, pool: PoolTarget) -> Target:
        """The core target whose ``caps`` is ``pool`` (an already loaded :class:`PoolTarget`,
        e.g. a patched zoo pool)."""
        return Target(spec=pool.spec, factory=pool.pool_cls, caps=pool, name=pool.name,
                      version=pool.version, misuse_types=pool.misuse_types,
                      allocator_type=pool.allocator_type, step_timeout=pool.step_timeout,
                      family=self.name,
                      description=f"{pool.describe()}; router: {dynamo.status()}",
                      release=pool.release, version_note=pool.version_note,
                      judges=frozenset({"dynamo-router"}) if dynamo.load_router() else frozenset())

    def create(self, target: Target, config: Any) -> Any:
        return pool_of(target).create(config)

    def adapter(self, target: Target, config: Any) -> PoolAdapter:
        return PoolAdapter(pool_of(target), config)

    def judge(self, target: Target, config: PoolConfig) -> PoolJudge:
        return PoolJudge(target, config)

    def script(self, target: Target, config: Any, steps: Sequence[Any],
               judge: Any | None = None) -> Script:
        """The stand-ins, then ``pool``, ``hasher`` and ``B`` (the pool's blocks), the
        program's calls rendered from the operations (v1 steps log no calls), and
        :func:`check_program` with the pool shape and the program."""
        pool = pool_of(target)
        program = [s.op for s in steps]
        body = [*script_prelude(pool, config),
                *call_lines(config, program, pool.caps.touch_per_group)]
        return Script(body, check_lines(pool, config, program))


FAMILY = V1Family()


def check_program(spec: str, config: str | Mapping[str, Any],
                  program: str | Sequence[Mapping[str, Any]]) -> None:
    """Replay ``program`` (JSON text or rows) on a fresh pool of ``spec`` shaped by ``config``
    under the model; raises the first :class:`Violation` (what a reproducer's ``__main__``
    calls)."""
    geometry = json.loads(config) if isinstance(config, str) else config
    rows = json.loads(program) if isinstance(program, str) else program
    target = pool_of(FAMILY.load_target(spec))
    run_program(target, config_of(geometry), [ops.from_json(dict(r)) for r in rows])
    print(f"the program runs clean on {target.describe()}")



if TYPE_CHECKING:  # mypy checks that FAMILY is a core Family (the protocol)
    from properties.core.family import Family as CoreFamily

    _checked: CoreFamily = FAMILY
