"""The offload family as the core sees it (:class:`properties.core.family.Family`): vLLM's CPU
KV offloading manager, the tier behind the GPU prefix cache, under the ``lru`` and ``arc``
policies (the allocator types, :class:`~properties.core.roles.Variants`).

``prefixcache check --family offload`` runs this folder's machines against the bundled
manager (``prefixcache.v1.kv_offload.cpu.manager:CPUOffloadingManager``); ``--allocator
properties.upstream:vllm_cpu_offload`` (and ``--allocator-type arc``) against vLLM 0.34.0's,
read from its wheel. Programs are operations of :mod:`models.families.offload.ops`; the judge
is :class:`~properties.families.offload.judge.OffloadJudge`. Jobs are named by request and
keys, not by handle, so the family shrinks by dropping operations and lowering the chunk count
(:class:`~properties.core.roles.PoolShrinking`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from models.families.offload import ops as o
from models.families.offload.invariants import OffloadInvariants
from properties.core.family import Family, Script, TargetOptions
from properties.core.targets import Target, TargetError, speaks, step_timeout_setting
from properties.families.offload import targets
from properties.families.offload.adapter import tier
from properties.families.offload.judge import OffloadJudge, OutOfContract, offload_target

if TYPE_CHECKING:
    from fuzz.core.tools import ZooMutant

__all__ = ["FAMILY", "REF", "OffloadFamily"]

#: How this family is named by reference (the registry's ``module:attr`` form).
REF = "properties.families.offload.family:FAMILY"


class OffloadVocabulary:
    """Operations and tier shapes, as JSON."""

    def op_to_json(self, op: Any) -> dict[str, Any]:
        return o.op_to_json(op)

    def op_from_json(self, data: Mapping[str, Any]) -> Any:
        return o.op_from_json(data)

    def is_op(self, value: object) -> bool:
        return isinstance(value, o.OP_TYPES)

    def config(self, target: Target, geometry: Mapping[str, Any]) -> o.OffloadConfig:
        return o.OffloadConfig(int(geometry["num_chunks"]),
                               int(geometry.get("store_threshold", 1)),
                               int(geometry.get("max_tracker_size", 64_000)),
                               bool(geometry.get("events", True)))

    def geometry(self, config: o.OffloadConfig) -> dict[str, Any]:
        return {"num_chunks": config.num_chunks, "store_threshold": config.store_threshold,
                "max_tracker_size": config.max_tracker_size, "events": config.events}


class OffloadFamily:
    """See the module docstring."""

    name = "offload"
    description = "vLLM's CPU KV offloading manager (the tier behind the prefix cache)"
    default_spec = targets.DEFAULT_SPEC
    invariants = OffloadInvariants
    out_of_contract: type[Exception] = OutOfContract
    machines = Path(__file__).resolve().parent / "machines"
    vocabulary = OffloadVocabulary()
    #: Optional role (properties.core.roles.Variants): the cache policy.
    allocator_types: tuple[str, ...] = targets.POLICIES
    #: Optional role (properties.core.roles.PoolShrinking).
    pool_fields: tuple[tuple[str, int], ...] = (("num_chunks", 1),)

    def zoo(self) -> Mapping[str, ZooMutant]:
        """Optional role (fuzz.core.tools.Zoo): the known-broken targets
        (``fuzz/families/offload/zoo.py``), fuzzed through the machines."""
        from fuzz.families.offload.zoo import zoo

        return zoo()

    def accepts(self, spec_or_factory: str | Callable[..., Any]) -> bool:
        """A manager class with the tier's methods, or a callable annotated to return an
        :class:`~properties.families.offload.targets.OffloadTarget`."""
        return speaks(spec_or_factory, self.default_spec, targets.MANAGER_METHODS,
                      targets.OffloadTarget)

    def load_target(self, spec: str | None = None, options: TargetOptions | None = None
                    ) -> Target:
        """``spec`` (None: ``$PREFIXCACHE_OFFLOAD_MANAGER`` or the bundled manager) with the
        policy ``options.allocator_type`` (default: the target's own, else ``lru``); no
        feature can be switched off."""
        options = options or TargetOptions()
        if options.disable:
            raise TargetError(f"the offload family has no features to disable "
                              f"({', '.join(options.disable)})")
        spec = spec or os.environ.get(targets.ENV_VAR) or self.default_spec
        made = targets.of_spec(spec)
        policy = options.allocator_type or made.policy or self.allocator_types[0]
        if policy not in self.allocator_types:
            raise TargetError(f"allocator type {policy!r}: the offload family's are "
                              f"{', '.join(self.allocator_types)}")
        if made.policy is not None and policy != made.policy:
            raise TargetError(f"{spec!r} is fixed to the {made.policy} policy, not {policy}")
        if policy not in made.caps.policies:
            raise TargetError(f"{spec!r} has no {policy} policy (it has "
                              f"{', '.join(made.caps.policies)})")
        if not made.spec:
            made = dataclasses.replace(made, spec=spec)
        return Target(spec, made.make, made, made.name, made.version, family=self.name,
                      allocator_type=policy, description=f"{made.describe()}; policy {policy}",
                      misuse_types=made.misuse_types,
                      step_timeout=step_timeout_setting(options.step_timeout))

    def judge(self, target: Target, config: o.OffloadConfig) -> OffloadJudge:
        return OffloadJudge(target, config)

    def script(self, target: Target, config: o.OffloadConfig, steps: Sequence[Any],
               judge: Any | None = None) -> Script:
        """The manager built as the target builds it, the calls one per step (a call that
        raised inside ``try``), then the same program replayed under the judge."""
        made = offload_target(target)
        policy = target.allocator_type or "lru"
        renderer = tier(made, None)
        body = list(made.setup)
        if made.caps.legacy:
            body.append(f"mgr = make({config.num_chunks}, enable_events={config.events})")
        elif made.caps.store_threshold:
            body.append(f"mgr = make({config.num_chunks}, cache_policy={policy!r}, "
                        f"enable_events={config.events}, store_threshold="
                        f"{config.store_threshold}, max_tracker_size={config.max_tracker_size})")
        else:
            body.append(f"mgr = make({config.num_chunks}, cache_policy={policy!r}, "
                        f"enable_events={config.events})")
        body += renderer.prelude()
        for i, step in enumerate(steps):
            line = getattr(step, "line", "") or renderer.line(step.op)
            body.append(f"# step {i}: {step.op!r}")
            if isinstance(step.outcome, BaseException):
                body += ["try:", f"    {line}", "except Exception as exc:",
                         f"    print('step {i} raised', repr(exc))"]
            else:
                body.append(line)
        program = [o.op_to_json(step.op) for step in steps]
        check = ["from properties.core.replay import check",
                 f"check({target.spec!r}, {self.vocabulary.geometry(config)!r},",
                 f"      {program!r},",
                 f"      family={REF!r}, allocator_type={policy!r})"]
        return Script(body, check)


FAMILY: Family = OffloadFamily()
