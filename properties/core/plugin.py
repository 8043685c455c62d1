"""The pytest plugin (entry point ``pytest11: prefixcache``).

Options: ``--allocator module:factory`` (env ``PREFIXCACHE_ALLOCATOR``), ``--family NAME``,
``--allocator-type NAME`` (the family's variants, :class:`properties.core.roles.Variants`),
``--disable-feature NAME`` (repeatable), ``--max-examples``, ``--max-steps``,
``--step-timeout SECONDS`` (env ``PREFIXCACHE_STEP_TIMEOUT``, default 10, ``0``: no limit; a
step that outlives it fails as a hang), ``--xfails-file`` and
``--skips-file``. The profile is Hypothesis's own
``--hypothesis-profile`` (our profiles are registered on import; see ``profiles.py``).

Expected failures (``--xfails-file``) are deterministic. Each entry is
``{id, family, explanation, config, program}`` plus optional ``class`` (free text: real bug,
design deviation, ...), ``allocator_type`` (the variant of the target it was found with and is
replayed with; absent: the family's default), ``flaky`` (see ``--write-xfails``) and
``match``, which narrows or widens what the entry covers: ``{"families": [...], "ops": [kinds],
"message": regex, "after": [[kinds], ...], "tokens": [...], "allocator_types": [...]}``. A
violation
*matches* an entry when its family is the entry's (or one of ``families``: one upstream defect
often surfaces as several families, depending on what reads the corrupted state) and, where
given, it fired at an operation of one of ``ops``, ``message`` is found in its message
(``re.search``), the operations it needs contain one of the ``after`` sequences of kinds as a
subsequence (e.g. ``[["allocate", "free"]]``: an allocation, later a free; read in its shrunk
mechanism where that is computed, so a program that merely held those operations before an
unrelated failure is not absorbed, else in the program before it), and the program so
far used one of the ``tokens`` (e.g. the values Python's ``hash`` folds onto small ints), and it was
raised by an allocator of one of the ``allocator_types``. The first
matching entry wins, so list narrow entries before broad ones. Other keys (``observe``, used by
``conformance/render_reproducers.py``) are ignored.

- Replay: each entry's program is replayed as its own test (``test_expected_failure[id]``); it
  must still raise a matching violation (reported as xfail), else the entry is stale and the
  test fails ("no longer fails: remove the entry"); a violation of another family fails too.
- Absorption: inside the state machines, a matching violation ends that example quietly (the
  remaining steps of the example are no-ops) and Hypothesis goes on generating, so a target
  with several known deviations is still checked for everything else. A state-machine test
  that absorbed violations and found nothing else is reported as xfail, naming the entries; a
  violation that matches no entry fails the test as usual (with shrinking and a reproducer).
  Mechanics: while an xfails file is loaded, ``OracleMachine.do`` is wrapped (restored at
  unconfigure); an exception the target's own code raises while being observed (e.g. a
  ``RecursionError`` reading a corrupted chain) becomes a CRASH violation so it can match.
- Tolerance: an entry may name deviations the model then accepts besides the contract
  (``"tolerate": [names]``, a family's :class:`~properties.core.roles.Tolerating` role), for a
  deviation nearly every example meets: absorbing it would end almost
  every example before anything else is checked. The state machines and every other entry's replay
  run with it (a target without the deviation still passes); the entry's own replay runs without it,
  so it still fails.
- The terminal summary lists, per entry, how many examples hit it.
- Ratchet on size: a finding that has a size carries it (``Violation.measures``: a weak key's
  spread in bits and colliding contents, a free-count error, a hit-rate error, ...). An entry
  may record ``"measures": [{name, value, direction}]`` (``--write-xfails`` records the worst
  the adoption run met); a violation whose value of a recorded name is worse (``direction``:
  ``higher is worse`` or ``lower is worse``) does not match it, so the gate fails, and the
  violation and the reports say "worse than the baseline".
- Mechanisms: when an entry absorbs a violation (machines, corpus, its own replay), the run
  computes the violation's mechanism, the operation kinds before the failing one of the shortest
  program with its signature (``properties.core.baseline.mechanism_of``, as ``--all`` shrinks a
  new deviation; cached per process), and reports per entry the distinct mechanisms it absorbed.
  What an entry absorbed is shrunk as the entry sees it (the shortest program whose failure
  it still accepts, so the consequences of one defect converge on the defect's own program)
  and compared as the calls it amounts to (``baseline.canonical``). An entry that absorbed a
  mechanism that does not pass through its own program's (hold its steps in order), or, with
  no program of its own, more than one, is *too wide*; ``--strict-xfails`` fails the session on
  it. ``"instances"`` lists other ways into the same defect that triage found (width only).
  ``match.mechanism`` (one list of kinds, what ``--write-xfails`` writes) or
  ``match.mechanisms`` (the triaged instances of one defect) narrows an entry to exactly those
  mechanisms.
- Releases: ``"versions": [...]`` limits an entry to targets of those releases
  (``Target.xfails_release``: the release the family maps the target's version to, e.g. a
  development build to its release; absent: every release). An entry for other releases
  absorbs nothing and its replay is skipped, naming them (:func:`expected_entries` holds the
  entries that apply; the report header counts the others).
  Likewise ``"requires": [...]``: optional judges the deviation needs (``Target.judges``, a
  family's detected judge components, e.g. the v1 pool's ``dynamo-router``).
- Generator features: ``"avoid": [names]`` asks the family's machines to leave those features
  out, so a run with a known deviation there still explores the rest (:func:`avoided`: the
  names the applicable entries give; each family's machines say which names they know).

While a state-machine test runs (any ``RuleBasedStateMachine``'s ``TestCase``), the collector's
young-generation threshold is raised (``properties.core.collector``) and restored after it.

``--all`` (``properties.core.signature``, ``properties.core.baseline``): every violation no entry
covers is a deviation; the first of each signature (family, allocator type, operation kind, message
template) is shrunk to the shortest program with that signature and collected, and from then on
absorbed like an entry (a later violation of that signature is the same deviation when its own
mechanism is the same). Under ``--all`` every example that ends at a deviation (an entry's or not)
is rejected, so it does not use the budget and `--all --xfails-file F` draws the examples of the run
that wrote F. A test that met deviations fails once, listing the new ones; reports carry them
(``user_properties``), so the xdist controller merges them by signature. ``--write-xfails FILE``
writes the ``--xfails-file`` entries unchanged, then one entry per new deviation (``match``: its
operation kind, allocator type, message template and exact mechanism; ``measures``: the worst
size met) and replays the new ones in a fresh process:
one that does not reproduce there is marked ``flaky``, and its replay test skips, with that reason,
when it passes.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import reject, settings
from hypothesis.errors import Unsatisfiable

import properties.core.profiles  # noqa: F401  (registers the profiles)
from models.core.invariants import Invariant, Invariants, InvariantSet, Measure, Violation, worst_of
from properties.core import baseline, robustness, selection
from properties.core.collector import machine_collector
from properties.core.determinism import fixed_constants
from properties.core.family import FamilyError
from properties.core.roles import TokenInputs
from properties.core.signature import signature
from properties.core.targets import Target, TargetError

Op = Any  # an operation of the target's family


@dataclass(frozen=True, slots=True)
class ExpectedFailure:
    """One xfails-file entry: the target fails ``family``; ``program`` shows it.

    ``ops`` (operation kinds) and ``message`` (a regex) narrow which violations it covers."""

    id: str
    family: Invariant
    explanation: str
    config: dict[str, int]
    program: list[dict[str, Any]]
    classification: str = ""
    families: tuple[Invariant, ...] = ()
    ops: tuple[str, ...] = ()
    message: str = ""
    after: tuple[tuple[str, ...], ...] = ()
    tokens: frozenset[int] = frozenset()
    tolerate: frozenset[str] = frozenset()
    allocator_type: str = ""  # the type it was found with, replayed with ("": the default)
    allocator_types: tuple[str, ...] = ()  # match only violations of these types
    flaky: bool = False  # its replay may pass (it did not reproduce in a fresh process)
    measures: tuple[Measure, ...] = ()  # the sizes adopted: a worse finding is not this one
    # Match only these shrunk mechanisms (``match.mechanism``: one; ``match.mechanisms``: the
    # triaged instances of one defect). Empty: any.
    mechanisms: tuple[tuple[str, ...], ...] = ()
    versions: tuple[str, ...] = ()  # the releases it applies to (empty: every release)
    avoid: frozenset[str] = frozenset()  # generator features the machines leave out
    # Other ways into this one defect, found by triage (``"instances"``): mechanisms its width
    # check accepts besides its own program's. Never used to match.
    instances: tuple[tuple[str, ...], ...] = ()
    # Optional judges its deviation needs (``"requires"``, e.g. the v1 pool's Dynamo router):
    # a target judged without one of them neither meets nor replays it.
    requires: frozenset[str] = frozenset()

    def applies(self, version: str, judges: frozenset[str] | None = None) -> bool:
        """Whether the entry applies to a target of release ``version`` judged by the
        optional ``judges`` (None: not asked)."""
        return (not self.versions or version in self.versions) and (
            judges is None or self.requires <= judges)

    def matches(self, violation: Violation, history: Sequence[Op] | None = None,
                allocator_type: str | None = None,
                mechanism: Callable[[], Sequence[str]] | None = None) -> bool:
        """Whether ``violation`` is this deviation; ``history`` is the program up to and
        including the failing operation (None: unknown, ``after`` and ``tokens`` unchecked),
        ``allocator_type`` the type of the allocator that raised it (None: unknown),
        ``mechanism`` computes its mechanism (``properties.core.baseline.mechanism_of``; None:
        unknown, ``match.mechanism(s)`` unchecked). A violation whose size is worse than a
        recorded ``measures`` value never matches (the ratchet: see :meth:`worse`)."""
        if not self.matches_but_size(violation, history, allocator_type, mechanism):
            return False
        return not self.worse(violation)

    def keep(self, allocator_type: str | None) -> Callable[[Violation], bool] | None:
        """Whether a failure met while shrinking one this entry absorbed is still this entry's
        (:meth:`matches_but_size` on the candidate that raised it): the shrinker's ``keep``
        for the mechanism the entry absorbed (``baseline.Resolver.absorbed``). None for an
        entry that matches by mechanism: what it absorbed is the mechanism it matched."""
        from properties.core.shrink import replayed

        if self.mechanisms:
            return None
        return lambda violation: self.matches_but_size(violation, replayed(violation),
                                                       allocator_type)

    def worse(self, violation: Violation) -> str:
        """How ``violation``'s sizes are worse than the recorded ones ("" when none is)."""
        recorded = {m.name: m for m in self.measures}
        return "; ".join(f"{m.name} {m.value:g} is worse than the baseline's "
                         f"{recorded[m.name].value:g} ({m.direction}; entry {self.id})"
                         for m in violation.measures
                         if m.name in recorded and m.worse_than(recorded[m.name]))

    def matches_but_size(self, violation: Violation, history: Sequence[Op] | None = None,
                         allocator_type: str | None = None,
                         mechanism: Callable[[], Sequence[str]] | None = None) -> bool:
        """:meth:`matches`, the recorded sizes aside."""
        if violation.family != self.family and violation.family not in self.families:
            return False
        if (self.allocator_types and allocator_type is not None
                and allocator_type not in self.allocator_types):
            return False
        if self.ops and getattr(violation.op, "kind", None) not in self.ops:
            return False
        if self.message and re.search(self.message, violation.message) is None:
            return False
        if history is None:
            return True
        if self.after:
            # What the failure needs, not what the program happened to hold: the shrunk
            # mechanism where it is known, else the program before the failing operation.
            kinds = list(mechanism()) if mechanism is not None else [
                op.kind for op in history[:-1]]
            if not any(_subsequence(seq, kinds) for seq in self.after):
                return False
        if self.tokens and not _uses_tokens(self.tokens, history):
            return False
        return (not self.mechanisms or mechanism is None
                or tuple(mechanism()) in self.mechanisms)


