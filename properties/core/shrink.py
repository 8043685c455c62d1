"""Program-level shrinking: a shorter program that still fails with the same family.

Hypothesis shrinks rule by rule, and one rule may run several operations (a sweep, a request's
whole lifecycle), so its minimal example can still carry operations the failure does not need.
This shrinks the executed program itself, by replaying candidates through
:func:`properties.core.replay.run_program`: drop a run of operations (for a family with
:class:`~properties.core.roles.HandleShrinking`, with every later operation that uses a handle
they created, renumbering the rest), and keep the candidate if it still fails with the same
invariant; then try smaller pools (:class:`~properties.core.roles.PoolShrinking`). Every kept
program is a real, replayable counterexample.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from models.core.invariants import Invariant, Violation
from properties.core.family import Family as AllocatorFamily
from properties.core.family import Step
from properties.core.replay import run_program
from properties.core.roles import HandleShrinking, PoolShrinking
from properties.core.targets import Target

Op = Any  # an operation of the target's family
Config = Any  # the target's family's pool shape


@contextmanager
def quiet() -> Iterator[None]:
    """The bundled allocator logs a warning on every refused ``reset_prefix_cache``."""
    logger = logging.getLogger("prefixcache")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


#: Which violations count as the same failure while shrinking (default: the same family).
Keep = Callable[[Violation], bool]


def _same_family(found: Violation) -> Keep:
    family: Invariant = found.family
    return lambda violation: violation.family is family


#: Set on a violation a candidate raised while shrinking: that candidate, up to its failing
#: operation (a ``Keep`` that judges by what ran before the failure reads it).
REPLAYED_ATTR = "prefixcache_replayed"


def replayed(violation: Violation) -> list[Op] | None:
    """The candidate program that raised ``violation`` while shrinking (None: not shrinking)."""
    return getattr(violation, REPLAYED_ATTR, None)


def _replay(target: Target, config: Config, program: Sequence[Op],
            keep: Keep) -> Violation | None:
    """The violation ``program`` raises if ``keep`` accepts it (anything else: None)."""
    try:
        with quiet():
            run_program(target, config, program)
    except Violation as violation:
        stop = len(program) if violation.step is None else violation.step + 1
        setattr(violation, REPLAYED_ATTR, list(program[:stop]))
        return violation if keep(violation) else None
    except Exception:  # out of contract, or a candidate the oracle cannot judge
        return None
    return None


#: Per handle kind (the family's ``handle_fields`` keys), the handles one operation made.
Made = Mapping[str, tuple[int, ...]]


def _kinds(family: AllocatorFamily) -> Mapping[str, tuple[str, ...]]:
    return family.handle_fields if isinstance(family, HandleShrinking) else {}


def _handles(target: Target, config: Config, program: Sequence[Op]) -> list[Made]:
    """The handles each operation created when ``program`` ran, in creation order (none
    after a step the target could not complete)."""
    family = target.family_object
    made: list[Made] = [family.made(step) for step in executed(target, config, program)] \
        if isinstance(family, HandleShrinking) else []
    made += [{}] * (len(program) - len(made))
    return made


def _uses(family: AllocatorFamily, op: Op) -> dict[str, set[int]]:
    """Per handle kind, the handles ``op`` names (the family's handle fields), those of the
    call it wraps (a ``call`` field holding an operation) included."""
    used: dict[str, set[int]] = {}
    for kind, names in _kinds(family).items():
        out = used.setdefault(kind, set())
        for name in names:
            value = getattr(op, name, None)
            if isinstance(value, int):
                out.add(value)
            elif isinstance(value, tuple):
                out.update(value)
    call = getattr(op, "call", None)
    if used and family.vocabulary.is_op(call):
        for kind, inner in _uses(family, call).items():
            used[kind] |= inner
    return used


def _renumber(family: AllocatorFamily, op: Op, gone: Mapping[str, list[int]]) -> Op:
    if not any(gone.values()):
        return op
    changes: dict[str, object] = {}
    for kind, names in _kinds(family).items():
        dropped = gone.get(kind, [])
        for name in names:
            value = getattr(op, name, None)
            if isinstance(value, int):
                changes[name] = value - sum(1 for g in dropped if g < value)
            elif isinstance(value, tuple):
                changes[name] = tuple(h - sum(1 for g in dropped if g < h) for h in value)
    call = getattr(op, "call", None)
    if family.vocabulary.is_op(call):
        changes["call"] = _renumber(family, call, gone)
    return dataclasses.replace(op, **changes) if changes else op


def _without(family: AllocatorFamily, program: Sequence[Op], made: Sequence[Made], start: int,
             stop: int, edit: tuple[int, Op, Made] | None = None) -> list[Op]:
    """``program`` minus operations ``start..stop-1`` and every later one that uses a handle
    a dropped operation created, with the remaining handles renumbered. ``edit`` (index, op,
    handles it no longer creates) also replaces one operation by a smaller one."""
    gone: dict[str, set[int]] = {kind: set() for kind in _kinds(family)}
    kept: list[Op] = []
    for index, op in enumerate(program):
        used = _uses(family, op)
        if start <= index < stop or any(used[k] & gone[k] for k in used):
            for kind, handles in made[index].items():
                gone[kind].update(handles)
        elif edit is not None and edit[0] == index:
            kept.append(edit[1])
            for kind, handles in edit[2].items():
                gone[kind].update(handles)
        else:
            kept.append(op)
    dropped = {kind: sorted(handles) for kind, handles in gone.items()}
    return [_renumber(family, op, dropped) for op in kept]


def _smaller_ops(family: AllocatorFamily, program: Sequence[Op],
                 made: Sequence[Made]) -> Iterator[list[Op]]:
    """Candidates with one operation replaced by a smaller variant of it (the family's
    :meth:`~properties.core.roles.HandleShrinking.smaller_ops`; last operations first)."""
    if not isinstance(family, HandleShrinking):
        return
    for index in reversed(range(len(program))):
        for smaller, dropped in family.smaller_ops(program[index], made[index]):
            yield _without(family, program, made, 0, 0, (index, smaller, dropped))


def shrink(target: Target, config: Config, program: Sequence[Op],
           found: Violation, keep: Keep | None = None) -> tuple[list[Op], Violation]:
    """A shorter program failing with ``found``'s family, or as ``keep`` says (delta
    debugging, runs of halving length, to a fixpoint). Returns the program, cut at its
    failing step, and its violation."""
    keep = keep or _same_family(found)
    family = target.family_object
    current = list(program)
    violation = _replay(target, config, current, keep)
    if violation is None or violation.step is None:
        return current, found  # not replayable as a program: report it as found
    current = current[: violation.step + 1]
    made = _handles(target, config, current)
    size = max(1, len(current) // 2)
    while True:
        shrunk = False
        stop = len(current)
        while stop > 0:
            start = max(0, stop - size)
            candidate = _without(family, current, made, start, stop)
            result = _replay(target, config, candidate, keep) if candidate else None
            if result is not None and result.step is not None:
                current, violation = candidate[: result.step + 1], result
                made = _handles(target, config, current)
                shrunk = True
            stop = min(start, len(current))
        if not shrunk and size == 1:
            for candidate in _smaller_ops(family, current, made):
                result = _replay(target, config, candidate, keep)
                if result is not None and result.step is not None:
                    current, violation = candidate[: result.step + 1], result
                    made = _handles(target, config, current)
                    shrunk = True
                    break
        if not shrunk:
            if size == 1:
                return current, violation
            size //= 2


#: Pools up to this many ids in all (the machines' configs) are shrunk; larger ones belong to
#: dedicated programs whose size is the point.
MAX_SHRUNK_POOL = 32


def shrink_with_pools(target: Target, config: Config, program: Sequence[Op],
                      found: Violation, keep: Keep | None = None
                      ) -> tuple[Config, list[Op], Violation]:
    """:func:`shrink`, then the smallest pools (each of the family's pool fields) the shrunk
    program still fails on
    with the same family (a smaller pool needs fewer allocations to fill), shrinking the program
    again after each smaller pool. Returns the config, the program and its violation."""
    keep = keep or _same_family(found)
    program, violation = shrink(target, config, program, found, keep)
    family = target.family_object
    pools = family.pool_fields if isinstance(family, PoolShrinking) else ()
    if pools and sum(getattr(config, name) for name, _ in pools) > MAX_SHRUNK_POOL:
        return config, program, violation  # a dedicated program (long chain): its size is it
    for name, least in pools:  # each pool in turn, once the ones before it are final
        candidates = [dataclasses.replace(config, **{name: n})
                      for n in range(least, getattr(config, name))]
        for smaller in candidates:
            result = _replay(target, smaller, program, keep)
            if result is not None and result.step is not None:
                config = smaller
                program, violation = shrink(target, config, program[: result.step + 1], result,
                                            keep)
                break
    return config, program, violation


#: Longer programs are reported as found: delta debugging replays them O(n log n) times.
MAX_SHRUNK_STEPS = 400


def executed(target: Target, config: Config, program: Sequence[Op]) -> list[Step]:
    """The judge's log of ``program`` up to its first failing step (for a reproducer)."""
    family = target.family_object
    with quiet():
        try:
            judge = family.judge(target, config)
        except (Violation, family.out_of_contract):
            return []
        for op in program:
            try:
                judge.step(op)
            except (Violation, family.out_of_contract):
                break
    return list(judge.log)


def shrunk_log(target: Target, config: Config, log: Sequence[Step], found: Violation,
               keep: Keep | None = None) -> tuple[Config, list[Step], Violation] | None:
    """The shortest failing program :func:`shrink_with_pools` finds for the executed ``log``
    (its config, log and violation), or None if it is no shorter or not replayable."""
    program = [step.op for step in log]
    if not program or len(program) > MAX_SHRUNK_STEPS:
        return None
    config, shorter, violation = shrink_with_pools(target, config, program, found, keep)
    if violation is found or len(shorter) >= len(program):
        return None
    return config, executed(target, config, shorter), violation
