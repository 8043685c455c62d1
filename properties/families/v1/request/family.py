"""The v1 request level as the core sees it (:class:`properties.core.family.Family`): vLLM v1's
``KVCacheManager`` driven as its scheduler drives it, family ``v1-manager``.

``prefixcache check --allocator properties.upstream:vllm_v1_manager`` picks this family by
itself (a callable annotated to return a
:class:`~properties.families.v1.request.target.ManagerTarget`), runs :attr:`machines`
(the request machine once per manager configuration, and the replay of each ``--xfails-file``
entry) and reports through the core: ``--all``, ``--write-xfails``, shrinking and reproducers
are the core's. The xfails files are the core's format; the keys ``versions``, ``avoid``
(generator features the machine leaves out: ``machine.AVOIDABLE``) and ``vllm_tests_miss``
ride along.

The judge is the request executor (manager and model in one step,
:class:`~properties.families.v1.request.executor.RequestExecutor`); operations name requests
by their index in the program, so the family shrinks programs by dropping requests with every
operation on them (:class:`~properties.core.roles.HandleShrinking`) and by lowering the pool
size (:class:`~properties.core.roles.PoolShrinking`). Needs torch (the CPU build, extra
``v1-manager``) and a cached vllm wheel; without them a target does not load (``TargetError``
naming what to install or fetch).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from models.core.invariants import Violation
from models.families.v1 import request_ops as ops
from models.families.v1.request_invariants import ManagerInvariants
from properties.core.family import Script, TargetOptions
from properties.core.sources import UpstreamError
from properties.core.targets import Target, TargetError, resolve, speaks, step_timeout_setting
from properties.families.v1 import upstream
from properties.families.v1.request.executor import RequestExecutor
from properties.families.v1.request.loader import MANAGER_VERSIONS
from properties.families.v1.request.reproducer import script_body
from properties.families.v1.request.target import ManagerConfig, ManagerTarget

__all__ = ["FAMILY", "ManagerFamily", "ManagerJudge", "OutOfContract", "check_program",
           "manager_of"]

#: The judges of a manager on its release's own ``BlockPool`` (an xfails entry's ``requires``
#: for a deviation of that pool's, such as its per-copy event removals).
RELEASE_POOL = frozenset({"release-pool"})
#: The default target: the newest supported release's manager, from the cached wheel.
DEFAULT_SPEC = "properties.families.v1.request.target:vllm_v1_manager"
#: Where a target is named when ``--allocator`` is not given.
ENV_VAR = "PREFIXCACHE_MANAGER"
#: The one allocator type (a manager has no variants).
ALLOCATOR_TYPE = "kv_cache_manager"


def manager_of(target: Target) -> ManagerTarget:
    """The request-level view of a core target of this family (its ``caps``)."""
    if not isinstance(target.caps, ManagerTarget):
        raise TargetError(f"{target.spec!r} is not a v1 manager target (its caps are a "
                          f"{type(target.caps).__name__})")
    return target.caps


class OutOfContract(Exception):
    """A program the request model cannot judge: an operation on a request the program never
    made, or an abort or cache reset inside an open step (a scheduler makes them between
    steps)."""


@dataclass
class Step:
    """One executed operation and what it returned (scripts are rendered from the
    operations)."""

    op: ops.ROp
    outcome: Any


class ManagerJudge:
    """A fresh manager of the target and the request model, side by side (the executor checks
    the fresh state, then the whole state after every operation). ``log`` holds every step
    that reached the target, the failing one included."""

    def __init__(self, target: Target, config: ManagerConfig) -> None:
        self.target = target
        self.config = config
        self.executor = RequestExecutor(manager_of(target), config, target.step_timeout)
        self.log: list[Step] = []
        self.executor.check()

    def step(self, op: Any) -> Any:
        if not isinstance(op, ops.ROp):
            raise OutOfContract(f"not a request-level operation: {op!r}")
        ex = self.executor
        req = getattr(op, "req", None)
        if req is not None and not 0 <= req < len(ex.reqs):
            raise OutOfContract(f"{op.kind} names request {req}, the program made "
                                f"{len(ex.reqs)}")
        if isinstance(op, ops.Abort | ops.ResetCache) and ex.step_open:
            raise OutOfContract(f"{op.kind} inside an open step")
        made = len(ex.reqs)
        try:
            outcome = ex.step(op)  # a violation leaves located at this step
        except Violation:
            # It ran: a replay of the log fails here too. A failed add still made its request.
            self.log.append(Step(op, made if len(ex.reqs) > made else None))
            raise
        self.log.append(Step(op, outcome))
        return outcome


class ManagerVocabulary:
    """The request-level operations (:mod:`models.families.v1.request_ops`) and manager
    configurations (:class:`ManagerConfig`), as JSON."""

    def op_to_json(self, op: Any) -> dict[str, Any]:
        return dict(op.to_json())

    def op_from_json(self, data: Mapping[str, Any]) -> ops.ROp:
        return ops.from_json(dict(data))

    def is_op(self, value: object) -> bool:
        return isinstance(value, ops.ROp)

    def config(self, target: Any, geometry: Mapping[str, Any]) -> ManagerConfig:
        return ManagerConfig.from_json(dict(geometry))

    def geometry(self, config: Any) -> dict[str, Any]:
        return dict(config.to_json())


class ManagerFamily:
    """The v1 ``KVCacheManager`` family (see the module docstring)."""

    name = "v1-manager"
    description = ("vLLM v1 KVCacheManager (vllm/v1/core/kv_cache_manager.py), request level: "
                   "the scheduler's calls")
    default_spec = DEFAULT_SPEC
    machines = Path(__file__).resolve().parent / "machines"
    out_of_contract: type[Exception] = OutOfContract
    invariants: type[ManagerInvariants] = ManagerInvariants
    vocabulary: ManagerVocabulary = ManagerVocabulary()
    #: Optional roles: smaller pools (PoolShrinking), requests as handles (HandleShrinking).
    pool_fields: tuple[tuple[str, int], ...] = (("num_blocks", 2),)
    handle_fields: Mapping[str, tuple[str, ...]] = {"request": ("req",)}

    def accepts(self, spec_or_factory: str | Callable[..., Any]) -> bool:
        """A callable annotated to return a :class:`ManagerTarget` (read without calling it).
        A spec that does not resolve is not ours."""
        return speaks(spec_or_factory, self.default_spec, (), ManagerTarget)

    def load_target(self, spec: str | None = None, options: TargetOptions | None = None
                    ) -> Target:
        """``spec`` (None: ``$PREFIXCACHE_MANAGER`` or :data:`DEFAULT_SPEC`), called to load
        the manager modules. One allocator type, no feature to switch off. Without torch or
        the wheel: a ``TargetError`` saying what to install or fetch."""
        options = options or TargetOptions()
        if options.allocator_type not in (None, ALLOCATOR_TYPE):
            raise TargetError(f"the {self.name} family has one allocator type, not "
                              f"{options.allocator_type!r}")
        if options.disable:
            raise TargetError(f"the {self.name} family has no features to disable "
                              f"(--disable-feature {', '.join(options.disable)})")
        chosen = spec or os.environ.get(ENV_VAR) or self.default_spec
        factory = resolve(chosen)
        try:
            manager = factory()
        except (UpstreamError, ImportError) as exc:
            raise TargetError(f"{chosen!r}: {exc}") from exc
        if not isinstance(manager, ManagerTarget):
            raise TargetError(f"{chosen!r} returned a {type(manager).__name__}, not a "
                              "ManagerTarget")
        return self.target_of(manager, chosen, options.step_timeout)

    def target_of(self, manager: ManagerTarget, spec: str,
                  step_timeout: float | str | None = None) -> Target:
        """The core target whose ``caps`` is ``manager`` (loaded by ``spec``). Its ``factory``
        is the release's ``KVCacheManager`` class (the judge builds managers through
        ``manager``), so the core tells an exception raised in the release's code (the
        target's) from one raised in the suite's. Its ``judges`` name ``release-pool`` when the
        manager runs on the release's own ``BlockPool``: an xfails entry that ``requires`` it
        is a deviation of that pool's (its events), not the manager's, and does not apply on
        another pool."""
        pool = "" if manager.pool_cls is None else \
            f" on {manager.pool_cls.__module__}.{manager.pool_cls.__name__}"
        factory = manager.mods.kv_cache_manager.KVCacheManager
        origin = manager.mods.origin
        source = "" if upstream.is_cached_wheel(origin) else f" from {origin}"
        return Target(spec=spec, factory=factory, caps=manager,
                      name=manager.name, version=manager.version, family=self.name,
                      description=f"{manager.name} {manager.version} KVCacheManager{pool} "
                                  f"({spec}{source})",
                      step_timeout=step_timeout_setting(step_timeout),
                      release=upstream.release_of(manager.version, MANAGER_VERSIONS) or "",
                      version_note=upstream.version_note(manager.version, origin,
                                                         MANAGER_VERSIONS),
                      judges=RELEASE_POOL if manager.pool_cls is None else frozenset())

    def judge(self, target: Target, config: ManagerConfig) -> ManagerJudge:
        return ManagerJudge(target, config)

    def made(self, step: Any) -> dict[str, tuple[int, ...]]:
        """An ``add`` makes request ``outcome`` (its index)."""
        if isinstance(step.op, ops.Add) and isinstance(step.outcome, int):
            return {"request": (step.outcome,)}
        return {}

    def smaller_ops(self, op: Any, made: Mapping[str, tuple[int, ...]]
                    ) -> Iterator[tuple[Any, dict[str, tuple[int, ...]]]]:
        """A request with one sampled output less, a schedule without lookahead."""
        if isinstance(op, ops.Add) and op.outputs:
            yield dataclasses.replace(op, outputs=op.outputs[:-1]), {}
        if isinstance(op, ops.Schedule) and op.lookahead:
            yield dataclasses.replace(op, lookahead=0), {}

    def script(self, target: Target, config: Any, steps: Sequence[Any],
               judge: Any | None = None) -> Script:
        """The manager built by the target's spec, the scheduler's calls (replayed with
        recording on), and :func:`check_program` with the configuration and the program."""
        program = [s.op for s in steps]
        module, _, factory = target.spec.partition(":")
        manager = manager_of(target)
        origin = manager.mods.origin
        comment = f"  # vllm {manager.version}" + (
            "" if upstream.is_cached_wheel(origin)
            else f" from {origin}: run with ${upstream.SOURCE_ENV} set to it")
        body = script_body(manager, config, program, module, factory, comment)
        rows = [self.vocabulary.op_to_json(op) for op in program]
        check = ["from properties.families.v1.request.family import check_program",
                 f"check_program({target.spec!r}, {json.dumps(config.to_json())!r},",
                 f"              {json.dumps(rows)!r})"]
        return Script(body, check)


FAMILY = ManagerFamily()


def check_program(spec: str, config: str | Mapping[str, Any],
                  program: str | Sequence[Mapping[str, Any]]) -> None:
    """Replay ``program`` (JSON text or rows) on a fresh manager of ``spec`` shaped by
    ``config`` under the judge; raises the first violation (a reproducer's ``__main__``)."""
    geometry = json.loads(config) if isinstance(config, str) else config
    rows = json.loads(program) if isinstance(program, str) else program
    target = FAMILY.load_target(spec)
    judge = FAMILY.judge(target, FAMILY.vocabulary.config(target, geometry))
    for row in rows:
        judge.step(FAMILY.vocabulary.op_from_json(row))
    print(f"the program runs clean on {target.describe()}")


if TYPE_CHECKING:  # mypy checks that FAMILY is a core Family and takes its roles whole
    from properties.core.family import Family as CoreFamily
    from properties.core.roles import HandleShrinking, PoolShrinking

    _checked: CoreFamily = FAMILY
    _handles: HandleShrinking = FAMILY
    _pools: PoolShrinking = FAMILY