def _subsequence(wanted: Sequence[str], seen: Sequence[str]) -> bool:
    it = iter(seen)
    return all(kind in it for kind in wanted)


def _uses_tokens(tokens: frozenset[int], history: Sequence[Op]) -> bool:
    """Whether an operation of ``history`` hands the target's hash one of ``tokens`` (read by
    its family's :class:`~properties.core.roles.TokenInputs`, looked up once per history; a
    family without the role hands none)."""
    family = selection.chosen_family()
    if not isinstance(family, TokenInputs):
        return False
    return any(tokens & set(family.tokens_of(op)) for op in history)


def load_expected(path: str | None, invariants: InvariantSet | None = None
                  ) -> list[ExpectedFailure]:
    if not path:
        return []
    return parse_expected(json.loads(Path(path).read_text(encoding="utf-8")), invariants)


def parse_expected(data: Sequence[dict[str, Any]], invariants: InvariantSet | None = None
                   ) -> list[ExpectedFailure]:
    """The entries of an xfails file's JSON list (see the module docstring); ``invariants``:
    the target family's set, which every invariant an entry names must belong to (None: any
    name, matched by name)."""

    def named(name: str) -> Invariant:
        return invariants.lookup(name) if invariants is not None else Invariant(name, "")

    entries = []
    for e in data:
        match = e.get("match", {})
        entries.append(ExpectedFailure(
            e["id"], named(e["family"]), e["explanation"], e["config"], e["program"],
            str(e.get("class", "")), tuple(named(f) for f in match.get("families", ())),
            tuple(match.get("ops", ())), str(match.get("message", "")),
            tuple(tuple(seq) for seq in match.get("after", ())),
            frozenset(int(t) for t in match.get("tokens", ())),
            frozenset(str(name) for name in e.get("tolerate", ())),
            str(e.get("allocator_type", "")),
            tuple(str(t) for t in match.get("allocator_types", ())), bool(e.get("flaky")),
            tuple(Measure.from_json(m) for m in e.get("measures", ())),
            _mechanisms(match), tuple(str(v) for v in e.get("versions", ())),
            frozenset(str(f) for f in e.get("avoid", ())),
            tuple(tuple(str(k) for k in m) for m in e.get("instances", ())),
            frozenset(str(j) for j in e.get("requires", ()))))
    return entries


