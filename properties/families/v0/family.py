"""The v0 block-manager family (vLLM v0 / Aphrodite) as the core sees it: the
:class:`properties.core.family.Family` object, delegating to this family's judge (runner and
oracle), operations, adapter and capabilities, with the optional roles of
:mod:`properties.core.roles` it takes on (building by hand, allocator types, shrinking by
handles and pool sizes, tolerated deviations, token inputs, a weak-hash mode), and the fuzz
tools of :mod:`fuzz.core.tools` (traces, the zoo). It is fuzzed through its Hypothesis machines
(:mod:`fuzz.core.machine_harness`): it has no decoder of its own.

A v0 target spec names a factory with the signature of upstream's
``CpuGpuBlockAllocator.create``:
``(allocator_type, num_gpu_blocks, num_cpu_blocks, block_size) -> allocator``. Capabilities are
detected on a 2+2-block instance and from the claims its package declares (``atomic``,
``typed_errors``, ``lru``, ``misuse_errors``, ``extra_key_function``, ``name``, ``version``).
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from models.families.v0 import operations as ops
from models.families.v0.capabilities import (
    TOLERABLE,
    Capabilities,
    Config,
    Generation,
    tolerating,
)
from models.families.v0.invariants import Family as Invariants
from models.families.v0.oracle import Oracle, OutOfContract
from properties.core.family import Family, Script, TargetOptions
from properties.core.reproducer import family_arg, logged_calls, program_json
from properties.core.targets import (
    ENV_VAR,
    Target,
    TargetError,
    claims_of,
    package_of,
    resolve,
    resolve_types,
    step_timeout_setting,
    version_of,
)
from properties.families.v0.adapter import FamilyAdapter
from properties.families.v0.judge import V0Judge
from properties.families.v0.runner import Runner

if TYPE_CHECKING:
    from fuzz.core.tools import TraceReplay, ZooMutant

#: The bundled reference allocator.
DEFAULT_SPEC = "prefixcache.cpu_gpu_block_allocator:CpuGpuBlockAllocator.create"

#: Chains longer than this are kept whole while shrinking (one candidate per chunk).
MAX_CHUNKS = 32


class V0Vocabulary:
    """The v0 operations (:mod:`models.families.v0.operations`) and pool shapes (block size,
    GPU and CPU blocks)."""

    def op_from_json(self, data: Mapping[str, Any]) -> ops.Op:
        return ops.op_from_json(dict(data))

    def op_to_json(self, op: ops.Op) -> dict[str, Any]:
        return ops.op_to_json(op)

    def is_op(self, value: object) -> bool:
        return isinstance(value, ops.Op)

    def config(self, target: Target, geometry: Mapping[str, Any]) -> Config:
        return Config(int(geometry["block_size"]), int(geometry["num_gpu_blocks"]),
                      int(geometry["num_cpu_blocks"]), target.caps)

    def geometry(self, config: Config) -> dict[str, Any]:
        return {"block_size": config.block_size, "num_gpu_blocks": config.num_gpu_blocks,
                "num_cpu_blocks": config.num_cpu_blocks}


class V0Family:
    """The v0 block-manager family."""

    name: str = "v0"
    description: str = ("vLLM v0 / Aphrodite block manager "
                        "(CpuGpuBlockAllocator.create factories)")
    default_spec: str = DEFAULT_SPEC
    machines: Path = Path(__file__).resolve().parent
    out_of_contract: type[Exception] = OutOfContract
    invariants: type[Invariants] = Invariants
    vocabulary: V0Vocabulary = V0Vocabulary()
    #: ``prefix_caching`` (the default) or ``naive``: separate implementations.
    allocator_types: tuple[str, ...] = ("prefix_caching", "naive")
    #: Handle kinds (shrinking): blocks and block tables, by the operation fields naming them.
    handle_fields: Mapping[str, tuple[str, ...]] = {"block": ("prev", "block", "blocks"),
                                                    "table": ("table",)}
    pool_fields: tuple[tuple[str, int], ...] = (("num_gpu_blocks", 1), ("num_cpu_blocks", 0))
    tolerable: Mapping[str, str] = TOLERABLE

    def mechanism_kind(self, kind: str) -> str:
        """The allocator call operation ``kind`` amounts to (its ``amounts_to``)."""
        op = ops.OPS_BY_KIND.get(kind)
        return kind if op is None or op.amounts_to is None else op.amounts_to

    def accepts(self, spec_or_factory: str | Callable[..., Any]) -> bool:
        """A callable (not a class) taking ``(allocator_type, num_gpu_blocks, num_cpu_blocks,
        block_size)`` positionally."""
        try:
            factory = resolve(spec_or_factory) if isinstance(spec_or_factory, str) \
                else spec_or_factory
        except TargetError:
            return False
        if isinstance(factory, type):
            return False
        try:
            inspect.signature(factory).bind("prefix_caching", 2, 2, 2)
        except (TypeError, ValueError):
            return False
        return True

    def load_target(self, spec: str | None = None,
                    options: TargetOptions | None = None) -> Target:
        """Resolve ``spec`` (default: ``$PREFIXCACHE_ALLOCATOR``, else the bundled allocator)
        and detect its capabilities on a tiny instance. Whatever the probe instance does wrong
        (raises, returns something that is not an allocator) is a :class:`TargetError`."""
        options = options or TargetOptions()
        allocator_type = options.allocator_type or self.allocator_types[0]
        if allocator_type not in self.allocator_types:
            raise TargetError(f"the v0 family's allocator types are "
                              f"{', '.join(self.allocator_types)}, not {allocator_type!r}")
        disable, step_timeout = options.disable, options.step_timeout
        spec = spec or os.environ.get(ENV_VAR) or DEFAULT_SPEC
        factory = resolve(spec)
        package = package_of(factory, spec)
        claims = claims_of(factory, spec)
        misuse = tuple(resolve_types(claims.get("misuse_errors", ())))
        try:
            extra_key_function = claims.get("extra_key_function")
            probe = FamilyAdapter(factory(allocator_type, 2, 2, 2), 2, misuse,
                                  extra_key_function)
            introspection = probe.introspect() is not None
            tracker_switch = probe.tracker_caching_switch()
        except Exception as exc:  # a factory that cannot build a tiny pool is not a target
            raise TargetError(f"{spec!r} failed to create a 2+2-block allocator: "
                              f"{type(exc).__name__}: {exc}") from exc
        if probe.has_aphrodite_api and probe.has_vllm_api:
            generation = Generation.BOTH
        elif probe.has_vllm_api:
            generation = Generation.VLLM
        else:
            generation = Generation.APHRODITE
        prefix = allocator_type == "prefix_caching"
        caps = Capabilities(
            prefix_caching=prefix,
            lru=prefix and bool(claims.get("lru", True)),
            swap=True,
            extra_keys=probe.has_extra_hash,
            extra_key_fields=probe.extra_key_fields,
            key_builder=probe.extra_key_function is not None,
            generation=generation,
            atomic=bool(claims.get("atomic", False)),
            typed_errors=bool(claims.get("typed_errors", False)) and bool(misuse),
            introspection=introspection,
            tracker_caching_switch=tracker_switch,
        )
        disabled = tuple(disable)
        if disabled:
            caps = caps.without(*disabled)
        version = str(claims.get("version") or version_of(package))
        target = Target(spec, factory, caps, str(claims.get("name", package)), version,
                        family=self.name, allocator_type=allocator_type, misuse_types=misuse,
                        step_timeout=step_timeout_setting(step_timeout), claims=dict(claims))
        return replace(target, description=self.describe(target))

    def create(self, target: Target, config: Config) -> Any:
        return target.factory(target.allocator_type, config.num_gpu_blocks,
                              config.num_cpu_blocks, config.block_size,
                              **dict(target.factory_kwargs))

    def adapter(self, target: Target, config: Config) -> FamilyAdapter:
        return FamilyAdapter(self.create(target, config), config.block_size,
                             target.misuse_types, extra_key_function(target))

    def describe(self, target: Target) -> str:
        caps = target.caps
        on = [n for n in ("prefix_caching", "lru", "swap", "extra_keys", "atomic",
                          "typed_errors", "introspection") if getattr(caps, n)]
        return (f"{target.name} {target.version} ({target.spec}, {target.allocator_type}); "
                f"API {caps.generation.value}; features: {', '.join(on) or 'none'}")

    def tolerating(self, caps: Capabilities, names: frozenset[str]) -> Capabilities:
        return tolerating(caps, names)

    def judge(self, target: Target, config: Config) -> V0Judge:
        return V0Judge(target, config)

    def runner(self, target: Target, config: Config) -> Runner:
        """The runner alone (no model): the calls of a program as the engine makes them."""
        return Runner(target, config)

    def oracle(self, config: Config) -> Oracle:
        """The model alone."""
        return Oracle(config)

    def made(self, step: Any) -> dict[str, tuple[int, ...]]:
        outcome = step.outcome
        return {"block": outcome.new_blocks,
                "table": () if outcome.new_table is None else (outcome.new_table,)}

    def tokens_of(self, op: Any) -> Iterator[int]:
        """The ints an operation hands the target's hash: tokens, and an int extra hash."""
        yield from getattr(op, "tokens", ())
        for chunk in getattr(op, "chunks", ()):
            yield from chunk
        extra = getattr(op, "extra_hash", None)
        if type(extra) is int:
            yield extra

    def smaller_ops(self, op: ops.Op, made: Mapping[str, tuple[int, ...]]
                    ) -> Iterator[tuple[ops.Op, dict[str, tuple[int, ...]]]]:
        """A chain allocation with one chunk less (last chunks first): a chain longer than
        the failure needs may be what keeps other operations (a free to make room) in the
        program."""
        blocks = made.get("block", ())
        if not isinstance(op, ops.AllocateImmutableChain) or \
                not 2 <= len(op.chunks) <= MAX_CHUNKS or len(blocks) != len(op.chunks):
            return  # ``made`` short: the allocation did not complete, nothing to renumber
        for j in reversed(range(len(op.chunks))):
            chunks = op.chunks[:j] + op.chunks[j + 1:]
            yield dataclasses.replace(op, chunks=chunks), {"block": (blocks[j],)}

    def script(self, target: Target, config: Config, steps: Sequence[Any],
               judge: Any | None = None) -> Script:
        """Build ``alloc`` with the factory, import ``Device`` and ``BlockTable`` from the
        modules the target's adapter uses (the allocator is created first: a loader-backed
        target registers those modules when it builds one), then the calls the runner logged;
        ``__main__`` replays the program with ``properties.core.replay.check_program``."""
        adapter = judge.adapter if judge is not None else self.adapter(target, config)
        module, _, path = target.spec.partition(":")
        root = path.split(".", 1)[0]
        extra = "".join(f", {k}={v!r}" for k, v in target.factory_kwargs)
        body = [
            f"from {module} import {root}",
            "",
            f"alloc = {path}({target.allocator_type!r}, {config.num_gpu_blocks}, "
            f"{config.num_cpu_blocks}, {config.block_size}{extra})",
            f"from {adapter.device_enum.__module__} import Device  # noqa: E402, F401",
            f"from {adapter.block_table_cls.__module__} import BlockTable  # noqa: E402, F401",
            *logged_calls(steps),
        ]
        check = [
            "from properties.families.v0.replay import check_program",
            f"check_program({target.spec!r}, {target.allocator_type!r}, "
            f"{config.block_size}, {config.num_gpu_blocks}, {config.num_cpu_blocks},",
            f"              {program_json(steps, self.vocabulary)!r}{family_arg(target)})",
        ]
        return Script(body, check)

    # ----------------------------------------------------------------- weak-hash mode

    #: The machines a fuzzer may run with the weak hash injected (``--weak-hash``): content
    #: that collides under it must then be caught (HASH or CONTENT).
    weak_hash_levels: tuple[str, ...] = ("block_level", "sequence_level")

    def weak_hash_target(self, level: Any) -> Target:
        """The bundled allocator with :func:`fuzz.families.v0.weak_hash.weak_hash` as its
        hash function."""
        from fuzz.families.v0.weak_hash import weak_hash

        return self.load_target(DEFAULT_SPEC).with_kwargs(hash_function=weak_hash)

    # ----------------------------------------------------------------- fuzz tools
    # (fuzz.core.tools: Traces, Zoo; fuzz/families/v0/tools.py does the work)

    @property
    def traces_dir(self) -> Path:
        from fuzz.families.v0.tools import TRACES_DIR

        return TRACES_DIR

    def replay_trace(self, path: Path, target: Target) -> TraceReplay:
        from fuzz.families.v0.tools import replay_trace

        return replay_trace(path, target)

    def record_traces(self, out: Path) -> list[tuple[Path, int]]:
        from fuzz.families.v0.tools import record_traces

        return record_traces(out)

    def zoo(self) -> Mapping[str, ZooMutant]:
        from fuzz.families.v0.tools import zoo

        return zoo()


#: The object the registry loads (entry point ``prefixcache.families`` ``v0``); typed as the
#: protocol so mypy checks that the family implements all of it.
FAMILY: Family = V0Family()


def extra_key_function(target: Target) -> str | None:
    """The target's claim that renders ``ExtraKey`` values (``module:callable``), if any."""
    value = target.claims.get("extra_key_function")
    return None if value is None else str(value)

