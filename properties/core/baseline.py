"""Deviations a run found, one per signature (:mod:`properties.core.signature`), and the xfails
file (``--write-xfails``) written from them: the baseline a user adopts, then ratchets.

A :class:`Deviation` carries what replays it without extra flags: the pool shape, the allocator
type it was found with, the (shrunk) program as JSON operations and its reproducer script.
Deviations travel as JSON-able dicts (``to_json``), so pytest-xdist workers can report them to
the controller, which merges them (:func:`merge`): counts add up, the shortest program wins.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from models.core.invariants import Measure, Violation, worst_of
from properties.core.signature import Signature, message_regex, signature

if TYPE_CHECKING:
    from properties.core.family import Step
    from properties.core.shrink import Keep
    from properties.core.targets import Target

#: Set on a violation by the machines and the corpus replay: how to replay it.
FOUND_ATTR = "prefixcache_found"
#: Set on a violation an adopted entry matched but for its recorded size (the ratchet): how.
WORSE_ATTR = "prefixcache_worse"


@dataclass(frozen=True, slots=True)
class Found:
    """The replayable program behind a violation (attached as ``FOUND_ATTR``)."""

    config: dict[str, int]
    program: list[dict[str, Any]]
    allocator_type: str
    script: str
    violation: Violation  # the one the program raises (after shrinking: the shrunk one's)


def attach(violation: Violation, geometry: Mapping[str, int],
           program: Sequence[dict[str, Any]], allocator_type: str, script: str,
           shown: Violation | None = None) -> None:
    """Record on ``violation`` the program (JSON operations, run on a pool of ``geometry``;
    ``shown``: the violation that program raises, when it is a shrunk program and not the one
    ``violation`` came from)."""
    setattr(violation, FOUND_ATTR, Found(dict(geometry), list(program), allocator_type, script,
                                         shown or violation))


def attach_run(violation: Violation, target: Target, config: Any, program: Sequence[Any],
               script: str, shown: Violation | None = None) -> None:
    """:func:`attach` the program of operations run against ``target`` with ``config``."""
    vocabulary = target.family_object.vocabulary
    attach(violation, vocabulary.geometry(config), [vocabulary.op_to_json(op) for op in program],
           target.allocator_type, script, shown)


def shrink_and_attach(target: Target, config: Any, log: list[Step], violation: Violation
                      ) -> tuple[Any, list[Step]] | None:
    """Shrink ``violation``'s executed program ``log`` to the shortest one with the same
    signature, render its reproducer and :func:`attach` it; return the shrunk pool and steps,
    or None when no shorter program fails that way (the program attached is then ``log``)."""
    from properties.core.reproducer import render_script  # the machines import this module
    from properties.core.shrink import shrunk_log

    sig = signature(violation, target.allocator_type)
    small = shrunk_log(target, config, log, violation,
                       keep=lambda v: signature(v, target.allocator_type) == sig)
    shown = violation
    if small is not None:
        config, log, shown = small
    script = render_script(target, config, log, shown)
    attach_run(violation, target, config, [step.op for step in log], script, shown)
    return None if small is None else (config, log)


def found_of(violation: Violation) -> Found | None:
    found = getattr(violation, FOUND_ATTR, None)
    return found if isinstance(found, Found) else None


@dataclass(slots=True)
class Deviation:
    """One distinct deviation: its signature, the shortest program showing it, and how often
    (examples, seeds) and where (tests) the run met it."""

    signature: Signature
    message: str  # the violation the program raises, as printed
    text: str  # its own message (what a ``match.message`` rule searches)
    config: dict[str, int]
    program: list[dict[str, Any]]
    script: str
    count: int = 1
    tests: list[str] = field(default_factory=list)
    #: The finding's sizes, the worst met (a written entry accepts no worse).
    measures: tuple[Measure, ...] = ()
    #: Set when an adopted entry matched but for its recorded size: how it is worse.
    worse: str = ""

    @property
    def family(self) -> str:
        return self.signature.family

    @property
    def steps_before(self) -> list[str]:
        """The operation kinds of its program before the failing one: the mechanism."""
        return [str(op["op"]) for op in self.program[:-1]]

    @property
    def key(self) -> str:
        """What tells deviations apart: the signature and the mechanism (a deviation with
        no program has none)."""
        return f"{self.signature.key()} | {' '.join(self.steps_before)}"

    def covers(self, history_kinds: Sequence[str]) -> bool:
        """Whether a violation of this signature after ``history_kinds`` (the kinds of the
        operations before it) is this deviation: they contain its mechanism, in order."""
        it = iter(history_kinds)
        return all(kind in it for kind in self.steps_before)

    @property
    def explanation(self) -> str:
        """One line: what was wrong, and at which operation kind."""
        what = (self.text.splitlines() or [self.signature.template])[0]
        return what if self.signature.op == "-" else f"{what} (at {self.signature.op})"

    def to_json(self) -> dict[str, Any]:
        return {"signature": self.signature.key(), "message": self.message, "text": self.text,
                "config": self.config, "program": self.program, "script": self.script,
                "count": self.count, "tests": list(self.tests),
                "measures": [m.to_json() for m in self.measures], "worse": self.worse}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Deviation:
        return cls(Signature.from_key(data["signature"]), data["message"], data["text"],
                   dict(data["config"]),
                   list(data["program"]), data["script"], int(data["count"]),
                   list(data["tests"]),
                   tuple(Measure.from_json(m) for m in data.get("measures", ())),
                   str(data.get("worse", "")))


def deviation(violation: Violation, test: str, allocator_type: str) -> Deviation:
    """The deviation ``violation`` shows (its attached program if any; ``allocator_type`` is
    the one the test ran when nothing is attached)."""
    found = found_of(violation)
    worse = str(getattr(violation, WORSE_ATTR, ""))
    if found is None:
        return Deviation(signature(violation, allocator_type), str(violation),
                         violation.message, {}, [], "", 1, [test], violation.measures, worse)
    shown = found.violation
    return Deviation(signature(shown, found.allocator_type), str(shown), shown.message,
                     found.config, found.program, found.script, 1, [test],
                     worst_of(violation.measures, shown.measures), worse)


def merge(into: dict[str, Deviation], new: Iterable[Deviation]) -> None:
    """Add ``new`` to ``into`` (keyed by signature): counts add up, tests are joined, and the
    shortest replayable program is kept."""
    for dev in new:
        key = dev.key
        old = into.get(key)
        if old is None:
            into[key] = Deviation(dev.signature, dev.message, dev.text, dev.config,
                                  dev.program, dev.script, dev.count, list(dev.tests),
                                  dev.measures, dev.worse)
            continue
        old.count += dev.count
        old.tests += [t for t in dev.tests if t not in old.tests]
        old.measures = worst_of(old.measures, dev.measures)
        old.worse = old.worse or dev.worse
        if dev.program and (not old.program or len(dev.program) < len(old.program)):
            old.message, old.text, old.config, old.program, old.script = (
                dev.message, dev.text, dev.config, dev.program, dev.script)


# --------------------------------------------------------------------------- mechanisms

#: A deviation's mechanism: the operation kinds of its shrunk program before the failing one.
Mechanism = tuple[str, ...]

#: Programs already shrunk in this process: (scope, signature, kinds) -> the shortest program
#: found, its pool and its violation.
_SHRUNK: dict[tuple[str, str, Mechanism], tuple[Any, list[Any], Violation]] = {}


def shrunk_of(target: Target, config: Any, program: Sequence[Any], violation: Violation,
              shrink: bool = True, keep: Keep | None = None, scope: str = ""
              ) -> tuple[Any, list[Any], Violation]:
    """The shortest program (its pool, its operations up to the failing one, its violation)
    with ``violation``'s signature (``properties.core.shrink``, as ``--all`` shrinks a new
    deviation), or whose failure ``keep`` accepts (``scope`` names it: the cache's key), found
    from ``program`` (run on a pool of ``config``, up to and including the failing operation,
    or further). A program too long to shrink, or one that does not replay, is its own, and so
    is any program when ``shrink`` is False (a family whose programs are shrunk by Hypothesis
    only). Cached per process by scope, signature and kinds."""
    from properties.core.shrink import MAX_SHRUNK_STEPS, shrink_with_pools

    stop = len(program) if violation.step is None else min(len(program), violation.step + 1)
    ran = list(program[:stop])
    kinds = tuple(str(op.kind) for op in ran[:-1])
    sig = signature(violation, target.allocator_type)
    key = (scope, sig.key(), kinds)
    known = _SHRUNK.get(key)
    if known is not None:
        return known
    found: tuple[Any, list[Any], Violation] = (config, ran, violation)
    if shrink and 1 < len(ran) <= MAX_SHRUNK_STEPS:
        shape, shorter, raised = shrink_with_pools(
            target, config, ran, violation,
            keep=keep or (lambda v: signature(v, target.allocator_type) == sig))
        found = (shape, list(shorter), raised)
    _SHRUNK[key] = found
    return found


def mechanism_of(target: Target, config: Any, program: Sequence[Any],
                 violation: Violation, shrink: bool = True) -> Mechanism:
    """The mechanism of ``violation``, raised by ``program`` (run on a pool of ``config``): the
    kinds before the failing operation of the shortest program with its signature
    (:func:`shrunk_of`)."""
    _, shorter, _ = shrunk_of(target, config, program, violation, shrink)
    return tuple(str(op.kind) for op in shorter[:-1])


def canonical(family: object, mechanism: Sequence[str]) -> Mechanism:
    """``mechanism`` as one defect's fingerprint: each kind as the call it amounts to (the
    family's :class:`~properties.core.roles.MechanismKinds`, if it has the role; none: left
    out) and each run of one call as one (filling a pool takes as many allocations as it has
    ids: its size, not its mechanism)."""
    from properties.core.roles import MechanismKinds

    kinds = [family.mechanism_kind(k) for k in mechanism] \
        if isinstance(family, MechanismKinds) else list(mechanism)
    kinds = [k for k in kinds if k]  # "": no allocator call (bookkeeping)
    return tuple(k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k)


@dataclass
class Resolver:
    """:func:`mechanism_of` a violation, computed on first call (entries that do not ask for
    it cost nothing); :meth:`absorbed` the one an entry absorbed."""

    target: Target
    config: Any
    program: Sequence[Any]
    violation: Violation
    shrink: bool = True
    _value: Mechanism | None = None

    def __call__(self) -> Mechanism:
        if self._value is None:
            self._value = mechanism_of(self.target, self.config, self.program, self.violation,
                                       self.shrink)
        return self._value

    def absorbed(self, entry_id: str, keep: Keep | None) -> Mechanism:
        """The mechanism the entry ``entry_id`` absorbed: the :func:`canonical` kinds of the
        shortest program whose failure the entry still accepts (``keep``). The consequences
        of one defect (a wrong table here, a leak there, after the same swap) converge on the
        defect's own shortest program; a failure the entry absorbs only by being wide keeps a
        program of its own. ``keep`` None: the signature's (:meth:`__call__`)."""
        family = self.target.family_object
        if keep is None:
            return canonical(family, self())
        # From the signature's shortest program (the machines' matching has it already, and
        # many programs shrink to it): one short shrink more per distinct one.
        config, program, violation = shrunk_of(self.target, self.config, self.program,
                                               self.violation, self.shrink)
        if not keep(violation):
            config, program, violation = self.config, list(self.program), self.violation
        _, shorter, _ = shrunk_of(self.target, config, program, violation, self.shrink, keep,
                                  scope=entry_id)
        return canonical(family, tuple(str(op.kind) for op in shorter[:-1]))