def _mechanisms(match: dict[str, Any]) -> tuple[tuple[str, ...], ...]:
    listed = ([match["mechanism"]] if "mechanism" in match else []) + list(
        match.get("mechanisms", ()))
    return tuple(tuple(str(k) for k in m) for m in listed)


def load_raw(path: str | None) -> list[dict[str, Any]]:
    """The entries of an xfails file as written (``--write-xfails`` keeps them unchanged)."""
    return json.loads(Path(path).read_text(encoding="utf-8")) if path else []


def tolerated_by(entries: Sequence[ExpectedFailure],
                 replaying: ExpectedFailure | None = None) -> frozenset[str]:
    """The deviations the model follows while ``entries`` are expected: every entry's
    ``tolerate``, except those of the entry whose own program is ``replaying``."""
    names: set[str] = set()
    for entry in entries:
        if entry is not replaying and entry.id != getattr(replaying, "id", None):
            names |= entry.tolerate
    return frozenset(names)


def matching(entries: list[ExpectedFailure], exc: BaseException) -> list[ExpectedFailure] | None:
    """The entries covering ``exc`` (a violation, or a group of them), or None if any part of
    it is unexpected. A violation raised by a machine step carries the program before it,
    so ``after`` and ``tokens`` conditions hold here exactly as during the run."""
    leaves = list(_leaves(exc))
    found: list[ExpectedFailure] = []
    for leaf in leaves:
        if not isinstance(leaf, Violation):
            return None
        history = getattr(leaf, "prefixcache_history", None)
        mechanism = getattr(leaf, "prefixcache_mechanism", None)
        replay = baseline.found_of(leaf)
        kind = replay.allocator_type if replay is not None else None
        entry = next((e for e in entries if e.matches(leaf, history, kind, mechanism)), None)
        if entry is None:
            return None
        found.append(entry)
    return found or None


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


# --------------------------------------------------------------------------- absorption

