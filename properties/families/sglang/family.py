"""The SGLang family as the core sees it: the eleven names of
:class:`properties.core.family.Family`, and two roles (pool shrinking, handle shrinking), and
its zoo for ``python -m fuzz zoo`` (:class:`fuzz.core.tools.Zoo`).

A target is a radix cache class in the bundled reference's style (``RadixCache`` beside
``RadixKey``, ``CacheInitParams``, the parameter records and an ``allocator`` module: the
bundled reference and its zoo), or a callable returning a
:class:`~properties.families.sglang.targets.TreeTarget` (upstream's trees,
``properties.upstream:sglang_radix_cache`` and its siblings). The judge runs a scheduler's
calls (``models/families/sglang/ops.py``) at the tree level, with the FULL component only, and
at the request level (``properties/families/sglang/requests.py``) on targets whose driver has
the request API.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from models.families.sglang.invariants import SGLangInvariants
from models.families.sglang.model import OutOfContract
from models.families.sglang.ops import (
    OP_TYPES,
    Arrive,
    Evict,
    Finish,
    Match,
    ReleaseWindow,
    TreeConfig,
    Unlock,
    op_from_json,
    op_to_json,
)
from properties.core.family import Family, Script, TargetOptions
from properties.core.targets import Target, TargetError, speaks, step_timeout_setting
from properties.families.sglang import requests, slots
from properties.families.sglang.judge import Arrived, TreeJudge
from properties.families.sglang.swa_judge import SWATreeJudge
from properties.families.sglang.targets import (
    BUNDLED_SPEC,
    CACHE_METHODS,
    TreeTarget,
    tree_target,
)

if TYPE_CHECKING:
    from fuzz.core.tools import ZooMutant

#: Where a target is named when ``--allocator`` is not given.
ENV_VAR = "PREFIXCACHE_ALLOCATOR"
#: How this family is named by reference (the registry's ``module:attr`` form).
REF = "properties.families.sglang.family:FAMILY"


class SGLangVocabulary:
    """Operations (``arrive``, ``finish``, ``unlock``, ``evict``, ``match``; the allocator
    level's ``alloc``, ``alloc_extend``, ``alloc_extend_batch``, ``free``, ``probe``; the request
    level's ``admit``, ``chunk``, ``decode``, ``preempt``, ``resume``, ``complete``) and pools
    (``pages``, ``page_size``; with a window, ``window`` and ``swa_pages``), as JSON."""

    def op_to_json(self, op: Any) -> dict[str, Any]:
        if isinstance(op, slots.SLOT_OPS + requests.REQUEST_OPS):
            return op.to_json()
        return op_to_json(op)

    def op_from_json(self, data: Mapping[str, Any]) -> Any:
        if data.get("op") in slots.KINDS:
            return slots.from_json(data)
        if data.get("op") in requests.KINDS:
            return requests.from_json(data)
        return op_from_json(data)

    def is_op(self, value: object) -> bool:
        return isinstance(value, OP_TYPES + slots.SLOT_OPS + requests.REQUEST_OPS)

    def config(self, target: Target, geometry: Mapping[str, Any]) -> TreeConfig:
        return TreeConfig(int(geometry["pages"]), int(geometry["page_size"]),
                          int(geometry.get("window", 0)), int(geometry.get("swa_pages", 0)))

    def geometry(self, config: TreeConfig) -> dict[str, Any]:
        out: dict[str, Any] = {"pages": config.pages, "page_size": config.page_size}
        if config.window:
            out.update(window=config.window, swa_pages=config.swa_pages)
        return out


PRELUDE = '''
def arrive(tokens, extra_key=None):
    """match, lock the match, evict if short, alloc the rest of the page-aligned tokens."""
    matched, node, slots = tree.match(tokens, extra_key)
    lock = tree.lock(node) if matched else None
    need = len(tokens) // PAGE * PAGE - matched
    if tree.available_size() < need:
        print("evict", tree.evict(need - tree.available_size()))
    fresh = tree.alloc(need) if need else []
    if fresh is None:
        if lock is not None:
            tree.unlock(lock)
        requests.append(None)
    else:
        requests.append([tokens, extra_key, matched, slots + fresh, lock])
    print("arrive", matched, requests[-1] and requests[-1][3])


def finish(req, hold=False, prev_zero=False):
    """insert with prev_prefix_len = the match, unlock; hold: lock the inserted node."""
    tokens, extra_key, matched, slots, lock = requests[req]
    aligned = tokens[: len(tokens) // PAGE * PAGE]
    if aligned:
        print("insert", tree.insert(aligned, slots, extra_key, 0 if prev_zero else matched))
    if lock is not None:
        tree.unlock(lock)
    requests[req][4] = None
    if hold:
        matched, node, _ = tree.match(tokens, extra_key)
        requests[req][4] = tree.lock(node) if matched else None


def unlock(req):
    tree.unlock(requests[req][4])
    requests[req][4] = None
'''


#: The scheduler's helpers with a sliding window: ``arrive`` evicts full KV for what the full
#: pool lacks and SWA KV for what the SWA pool lacks.
SWA_PRELUDE = PRELUDE.replace(
    """    if tree.available_size() < need:
        print("evict", tree.evict(need - tree.available_size()))""",
    """    full, swa = tree.available_size(), tree.swa_available_size()
    if full < need or swa < need:
        print("evict", tree.evict(max(0, need - full), max(0, need - swa)))""")


def call_line(op: Any, config: TreeConfig) -> str:
    """One operation as a call of the prelude's helpers or the driver."""
    if isinstance(op, slots.SLOT_OPS + requests.REQUEST_OPS):
        return op.line(config)
    if isinstance(op, Arrive):
        extra = f", {op.extra_key!r}" if op.extra_key is not None else ""
        return f"arrive({list(op.tokens)}{extra})"
    if isinstance(op, Finish):
        flags = (", hold=True" if op.hold else "") + (", prev_zero=True" if op.prev_zero
                                                        else "")
        return f"finish({op.req}{flags})"
    if isinstance(op, Unlock):
        return f"unlock({op.req})"
    if isinstance(op, ReleaseWindow):
        return f"tree.release_swa(requests[{op.req}][4])"
    if isinstance(op, Evict):
        swa = f", {op.swa_num_tokens}" if config.window else ""
        return f"print('evict', tree.evict({op.num_tokens}{swa}))"
    return f"print('match', tree.match({list(op.tokens)}, {op.extra_key!r})[::2])"


class SGLangFamily:
    """See the module docstring."""

    name = "sglang"
    description = ("SGLang's radix prefix caches over token-slot allocators (tree and request "
                   "levels, FULL)")
    default_spec = BUNDLED_SPEC
    invariants = SGLangInvariants
    out_of_contract: type[Exception] = OutOfContract
    machines = Path(__file__).resolve().parent / "machines"
    vocabulary = SGLangVocabulary()
    #: Optional role (properties.core.roles.PoolShrinking): smaller pools replay shorter.
    pool_fields: tuple[tuple[str, int], ...] = (("pages", 1), ("swa_pages", 1))
    #: Optional role (properties.core.roles.HandleShrinking): requests, by their Arrive.
    handle_fields: Mapping[str, tuple[str, ...]] = {"req": ("req",), "hold": ("hold", "holds")}

    def zoo(self) -> Mapping[str, ZooMutant]:
        """Optional role (fuzz.core.tools.Zoo): the known-broken targets
        (``fuzz/families/sglang/zoo.py``), fuzzed through the machines."""
        from fuzz.families.sglang.zoo import zoo

        return zoo()

    def accepts(self, spec_or_factory: str | Callable[..., Any]) -> bool:
        """A class with a radix cache's methods, or a callable annotated to return a
        :class:`TreeTarget`; judged without building anything."""
        return speaks(spec_or_factory, self.default_spec, CACHE_METHODS, TreeTarget)

    def load_target(self, spec: str | None, options: TargetOptions | None = None) -> Target:
        """Resolve ``spec`` (default: ``$PREFIXCACHE_ALLOCATOR``, else the bundled cache) and
        build a small tree to see that it is one."""
        options = options or TargetOptions()
        if options.allocator_type or options.disable:
            raise TargetError("the sglang family has no allocator types and no features to "
                              "disable (each tree is its own target)")
        spec = spec or os.environ.get(ENV_VAR) or self.default_spec
        tree = tree_target(spec)
        try:
            probe = tree.create(8, 1)
            probe.sizes()
        except Exception as exc:
            raise TargetError(f"{spec!r} failed to build an 8-slot tree: "
                              f"{type(exc).__name__}: {exc}") from exc
        return Target(spec, tree.create, tree, tree.name, tree.version, family=self.name,
                      description=f"{tree.describe()} [{spec}]",
                      misuse_types=tree.misuse_types,
                      step_timeout=step_timeout_setting(options.step_timeout))

    def judge(self, target: Target, config: TreeConfig) -> TreeJudge:
        if bool(config.window) != bool(getattr(target.caps, "swa", False)):
            raise OutOfContract(f"{target.describe()} is not judged with window "
                                f"{config.window}")
        judge = SWATreeJudge if config.window else TreeJudge
        return judge(target.factory, config, spec=target.spec,
                     name=target.describe().split(" (")[0], misuse_types=target.misuse_types)

    def script(self, target: Target, config: TreeConfig, steps: Sequence[Any],
               judge: Any | None = None) -> Script:
        """The driver built from the spec, the scheduler's helpers, one call per step; then
        the same program replayed under the judge."""
        shape = f"{config.size}, {config.page_size}" + (
            f", {config.swa_size}, {config.window}" if config.window else "")
        probes = any(isinstance(step.op, slots.Probe) for step in steps)
        requested = any(isinstance(step.op, requests.REQUEST_OPS) for step in steps)
        prelude = (SWA_PRELUDE if config.window else PRELUDE + slots.PRELUDE) + (
            slots.PROBE_PRELUDE if probes else "") + (requests.PRELUDE if requested else "")
        body = ["from properties.families.sglang.targets import open_target", "",
                f"PAGE, SIZE, SPEC = {config.page_size}, {config.size}, {target.spec!r}",
                *([f"SHAPE = {slots.shape(config)!r}"] if probes else []),
                f"tree = open_target({target.spec!r}).create({shape})",
                "requests = []", *prelude.split("\n")]
        for i, step in enumerate(steps):
            body += [f"# step {i}: {step.op!r}", call_line(step.op, config)]
        body += ["# what the judge reads after every step: the free list and the sizes",
                 "print('free slots', sorted(tree.free_slots().elements()))",
                 "print('evictable, protected, total', tree.sizes())"]
        if config.window:
            body += ["print('free SWA slots', sorted(tree.swa_free_slots().elements()))",
                     "print('swa evictable, protected', tree.swa_sizes())"]
        program = [self.vocabulary.op_to_json(step.op) for step in steps]
        check = ["from properties.core.replay import check",
                 f"check({target.spec!r}, {self.vocabulary.geometry(config)!r}, [",
                 *[f"    {op!r}," for op in program],
                 f"], family={REF!r})"]
        return Script(body, check)

    # ------------------------------------------------------------------ handle shrinking

    def made(self, step: Any) -> Mapping[str, tuple[int, ...]]:
        outcome = step.outcome
        if isinstance(step.op, Arrive | requests.Admit):
            return {"req": (outcome.req,)} if isinstance(outcome, Arrived | requests.Admitted
                                                         ) else {"req": ()}
        return {}

    def smaller_ops(self, op: Any, made: Mapping[str, tuple[int, ...]]
                    ) -> Iterator[tuple[Any, Mapping[str, tuple[int, ...]]]]:
        if isinstance(op, Arrive | Match | requests.Admit):
            if op.extra_key is not None:
                yield replace(op, extra_key=None), {}
            for cut in range(len(op.tokens)):
                yield replace(op, tokens=op.tokens[:cut]), {}
        elif isinstance(op, Finish):
            if op.hold:
                yield replace(op, hold=False), {}
            if op.prev_zero:
                yield replace(op, prev_zero=False), {}
        elif isinstance(op, Evict):
            for n in range(op.num_tokens):
                yield Evict(n, op.swa_num_tokens), {}
            for n in range(op.swa_num_tokens):
                yield Evict(op.num_tokens, n), {}
        elif isinstance(op, requests.Chunk):
            if not op.publish:
                yield replace(op, publish=True), {}
            for n in range(1, op.tokens):
                yield replace(op, tokens=n), {}
        elif isinstance(op, requests.Decode) and op.token:
            yield replace(op, token=0), {}
        elif isinstance(op, slots.Take):
            for pages in range(1, op.pages):
                yield slots.Take(pages), {}
        elif isinstance(op, slots.Give) and op.how != "free":
            yield replace(op, how="free"), {}
        elif isinstance(op, slots.Probe):
            for arg in range(op.arg):
                yield replace(op, arg=arg), {}


FAMILY: Family = SGLangFamily()