def mechanism_text(mechanism: Sequence[str]) -> str:
    return ", ".join(mechanism) or "nothing before it"


@dataclass
class Absorbed:
    """What one expected-failure entry absorbed in a run: each distinct mechanism and how often
    (machines and corpus), and the mechanism of its own program (its replay), if replayed."""

    entry_id: str
    mechanisms: dict[Mechanism, int] = field(default_factory=dict)
    own: Mechanism | None = None
    #: The entry's ``match.mechanism(s)`` and ``instances``: the triaged ways into its one
    #: defect, as :func:`canonical` mechanisms (none: its own program's alone).
    declared: tuple[Mechanism, ...] = ()
    #: One violation absorbed per mechanism (family and first line), to tell them apart.
    examples: dict[Mechanism, str] = field(default_factory=dict)

    def add(self, mechanism: Sequence[str], count: int = 1) -> None:
        key = tuple(mechanism)
        self.mechanisms[key] = self.mechanisms.get(key, 0) + count

    @property
    def reference(self) -> Mechanism | None:
        """The entry's own mechanism: its replay's, else the first declared."""
        return self.own if self.own is not None else (self.declared or (None,))[0]

    @property
    def distinct(self) -> list[Mechanism]:
        """The distinct mechanisms it absorbed, its own program's included."""
        out = list(self.mechanisms)
        if self.reference is not None and self.reference not in out:
            out.insert(0, self.reference)
        return out

    def unlike(self, mechanism: Mechanism) -> bool:
        """Whether ``mechanism`` is not one the entry stands for: it does not pass through
        (hold, in order) one the entry declares, else its own. Steps around the defect's own
        ones are how its consequence reached this observation (a fork before the swap that
        clobbers, a second allocation that reads the clobbered block); a mechanism without
        them is another way in."""
        stands = self.declared + ((self.reference,) if self.reference is not None else ())
        return bool(stands) and not any(_passes_through(mechanism, m) for m in stands)

    @property
    def too_wide(self) -> bool:
        """Absorbed a mechanism unlike its own program's (one that does not pass through it),
        or, without a program of its own, more than one (an entry that declares several, one
        defect's triaged instances: one that passes through none of them)."""
        if self.declared or self.reference is not None:
            return any(self.unlike(m) for m in self.distinct)
        return len(self.distinct) > 1

    def to_json(self) -> dict[str, Any]:
        return {"id": self.entry_id, "too_wide": self.too_wide,
                "own": None if self.reference is None else list(self.reference),
                "declared": [list(m) for m in self.declared],
                "mechanisms": [{"mechanism": list(m), "count": n,
                                "example": self.examples.get(m, "")}
                               for m, n in self.mechanisms.items()]}