_EXPECTED = pytest.StashKey[list[ExpectedFailure]]()
_OBSERVED = pytest.StashKey[list[tuple[ExpectedFailure, Violation]]]()
_CALL = pytest.StashKey["_Call"]()
_hits: dict[str, int] = {}  # entry id -> hits, from the reports (so xdist workers count too)


@dataclass
class _Call:
    """What one test call observed: expected entries it hit, and under ``--all`` the
    deviations new to this process and the signatures (keys) of the repeats."""

    entries: list[ExpectedFailure]
    hits: list[tuple[ExpectedFailure, Violation]]
    explore: bool = False
    new: list[baseline.Deviation] = field(default_factory=list)
    repeats: Counter[str] = field(default_factory=Counter)
    # The worst sizes of the repeats (by key), and per entry id the mechanisms it absorbed
    # (``baseline.absorbed_key``) and its own program's (met by its replay).
    repeat_measures: dict[str, tuple[Measure, ...]] = field(default_factory=dict)
    mechanisms: dict[str, Counter[str]] = field(default_factory=dict)
    own: dict[str, str] = field(default_factory=dict)
    examples: dict[str, dict[str, str]] = field(default_factory=dict)  # a violation per one


@dataclass
class Progress:
    """Counters of the running test, for ``prefixcache check``'s progress line: examples
    (machine runs) and steps started, deviations (new or repeated) absorbed."""

    examples: int = 0
    steps: int = 0
    findings: int = 0
    ticker: Any = None  # called (no arguments) on every step, if set

    def reset(self) -> None:
        self.examples = self.steps = self.findings = 0


PROGRESS = Progress()

# Set for the duration of one test call.
_active: _Call | None = None
# Under --all: every deviation this process met, by signature key (absorbed from then on).
_known: dict[str, list[baseline.Deviation]] = {}
# The session's deviations, merged from the reports (on the xdist controller: all workers').
_session: dict[str, baseline.Deviation] = {}
# Per entry id, the mechanisms the expected failures absorbed (merged from the reports too).
_absorbed: dict[str, baseline.Absorbed] = {}


def expected_entries(config: pytest.Config) -> list[ExpectedFailure]:
    """The session's expected failures (``--xfails-file``) that apply to the selected target's
    release (``versions``; the target is loaded only when an entry names releases)."""
    entries = config.stash.get(_EXPECTED, [])
    if not any(e.versions or e.requires for e in entries):
        return entries
    target = _loaded()
    if target is None:  # the tests that need it report that themselves
        return entries
    return [e for e in entries if e.applies(target.xfails_release, target.judges)]


def avoided(config: pytest.Config) -> frozenset[str]:
    """The generator features the applicable expected failures ask the machines to leave out
    (``avoid``); which names it knows is each family's (an unknown one is its usage error)."""
    return frozenset(f for e in expected_entries(config) for f in e.avoid)


def exploring(config: pytest.Config) -> bool:
    """Whether ``--all`` is on: deviations are absorbed by signature and collected."""
    return bool(config.getoption("explore_all", False))


#: The session's robustness findings (misuse a target accepted), merged from the reports.
_robust: dict[str, robustness.Finding] = {}


def session_robustness() -> list[robustness.Finding]:
    """The session's robustness findings, first met first (:mod:`properties.core.robustness`)."""
    return list(_robust.values())


def session_deviations() -> list[baseline.Deviation]:
    """The distinct deviations of the session so far (first seen first)."""
    return list(_session.values())


def record(entry: ExpectedFailure, violation: Violation,
           mechanism: Sequence[str] | None = None, *, own: bool = False) -> None:
    """Note that the running test observed ``entry`` (used by the replay test too);
    ``mechanism``: the one it absorbed (``baseline.mechanism_of``), ``own``: met by replaying
    the entry's own program."""
    PROGRESS.findings += 1
    if _active is not None:
        _active.hits.append((entry, violation))
        if mechanism is not None:
            key = baseline.absorbed_key(mechanism)
            if own:
                _active.own[entry.id] = key
            else:
                _active.mechanisms.setdefault(entry.id, Counter())[key] += 1
            _active.examples.setdefault(entry.id, {}).setdefault(
                key, f"[{violation.family.value}] {violation.message}".splitlines()[0][:160])


def note_worse(entries: Sequence[ExpectedFailure], violation: Violation,
               history: Sequence[Op] | None, allocator_type: str | None,
               mechanism: Callable[[], Sequence[str]] | None = None) -> str:
    """When an entry matches ``violation`` but for its recorded size (the ratchet refused it),
    say so on the violation (a note, and ``baseline.WORSE_ATTR`` for the reports); returns how
    it is worse ("" when no entry matches that way)."""
    for entry in entries:
        if entry.matches_but_size(violation, history, allocator_type, mechanism):
            how = entry.worse(violation)
            if how:
                setattr(violation, baseline.WORSE_ATTR, how)
                violation.add_note(f"worse than the baseline: {how}")
                return how
    return ""


def absorbed_mechanisms() -> dict[str, baseline.Absorbed]:
    """Per entry id, the mechanisms the session's expected failures absorbed (merged from the
    reports, so on the xdist controller: all workers')."""
    return dict(_absorbed)


def known(violation: Violation, allocator_type: str, history: Sequence[Op],
          mechanism: Callable[[], Sequence[str]] | None = None) -> bool:
    """Whether ``violation``, raised after ``history`` (the failing operation last), is a
    deviation this process already met under ``--all``: one of its signature with its
    ``mechanism`` (``baseline.mechanism_of``; None: unknown, then one whose mechanism the
    history contains)."""
    return _covering(violation, allocator_type, history, mechanism) is not None


