"""The toy family as the core sees it: the eleven names of
:class:`properties.core.family.Family`, and one optional role (pool shrinking).

Select it by reference (``--family tests.toy.family:FAMILY``); a target is any callable
``(num_blocks, block_size)`` returning an object with ``allocate``, ``free``, ``lookup``,
``num_free``, ``ref_count`` and ``cached_blocks`` (:class:`tests.toy.allocator.ToyCache`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from properties.core.family import Family, Script, TargetOptions
from properties.core.targets import Target, TargetError, resolve, step_timeout_setting
from tests.toy.model import (
    Allocate,
    Free,
    Lookup,
    OutOfContract,
    ToyConfig,
    ToyInvariants,
    ToyJudge,
    op_from_json,
    op_to_json,
)

#: Where a target is named when ``--allocator`` is not given.
ENV_VAR = "PREFIXCACHE_ALLOCATOR"
#: The bundled toy cache.
DEFAULT_SPEC = "tests.toy.allocator:ToyCache"
#: What a toy cache has.
METHODS = ("allocate", "free", "lookup", "num_free", "ref_count", "cached_blocks")
#: How this family is named by reference (the registry's ``module:attr`` form).
REF = "tests.toy.family:FAMILY"


class ToyVocabulary:
    """Operations (``allocate``, ``free``, ``lookup``) and pool shapes, as JSON."""

    def op_to_json(self, op: Any) -> dict[str, Any]:
        return op_to_json(op)

    def op_from_json(self, data: Mapping[str, Any]) -> Any:
        return op_from_json(data)

    def is_op(self, value: object) -> bool:
        return isinstance(value, Allocate | Free | Lookup)

    def config(self, target: Target, geometry: Mapping[str, Any]) -> ToyConfig:
        return ToyConfig(int(geometry["num_blocks"]), int(geometry["block_size"]))

    def geometry(self, config: ToyConfig) -> dict[str, Any]:
        return {"num_blocks": config.num_blocks, "block_size": config.block_size}


class ToyFamily:
    """See the module docstring."""

    name = "toy"
    description = "a dict-based prefix cache (tests/toy), the family a newcomer reads first"
    default_spec = DEFAULT_SPEC
    invariants = ToyInvariants
    out_of_contract: type[Exception] = OutOfContract
    machines = Path(__file__).resolve().parent / "machines"
    vocabulary = ToyVocabulary()
    #: Optional role (properties.core.roles.PoolShrinking): smaller pools replay shorter.
    pool_fields: tuple[tuple[str, int], ...] = (("num_blocks", 1),)

    def accepts(self, spec_or_factory: str | Callable[..., Any]) -> bool:
        """A callable whose instances have the toy cache's methods (a class is looked at
        without building one)."""
        try:
            obj = resolve(spec_or_factory) if isinstance(spec_or_factory, str) \
                else spec_or_factory
        except TargetError:
            return False
        return isinstance(obj, type) and all(callable(getattr(obj, m, None)) for m in METHODS)

    def load_target(self, spec: str | None, options: TargetOptions | None = None) -> Target:
        """Resolve ``spec`` (default: ``$PREFIXCACHE_ALLOCATOR``, else the toy cache) and
        build a one-block cache to see that it is one."""
        options = options or TargetOptions()
        if options.allocator_type or options.disable:
            raise TargetError("the toy family has no allocator types and no features")
        spec = spec or os.environ.get(ENV_VAR) or DEFAULT_SPEC
        factory = resolve(spec)
        try:
            probe = factory(1, 1)
        except Exception as exc:
            raise TargetError(f"{spec!r} failed to build a one-block cache: "
                              f"{type(exc).__name__}: {exc}") from exc
        missing = [m for m in METHODS if not callable(getattr(probe, m, None))]
        if missing:
            raise TargetError(f"{spec!r} is not a toy cache: it has no {', '.join(missing)}")
        return Target(spec, factory, None, spec.partition(":")[2], "0", family=self.name,
                      description=f"{spec} (toy cache)",
                      step_timeout=step_timeout_setting(options.step_timeout))

    def judge(self, target: Target, config: ToyConfig) -> ToyJudge:
        return ToyJudge(target.factory, config)

    def script(self, target: Target, config: ToyConfig, steps: Sequence[Any],
               judge: Any | None = None) -> Script:
        """The calls, one per step (a refused or crashing call inside ``try``), then the same
        program replayed under the judge."""
        module, _, name = target.spec.partition(":")
        body = [f"from {module} import {name.split('.')[0]}", "",
                f"cache = {name}({config.num_blocks}, {config.block_size})", "requests = []"]
        for i, step in enumerate(steps):
            op = step.op
            if isinstance(op, Allocate):
                call = f"requests.append(cache.allocate({list(op.tokens)}))"
            elif isinstance(op, Free):
                call = f"cache.free(requests[{op.req}])"
            else:
                call = f"print(cache.lookup({list(op.tokens)}))"
            body += [f"# step {i}: {op!r}", call]
        program = [op_to_json(step.op) for step in steps]
        check = ["from properties.core.replay import check",
                 f"check({target.spec!r}, {self.vocabulary.geometry(config)!r},",
                 f"      {program!r}, family={REF!r})"]
        return Script(body, check)


FAMILY: Family = ToyFamily()