def _passes_through(mechanism: Sequence[str], own: Sequence[str]) -> bool:
    """Whether ``mechanism`` holds every step of ``own``, in order (nothing before the
    failing call is a mechanism of its own, not one every other passes through)."""
    if not own:
        return not mechanism
    it = iter(mechanism)
    return all(kind in it for kind in own)


def absorbed_key(mechanism: Sequence[str]) -> str:
    """A mechanism as one string (JSON keys across xdist workers)."""
    return json.dumps(list(mechanism))


def absorbed_from_key(key: str) -> Mechanism:
    return tuple(str(k) for k in json.loads(key))


def absorbed_by_entry(entries: Sequence[Any], absorbed: Mapping[str, Absorbed],
                      family: object = None) -> list[Absorbed]:
    """One :class:`Absorbed` per entry of ``entries`` (expected failures: ``id`` and
    ``mechanisms``), in their order, with what the run absorbed (``absorbed``, by id); the
    entries' declared mechanisms are compared :func:`canonical` for ``family``."""
    out = []
    for e in entries:
        got = absorbed.get(e.id)
        declared = tuple(dict.fromkeys(canonical(family, m)
                                       for m in (*e.mechanisms, *e.instances)))
        one = Absorbed(e.id, dict(got.mechanisms) if got else {}, got.own if got else None,
                       declared, dict(got.examples) if got else {})
        out.append(one)
    listed = {e.id for e in entries}
    # Entries of another file that recorded what they absorbed (the v1 manager's own file).
    out += [Absorbed(i, dict(a.mechanisms), a.own, (), dict(a.examples))
            for i, a in absorbed.items() if i not in listed]
    return out