def _covering(violation: Violation, allocator_type: str, history: Sequence[Op],
              mechanism: Callable[[], Sequence[str]] | None = None
              ) -> baseline.Deviation | None:
    reps = _known.get(signature(violation, allocator_type).key(), [])
    if not reps:
        return None
    if mechanism is not None:
        # Exactly the mechanism a written entry matches (``match.mechanism``): the adoption
        # run counts as one deviation exactly what its entry will absorb.
        mine = list(mechanism())
        return next((dev for dev in reps if dev.steps_before == mine), None)
    kinds = [op.kind for op in history[:-1]]
    return next((dev for dev in reps if dev.covers(kinds)), None)


def absorb_new(violation: Violation, allocator_type: str, history: Sequence[Op],
               count: int = 1, shrink: Callable[[], None] | None = None,
               mechanism: Callable[[], Sequence[str]] | None = None) -> None:
    """Under ``--all``: collect ``violation`` (``count`` times) as a deviation of the running
    test. One already met (``known``, by its ``mechanism`` when given) only adds to its count;
    for a new one ``shrink`` is called first (it attaches the shortest program,
    ``properties.core.baseline.attach``)."""
    PROGRESS.findings += count
    if _active is None:
        return
    rep = _covering(violation, allocator_type, history, mechanism)
    if rep is not None:
        if any(d is rep for d in _active.new):
            rep.count += count
            rep.measures = worst_of(rep.measures, violation.measures)
        else:
            _active.repeats[rep.key] += count
            _active.repeat_measures[rep.key] = worst_of(
                _active.repeat_measures.get(rep.key, ()), violation.measures)
        return
    if shrink is not None:
        shrink()
    dev = baseline.deviation(violation, "", allocator_type)
    dev.count = count
    dev.measures = worst_of(dev.measures, violation.measures)
    _known.setdefault(dev.signature.key(), []).append(dev)
    _active.new.append(dev)


def observed(item: pytest.Item) -> list[tuple[ExpectedFailure, Violation]]:
    """The expected violations ``item`` observed (absorbed or replayed)."""
    return item.stash.get(_OBSERVED, [])


def _raised_by_target(exc: BaseException, target: Any) -> bool:
    """Whether the innermost frame of ``exc`` runs in the package of ``target``'s factory."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    package = str(getattr(target.factory, "__module__", None)
                  or target.spec.partition(":")[0]).split(".", 1)[0]
    module = str(tb.tb_frame.f_globals.get("__name__", ""))
    return module == package or module.startswith(package + ".")


def _shrink_new(machine: Any, violation: Violation) -> None:
    """Under ``--all``, a deviation met for the first time: shrink the machine's program to
    the shortest one with the same signature and attach it (``properties.core.baseline``)."""
    baseline.shrink_and_attach(machine.target, machine.config, list(machine.judge.log),
                               violation)


def _install_wrapper() -> Any:
    """Wrap ``OracleMachine.setup`` and ``do``: count examples and steps (``PROGRESS``) and,
    while an xfails file is loaded or ``--all`` is on, end an example quietly at a matching
    (or, under ``--all``, any) violation. Returns the originals for ``pytest_unconfigure``."""
    from properties.core.machine import OracleMachine

    original_setup, original = OracleMachine.setup, OracleMachine.do

    def setup(self: OracleMachine, config: Any) -> None:
        PROGRESS.examples += 1
        original_setup(self, config)

    def do(self: OracleMachine, op: Op) -> None:
        PROGRESS.steps += 1
        if PROGRESS.ticker is not None:
            PROGRESS.ticker()
        call = _active
        if call is None or not (call.entries or call.explore):
            original(self, op)
            return
        if self.absorbed:
            return
        try:
            try:
                original(self, op)
            except (Violation, self.family.out_of_contract):
                raise
            except Exception as exc:
                if not _raised_by_target(exc, self.target):
                    raise
                # e.g. reading ``content_hash`` of a corrupted (cyclic) chain while observing
                raise Violation(Invariants.CRASH, f"observing the target after {op.kind} "
                                f"raised {type(exc).__name__}: {exc}").at(
                                    op, len(self.judge.log) - 1) from exc
        except Violation as violation:
            history = [step.op for step in self.judge.log]
            kind = self.target.allocator_type
            mechanism = baseline.Resolver(self.target, self.config, history, violation)
            entry = next((e for e in call.entries
                          if e.matches(violation, history, kind, mechanism)), None)
            if entry is None:
                note_worse(call.entries, violation, history, kind, mechanism)
            if entry is not None:
                record(entry, violation, mechanism.absorbed(entry.id, entry.keep(kind)))
            elif call.explore:
                absorb_new(violation, kind, history,
                           shrink=functools.partial(_shrink_new, self, violation),
                           mechanism=mechanism)
            else:
                # Judged with its history and unexpected: report-time matching must not
                # absorb it as some entry whose ``after`` it was never checked against.
                violation.prefixcache_history = history  # type: ignore[attr-defined]
                violation.prefixcache_mechanism = mechanism  # type: ignore[attr-defined]
                raise
            self.absorbed = True
            if call.explore:
                # Under --all an example that ends at a deviation (expected or not) is
                # discarded: it does not use the budget, and Hypothesis draws another in its
                # place (up to its own limit of ten calls per example). Every deviation is
                # rejected the same way, first meetings and entries of --xfails-file alike,
                # so `--all --xfails-file F` draws exactly the examples of the run that
                # wrote F: the ratchet sees the same states as the adoption.
                reject()

    OracleMachine.setup = setup  # type: ignore[method-assign]
    OracleMachine.do = do  # type: ignore[method-assign]
    return original_setup, original


# --------------------------------------------------------------------------- hooks


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("prefixcache", "prefix-caching allocator conformance")
    group.addoption("--allocator", default=None,
                    help="target factory module:callable (default $PREFIXCACHE_ALLOCATOR or "
                         "the bundled allocator)")
    group.addoption("--family", default=None, metavar="NAME",
                    help="the target's allocator family (default: detected from the target)")
    group.addoption("--allocator-type", default=None, metavar="NAME",
                    help="the variant of the target to judge (default: its family's first)")
    group.addoption("--disable-feature", action="append", default=[], metavar="NAME",
                    help="treat a capability of the target as absent (its family names them)")
    group.addoption("--max-examples", type=int, default=None)
    group.addoption("--max-steps", type=int, default=None)
    group.addoption("--step-timeout", default=None, metavar="SECONDS",
                    help="per-step time limit for target calls (default "
                         "$PREFIXCACHE_STEP_TIMEOUT or 10; 0 disables it)")
    group.addoption("--xfails-file", default=None,
                    help="JSON list of expected failures (see the plugin docstring)")
    group.addoption("--skips-file", default=None,
                    help="JSON list of {test, reason}: tests to skip, each with its reason")
    group.addoption("--all", dest="explore_all", action="store_true", default=False,
                    help="keep exploring after a deviation: each distinct one (by signature) "
                         "is absorbed like an expected failure and reported once, shrunk")
    group.addoption("--write-xfails", default=None, metavar="FILE",
                    help="write the deviations found (and the --xfails-file entries) as an "
                         "xfails file")
    group.addoption("--strict-xfails", action="store_true", default=False,
                    help="fail the session when an expected failure is too wide: it absorbed "
                         "a mechanism that does not pass through its own program's")


_ORIGINAL_DO = pytest.StashKey[Any]()


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    try:
        selection.select(
            config.getoption("allocator") or os.environ.get("PREFIXCACHE_ALLOCATOR"),
            allocator_type=config.getoption("allocator_type"),
            disable=config.getoption("disable_feature"),
            step_timeout=config.getoption("step_timeout"),
            family=config.getoption("family"),
        )
    except (TargetError, FamilyError) as exc:
        raise pytest.UsageError(str(exc)) from None
    overrides: dict[str, Any] = {}
    if config.getoption("max_examples") is not None:
        overrides["max_examples"] = config.getoption("max_examples")
    if config.getoption("max_steps") is not None:
        overrides["stateful_step_count"] = config.getoption("max_steps")
    if overrides:
        name = f"{settings.get_current_profile_name()} with " + ", ".join(
            f"{k}={v}" for k, v in overrides.items())
        settings.register_profile(name, parent=settings.default, **overrides)
        settings.load_profile(name)
    try:
        entries = load_expected(config.getoption("xfails_file"),
                                selection.chosen_family().invariants)
    except (ValueError, FamilyError) as exc:
        raise pytest.UsageError(f"--xfails-file: {exc}") from None
    config.stash[_EXPECTED] = entries
    _known.clear()
    _session.clear()
    _robust.clear()
    robustness.take()
    _absorbed.clear()
    PROGRESS.reset()
    config.stash[_ORIGINAL_DO] = _install_wrapper()
    selection.tolerate(tolerated_by(entries))


def pytest_unconfigure(config: pytest.Config) -> None:
    original = config.stash.get(_ORIGINAL_DO, None)
    if original is not None:
        from properties.core.machine import OracleMachine

        OracleMachine.setup, OracleMachine.do = original  # type: ignore[method-assign]
        del config.stash[_ORIGINAL_DO]


def _loaded() -> Target | None:
    """The selected target, None when it cannot be loaded (:func:`_target_line` says why in
    the header; the tests that need it fail clearly)."""
    try:
        return selection.current_target()
    except Exception:
        return None


def _target_line() -> str:
    try:
        return selection.current_target().describe()
    except Exception as exc:  # reported in the header; the tests that need it fail clearly
        return f"cannot load target: {exc}"


def selected_family() -> object:
    """The selected target's family (None when it cannot load: mechanisms compare as they
    are)."""
    target = _loaded()
    return None if target is None else target.family_object


def _version_note() -> str:
    """What the target says about its version (e.g. that it could not be read), if anything."""
    target = _loaded()
    return "" if target is None else target.version_note


def pytest_report_header(config: pytest.Config) -> list[str]:
    current = settings()
    seed = config.getoption("hypothesis_seed", default=None)
    seed_text = (str(seed) if seed is not None
                 else "fixed (derandomized)" if current.derandomize else "random")
    xfails = config.getoption("xfails_file", None)
    entries = config.stash.get(_EXPECTED, [])
    applying = expected_entries(config)
    others = "" if len(applying) == len(entries) else \
        f"; {len(entries) - len(applying)} of them listed for other releases only: not applied"
    note = _version_note()
    return [
        f"prefixcache target: {_target_line()}",
        *([f"prefixcache version: {note}"] if note else []),
        f"prefixcache profile: {settings.get_current_profile_name()} "
        f"(max_examples={current.max_examples}, steps={current.stateful_step_count}, "
        f"derandomize={current.derandomize}, seed={seed_text})",
        f"prefixcache expected failures: {len(entries)}"
        + (f" ({xfails}{others})" if xfails else ""),
        f"prefixcache step timeout: {_timeout_line()}",
        "prefixcache after a deviation: "
        + ("keep exploring (--all)" if exploring(config) else "stop that test"),
    ]


def _timeout_line() -> str:
    seconds = selection.step_timeout()
    return "none" if seconds is None else f"{seconds:g} s"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    entries = metafunc.config.stash.get(_EXPECTED, [])
    if "expected_failure" in metafunc.fixturenames and entries:
        metafunc.parametrize("expected_failure", entries, ids=[e.id for e in entries])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Without an xfails file there is nothing to replay: drop the (empty) replay test.
    items[:] = [i for i in items
                if not (i.name.startswith("test_expected_failure") and "[" not in i.name)]
    path = config.getoption("skips_file")
    if not path:
        return
    for entry in json.loads(Path(path).read_text(encoding="utf-8")):
        for item in items:
            if entry["test"] in item.nodeid:
                item.add_marker(pytest.mark.skip(reason=entry["reason"]))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, None]:
    global _active
    call = _Call(expected_entries(item.config), [], exploring(item.config))
    item.stash[_OBSERVED] = call.hits
    item.stash[_CALL] = call
    _active = call
    # A derandomized profile promises the same examples every run: see properties.core.determinism.
    derandomized = settings.default is not None and settings.default.derandomize
    pinned = fixed_constants() if derandomized else contextlib.nullcontext()
    machine = getattr(getattr(item, "obj", None), "_hypothesis_state_machine_class", None)
    collector = machine_collector() if machine is not None else contextlib.nullcontext()
    try:
        with pinned, collector:
            yield
    finally:
        _active = None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Count hits per entry and merge the deviations found (reports carry both, so this also
    works under xdist)."""
    for name, value in report.user_properties:
        if name == "prefixcache_expected" and isinstance(value, list):
            for entry_id in value:
                _hits[entry_id] = _hits.get(entry_id, 0) + 1
        elif name == "prefixcache_deviations" and isinstance(value, list):
            baseline.merge(_session, [baseline.Deviation.from_json(d) for d in value])
        elif name == "prefixcache_robustness" and isinstance(value, list):
            robustness.merge(_robust, [robustness.Finding.from_json(f) for f in value])
        elif name == "prefixcache_repeats" and isinstance(value, dict):
            for key, n in value.items():
                dev = _session.get(key)
                if dev is not None:
                    dev.count += n
                    if report.nodeid not in dev.tests:
                        dev.tests.append(report.nodeid)
        elif name == "prefixcache_repeat_measures" and isinstance(value, dict):
            for key, ms in value.items():
                dev = _session.get(key)
                if dev is not None:
                    dev.measures = worst_of(dev.measures, [Measure.from_json(m) for m in ms])
        elif name == "prefixcache_mechanisms" and isinstance(value, dict):
            for entry_id, counts in value.get("absorbed", {}).items():
                got = _absorbed.setdefault(entry_id, baseline.Absorbed(entry_id))
                for key, n in counts.items():
                    got.add(baseline.absorbed_from_key(key), n)
            for entry_id, key in value.get("own", {}).items():
                got = _absorbed.setdefault(entry_id, baseline.Absorbed(entry_id))
                got.own = baseline.absorbed_from_key(key)
            for entry_id, shown in value.get("examples", {}).items():
                got = _absorbed.setdefault(entry_id, baseline.Absorbed(entry_id))
                for key, text in shown.items():
                    got.examples.setdefault(baseline.absorbed_from_key(key), text)