def absorbed_lines(rows: Sequence[Absorbed]) -> list[str]:
    """The per-entry lines of a report: each entry's distinct mechanisms absorbed (counts),
    those that absorbed more than one (or one unlike its own program's) flagged too wide."""
    lines: list[str] = []
    for row in rows:
        if not row.mechanisms and row.own is None:
            continue
        flag = "  TOO WIDE" if row.too_wide else ""
        lines.append(f"{row.entry_id}: {len(row.distinct)} distinct mechanism(s){flag}")
        if row.reference is not None:
            lines.append(f"    own program: {mechanism_text(row.reference)}")
        for mechanism, count in row.mechanisms.items():
            unlike = " (unlike its own)" if row.unlike(mechanism) else ""
            lines.append(f"    absorbed x{count}: {mechanism_text(mechanism)}{unlike}")
            if unlike and mechanism in row.examples:
                lines.append(f"        e.g. {row.examples[mechanism]}")
    return lines


# --------------------------------------------------------------------------- xfails files


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def entry(dev: Deviation, entry_id: str) -> dict[str, Any]:
    """An xfails entry (the plugin's format) for ``dev``, matching exactly its signature."""
    sig = dev.signature
    match: dict[str, Any] = {"message": message_regex(dev.text)}
    if sig.allocator_type:  # a family whose targets come in variants (roles.Variants)
        match["allocator_types"] = [sig.allocator_type]
    if sig.op != "-":
        match["ops"] = [sig.op]
    if dev.steps_before:
        match["after"] = [dev.steps_before]
    # Narrow by construction: only a violation whose own shrunk program has exactly these
    # operation kinds before the failing one (its mechanism) is this deviation.
    match["mechanism"] = dev.steps_before
    written: dict[str, Any] = {
        "id": entry_id,
        "family": sig.family,
        "class": "found by prefixcache, not yet classified",
        "explanation": f"{dev.explanation} (seen {dev.count} time(s) in "
                       f"{', '.join(dev.tests)})",
        **({"allocator_type": sig.allocator_type} if sig.allocator_type else {}),
        "config": dev.config,
        "program": dev.program,
        "match": match,
    }
    if dev.measures:
        written["measures"] = [m.to_json() for m in dev.measures]
    return written