def _violations(exc: BaseException) -> list[Violation] | None:
    leaves = list(_leaves(exc))
    found = [leaf for leaf in leaves if isinstance(leaf, Violation)]
    return found if len(found) == len(leaves) else None


def _kind(item: pytest.Item) -> str:
    """The allocator type a test ran (for a violation with no program attached)."""
    target = _loaded()
    return "" if target is None else target.allocator_type


def _replaying(item: pytest.Item) -> ExpectedFailure | None:
    """The entry whose own program ``item`` replays (``test_expected_failure[id]``), if any."""
    callspec = getattr(item, "callspec", None)
    entry = callspec.params.get("expected_failure") if callspec is not None else None
    return entry if isinstance(entry, ExpectedFailure) else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if report.when != "call":
        return
    hits = observed(item)
    if hits:
        report.user_properties.append(("prefixcache_expected", [e.id for e, _ in hits]))
    ran = item.stash.get(_CALL, None)
    news = list(ran.new) if ran is not None else []
    repeats = dict(ran.repeats) if ran is not None else {}
    entries = expected_entries(item.config)
    replaying = _replaying(item)
    if replaying is not None:
        # An entry's replay stands for that entry alone: a failure another entry would
        # absorb means its own program no longer shows its own defect.
        entries = [replaying]
    found: list[ExpectedFailure] | None = None
    if call.excinfo is not None and not getattr(report, "wasxfail", ""):
        found = matching(entries, call.excinfo.value)
        leaves = None if found else _violations(call.excinfo.value)
        # Deviations the test raised (not absorbed): one per distinct signature.
        for leaf in leaves or ():
            dev = baseline.deviation(leaf, item.nodeid, _kind(item))
            if all(d.signature != dev.signature for d in news):
                news.append(dev)
    for dev in news:
        dev.tests = [item.nodeid]
    if news:
        report.user_properties.append(("prefixcache_deviations", [d.to_json() for d in news]))
    if repeats:
        report.user_properties.append(("prefixcache_repeats", repeats))
        if ran is not None and ran.repeat_measures:
            report.user_properties.append(("prefixcache_repeat_measures", {
                key: [m.to_json() for m in ms] for key, ms in ran.repeat_measures.items()}))
    if ran is not None and (ran.mechanisms or ran.own):
        report.user_properties.append(("prefixcache_mechanisms", {
            "absorbed": {i: dict(c) for i, c in ran.mechanisms.items()}, "own": ran.own,
            "examples": ran.examples}))
    met = robustness.take()
    if met:
        report.user_properties.append(("prefixcache_robustness", [f.to_json() for f in met]))
    if getattr(report, "wasxfail", ""):
        return
    if call.excinfo is not None and call.excinfo.errisinstance(Unsatisfiable) and (
            news or repeats or hits):
        # --all: every example ended at a deviation (all rejected): judged by those.
        call = _passed(call)
        report.outcome, report.longrepr = "passed", None
    if call.excinfo is None and (news or repeats):
        # --all: the test ran its whole budget, absorbing every deviation it met.
        report.outcome = "failed"
        report.longrepr = _explored(news, repeats)
        return
    if call.excinfo is not None:
        if not found:
            return
        report.user_properties.append(("prefixcache_expected", [e.id for e in found]))
    else:
        found = [entry for entry, _ in observed(item)]
        if not found or report.outcome != "passed":
            return
    tally = ", ".join(f"{entry_id} x{n}" for entry_id, n in
                      sorted(Counter(e.id for e in found).items()))
    report.outcome = "skipped"
    report.wasxfail = f"expected failures only: {tally}"


def _passed(call: pytest.CallInfo[None]) -> pytest.CallInfo[None]:
    return pytest.CallInfo(None, None, start=call.start, stop=call.stop,
                           duration=call.duration, when=call.when, _ispytest=True)


def _explored(news: Sequence[baseline.Deviation], repeats: dict[str, int]) -> str:
    lines = [f"{len(news)} new distinct deviation(s) (--all):"]
    for dev in news:
        lines += ["", f"[{dev.family}] {dev.explanation} (x{dev.count})", dev.message, "",
                  dev.script]
    for key, n in repeats.items():
        lines.append(f"also met (x{n}), first reported by an earlier test: {key}")
    return "\n".join(lines)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if _robust:
        terminalreporter.section("prefixcache robustness findings (misuse accepted)")
        for finding in _robust.values():
            terminalreporter.write_line(str(finding))
    entries = config.stash.get(_EXPECTED, [])
    if entries:
        terminalreporter.section("prefixcache expected failures")
        for entry in entries:
            terminalreporter.write_line(f"{entry.id} ({entry.family.value}): "
                                        f"hit by {_hits.get(entry.id, 0)} test(s) or "
                                        f"example(s)")
    wide = too_wide(config)
    rows = baseline.absorbed_lines(baseline.absorbed_by_entry(entries, _absorbed,
                                                              selected_family()))
    if rows:
        terminalreporter.section("prefixcache mechanisms absorbed per expected failure")
        for line in rows:
            terminalreporter.write_line(line)
        if wide:
            terminalreporter.write_line(
                f"{len(wide)} entr(y/ies) too wide: {', '.join(wide)}"
                + (" (--strict-xfails: the session fails)" if config.getoption(
                    "strict_xfails", False) else " (split or narrow them; --strict-xfails "
                   "fails on this)"))
    if _session:
        terminalreporter.section("prefixcache deviations (distinct, by signature)")
        for dev in _session.values():
            terminalreporter.write_line(f"[{dev.family}] {dev.explanation}: x{dev.count} in "
                                        f"{', '.join(dev.tests)}")
    path = config.getoption("write_xfails", None)
    done = written(config)
    if path and done is not None:
        terminalreporter.write_line(f"prefixcache: wrote {done[0]} entries to {path}"
                                    + (f" ({len(done[1])} flaky: {', '.join(done[1])})"
                                       if done[1] else ""))


def too_wide(config: pytest.Config) -> list[str]:
    """The ids of the session's expected failures that are too wide
    (``baseline.Absorbed.too_wide``)."""
    return wide_entries(expected_entries(config))


def wide_entries(entries: Sequence[ExpectedFailure]) -> list[str]:
    """:func:`too_wide` of ``entries`` (by what the run absorbed)."""
    return [row.entry_id for row in baseline.absorbed_by_entry(entries, _absorbed,
                                                               selected_family())
            if row.too_wide]


_WRITTEN = pytest.StashKey[int]()
_FLAKY = pytest.StashKey[list[str]]()


def written(config: pytest.Config) -> tuple[int, list[str]] | None:
    """After ``--write-xfails``: how many entries were written, and which are flaky."""
    if _WRITTEN not in config.stash:
        return None
    return config.stash[_WRITTEN], config.stash.get(_FLAKY, [])


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """``--write-xfails``: on the controller (or a run without xdist), once."""
    config = session.config
    if hasattr(config, "workerinput"):
        return
    if config.getoption("strict_xfails", False) and too_wide(config):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    path = config.getoption("write_xfails", None)
    if not path:
        return
    kept = load_raw(config.getoption("xfails_file"))
    written = baseline.write_xfails(Path(path), _session.values(), kept)
    new_ids = [e["id"] for e in written[len(kept):]]
    target = selection.current_target()
    flaky = baseline.unreproduced(Path(path), target.spec, config.getoption("disable_feature"),
                                  new_ids, target.family)
    baseline.mark_flaky(Path(path), flaky)
    config.stash[_WRITTEN] = len(written)
    config.stash[_FLAKY] = flaky