def write_xfails(path: Path, deviations: Iterable[Deviation],
                 keep: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """Write ``keep`` (entries already adopted, unchanged) then one entry per replayable
    deviation to ``path``; returns the entries written. Ids are ``family-op-N``, unique."""
    entries = [dict(e) for e in keep]
    used = {str(e["id"]) for e in entries}
    for dev in sorted(deviations, key=lambda d: d.signature):
        if not dev.program:
            continue  # not replayable as a program (an error outside the machines' steps)
        base = _slug(f"{dev.signature.family}-{dev.signature.op}")
        n = 1
        while f"{base}-{n}" in used:
            n += 1
        used.add(f"{base}-{n}")
        entries.append(entry(dev, f"{base}-{n}"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entries, indent=2) + "\n", encoding="utf-8")
    return entries


# --------------------------------------------------------------------------- fresh replays


def unreproduced(path: Path, spec: str | None, disable: Sequence[str] = (),
                 ids: Iterable[str] | None = None, family: str | None = None) -> list[str]:
    """The ids (of ``ids``, default all) of the entries in the xfails file ``path`` whose
    program does not raise a violation they match when replayed in a fresh Python process:
    deviations that depend on per-process state (object-address hashes, string-hash seeds)."""
    wanted = None if ids is None else list(ids)
    if wanted == []:
        return []
    command = [sys.executable, "-m", "properties.core.baseline", str(path)]
    command += ["--allocator", spec] if spec else []
    command += ["--family", family] if family else []
    command += [f"--disable-feature={f}" for f in disable]
    command += [f"--id={i}" for i in wanted or ()]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"replaying {path} in a fresh process failed: {result.stderr}")
    return [str(i) for i in json.loads(result.stdout.strip().splitlines()[-1])]


def mark_flaky(path: Path, ids: Sequence[str]) -> None:
    """Mark entries of ``path`` whose replay did not reproduce in a fresh process."""
    if not ids:
        return
    entries = json.loads(path.read_text(encoding="utf-8"))
    for e in entries:
        if e["id"] in ids:
            e["flaky"] = True
            e["explanation"] += (" Flaky: its program did not reproduce in a fresh process "
                                 "when written (the target depends on per-process state); a "
                                 "replay that passes is reported as a skip.")
    path.write_text(json.dumps(entries, indent=2) + "\n", encoding="utf-8")


def _replay_main(argv: Sequence[str] | None = None) -> int:
    """``python -m properties.core.baseline FILE [--allocator SPEC] [--id ID]...``: print (JSON) the
    ids of the entries that do not reproduce in this process."""
    import argparse
    import logging

    from properties.core.plugin import load_expected
    from properties.core.replay import run_program
    from properties.core.targets import load_target

    parser = argparse.ArgumentParser(prog="python -m properties.core.baseline")
    parser.add_argument("xfails")
    parser.add_argument("--allocator", default=None)
    parser.add_argument("--family", default=None)
    parser.add_argument("--disable-feature", action="append", default=[])
    parser.add_argument("--id", action="append", default=None)
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    failed: list[str] = []
    for e in load_expected(args.xfails):
        if args.id is not None and e.id not in args.id:
            continue
        target = load_target(args.allocator, family=args.family,
                             allocator_type=e.allocator_type or None,
                             disable=args.disable_feature)
        vocabulary = target.family_object.vocabulary
        program = [vocabulary.op_from_json(op) for op in e.program]
        try:
            run_program(target, vocabulary.config(target, e.config), program)
        except Violation as violation:
            history = program[: (violation.step or 0) + 1]
            if e.matches(violation, history, e.allocator_type):
                continue
        failed.append(e.id)
    print(json.dumps(failed))
    return 0


if __name__ == "__main__":
    raise SystemExit(_replay_main())
