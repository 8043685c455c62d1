"""The SGLang family's allocator level: bare token-slot allocations beside the scheduler's
requests, and misuse probes reported as robustness findings.

One operation, one place: each class below holds its fields and JSON form, what it calls on
the target and how the model judges the answer (``run``), and the line that replays it in a
reproducer (``line``); how the machine draws it is beside them (``DRAW``, :func:`draw`). The
judge, the machine, the vocabulary and the script writer dispatch to these and know nothing
else of them.

* :class:`Take`: ``alloc(pages * page_size)`` outside any request (a hold): distinct free slots
  in whole pages, None only when fewer are free; the slots are the hold's until it gives them
  back (OWN).
* :class:`Extend`: the paged allocator's ``alloc_extend`` / ``alloc_decode`` growing a hold's
  KV row, as prefill chunks and decode steps grow a request's (page size > 1 only; upstream
  0.5.23 runs them on a CPU host through its torch fallbacks ``alloc_extend_naive`` /
  ``alloc_decode_naive``, triton being absent; 0.5.18 has only its triton kernels, so they are
  not drawn there): the rest of the row's last page first, then
  whole free pages; None only when too few pages are free (OWN). One request per call.
* :class:`Batch`: one ``alloc_extend`` / ``alloc_decode`` for several holds at once (lists of
  prefix and sequence lengths, as a scheduler's batch): each hold as :class:`Extend`, in hold
  order, no page handed to two of them; None only when the whole batch does not fit (OWN).
* :class:`Give`: a hold's slots back to the allocator by ``free``, by ``free_segment`` (a KV row
  segment starting at 0) or by two ``free`` calls inside ``free_group_begin``/``free_group_end``;
  they are on the free list afterwards, once each, and ``available_size()`` counts them (OWN).
* :class:`Probe`: one misuse on a fresh tree of the target (never the run's own tree): a double
  free of a slot, a free of a pool slot never handed out, a free of a slot outside the pool, a
  second ``dec_lock_ref`` / ``unlock`` with a receipt already used. A target that claims typed
  errors (the bundled reference) must raise one of them and change nothing, else the probe
  fails the run (OWN, LOCK; CRASH for an untyped error). Any other target that changes its
  state (a free list, ``available_size()``, the sizes or a lock count), raising or not, is
  reported with :func:`properties.core.robustness.report` and a script that replays it; one
  that refuses with an exception and changes nothing is fine.

``available_size()`` itself is judged after every operation (the judge's pool check): it is
the free count and never exceeds the capacity.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from hypothesis import strategies as st

from models.core.invariants import Invariant, Violation
from models.families.sglang.invariants import SGLangInvariants as F
from models.families.sglang.model import OutOfContract, TreeModel
from models.families.sglang.ops import TreeConfig
from properties.core import robustness

__all__ = ["KINDS", "MISUSES", "SLOT_OPS", "Batch", "Extend", "Give", "Probe", "SlotOp", "Take",
           "draw", "from_json"]


class Judging(Protocol):
    """What an operation of this level uses of the family's judge."""

    config: TreeConfig
    tree: Any
    spec: str
    name: str
    misuse_types: tuple[type[BaseException], ...]

    @property
    def model(self) -> TreeModel: ...  # read only: the SWA judge's is an SWAModel

    def _call(self, what: str, method: Any, *args: Any) -> Any: ...

    def fresh(self) -> Any: ...


# --------------------------------------------------------------------------- alloc


@dataclass(frozen=True, slots=True)
class Take:
    """``alloc(pages * page_size)`` by a hold (no request, no KV computed); its outcome is
    the hold's number (holds are numbered by their grant), None when refused."""

    kind: ClassVar[str] = "alloc"
    pages: int

    def to_json(self) -> dict[str, Any]:
        return {"op": self.kind, "pages": self.pages}

    def run(self, judge: Judging) -> int | None:
        need = self.pages * judge.config.page_size
        got = judge._call("alloc", judge.tree.alloc, need)
        fresh = judge.model.check_alloc(need, got)
        if fresh is None:
            return None
        judge.model.holds.append(fresh)
        return len(judge.model.holds) - 1

    def line(self, config: TreeConfig) -> str:
        return f"take({self.pages * config.page_size})"


# --------------------------------------------------------------------------- extend


@dataclass(frozen=True, slots=True)
class Extend:
    """The paged allocator's ``alloc_extend`` for hold ``hold``'s KV row by ``tokens`` tokens
    (``decode``: ``alloc_decode``, one token), as a scheduler's prefill chunk or decode step
    grows a request: the rest of the row's last page first, then whole free pages; None only
    when too few pages are free. Page size 1 has no such call, nor has a release whose
    allocator has no CPU path for it (0.5.18 launches triton kernels): never drawn there, out
    of contract in a replay."""

    kind: ClassVar[str] = "alloc_extend"
    hold: int
    tokens: int = 1
    decode: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.kind, "hold": self.hold, "tokens": self.tokens}
        if self.decode:
            out["decode"] = True
        return out

    def run(self, judge: Judging) -> list[int] | None:
        if not getattr(judge.tree, "extends", False):
            raise OutOfContract("alloc_extend / alloc_decode are the paged allocator's, and "
                                "run here only on a CPU path (not 0.5.18's triton kernels)")
        row = judge.model.hold(self.hold)
        prefix, last = len(row), row[-1]
        if self.decode:
            got = judge._call("alloc_decode", judge.tree.alloc_decode, prefix + 1, last)
            judge.model.check_extend(self.hold, 1, got)
        else:
            got = judge._call("alloc_extend", judge.tree.alloc_extend, prefix,
                              prefix + self.tokens, last)
            judge.model.check_extend(self.hold, self.tokens, got)
        return None if got is None else [int(slot) for slot in got]

    def line(self, config: TreeConfig) -> str:
        return f"extend({self.hold}, {1 if self.decode else self.tokens}, {self.decode})"


@dataclass(frozen=True, slots=True)
class Batch:
    """One ``alloc_extend`` (``decode``: ``alloc_decode``) for several holds at once, as a
    scheduler's batch grows its requests together: hold ``holds[i]`` by ``tokens[i]`` tokens
    (1 each when decoding), the holds distinct. Each gets the rest of its row's last page
    first, then whole free pages, its slots in hold order; None only when fewer pages are free
    than the whole batch needs. Drawn where :class:`Extend` is, with two holds or more."""

    kind: ClassVar[str] = "alloc_extend_batch"
    holds: tuple[int, ...]
    tokens: tuple[int, ...]
    decode: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.kind, "holds": list(self.holds),
                               "tokens": list(self.tokens)}
        if self.decode:
            out["decode"] = True
        return out

    def run(self, judge: Judging) -> list[int] | None:
        if not getattr(judge.tree, "extends", False):
            raise OutOfContract("alloc_extend / alloc_decode are the paged allocator's, and "
                                "run here only on a CPU path (not 0.5.18's triton kernels)")
        if len(set(self.holds)) != len(self.holds) or len(self.holds) != len(self.tokens):
            raise OutOfContract("a batch names each hold once, with its token count")
        if self.decode and set(self.tokens) != {1}:
            raise OutOfContract("a decode batch grows each hold by one token")
        rows = [judge.model.hold(h) for h in self.holds]  # out of contract when not live
        if self.decode:
            got = judge._call("alloc_decode", judge.tree.alloc_decode_rows,
                              [(len(row) + 1, row[-1]) for row in rows])
        else:
            got = judge._call("alloc_extend", judge.tree.alloc_extend_rows,
                              [(len(row), len(row) + t, row[-1])
                               for row, t in zip(rows, self.tokens, strict=True)])
        judge.model.check_extend_batch(self.holds, self.tokens, got)
        return None if got is None else [int(slot) for slot in got]

    def line(self, config: TreeConfig) -> str:
        return f"extend_batch({list(self.holds)}, {list(self.tokens)}, {self.decode})"


# --------------------------------------------------------------------------- free

#: How a hold gives its slots back.
HOWS = ("free", "segment", "group")


@dataclass(frozen=True, slots=True)
class Give:
    """Hold ``hold`` gives its slots back: ``free(slots)``, ``free_segment(slots,
    start_pos=0)``, or (``group``) its first and last pages freed by two ``free`` calls inside
    one free group."""

    kind: ClassVar[str] = "free"
    hold: int
    how: str = "free"

    def to_json(self) -> dict[str, Any]:
        return {"op": self.kind, "hold": self.hold, "how": self.how}

    def run(self, judge: Judging) -> None:
        slots = list(judge.model.hold(self.hold))  # out of contract when not live
        tree = judge.tree
        if self.how == "segment":
            judge._call("free_segment", tree.free_segment, slots, 0)
        elif self.how == "group":
            judge._call("a free group", tree.free_group, _halves(slots, judge.config))
        else:
            judge._call("free", tree.free, slots)
        judge.model.release(self.hold)

    def line(self, config: TreeConfig) -> str:
        return f"give({self.hold}, {self.how!r})"


def _halves(slots: list[int], config: TreeConfig) -> list[list[int]]:
    """A hold's slots in two page-aligned parts (the first may be empty)."""
    cut = len(slots) // config.page_size // 2 * config.page_size
    return [slots[:cut], slots[cut:]]


# --------------------------------------------------------------------------- misuse

#: The probes, and the invariant a target claiming typed errors breaks by accepting each.
#: Allocator misuse (the FULL level), node-handle misuse (both levels: a second unlock of an
#: unlocked node, a node evicted before it is locked, another tree's node or receipt, an
#: insert whose value is shorter than its key, an eviction of a negative count) and the SWA
#: level's own (a second ``release_swa`` of one lock, a negative SWA eviction).
MISUSES: Mapping[str, Invariant] = {
    "double_free": F.OWN,
    "free_unallocated": F.OWN,
    "free_outside": F.OWN,
    "double_unlock": F.LOCK,
    "lock_stale_node": F.LOCK,
    "lock_foreign_node": F.LOCK,
    "unlock_foreign_receipt": F.LOCK,
    "insert_short_value": F.OWN,
    "evict_negative": F.EVICT,
    "double_release_swa": F.LOCK,
    "evict_swa_negative": F.EVICT,
}
#: What each level draws.
FULL_MISUSES = ("double_free", "double_unlock", "evict_negative", "free_outside",
                "free_unallocated", "insert_short_value", "lock_foreign_node",
                "lock_stale_node", "unlock_foreign_receipt")
SWA_MISUSES = ("double_release_swa", "double_unlock", "evict_negative", "evict_swa_negative",
               "insert_short_value", "lock_foreign_node", "lock_stale_node",
               "unlock_foreign_receipt")


@dataclass(frozen=True, slots=True)
class Probe:
    """Misuse ``misuse`` (one of :data:`MISUSES`; ``arg`` picks the pages) on a fresh tree of
    the target with the run's pool shape: a few valid calls (``setup``), then the misuse. The
    run's own tree and model are untouched; the outcome is the finding's detail, or None."""

    kind: ClassVar[str] = "probe"
    misuse: str
    arg: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"op": self.kind, "misuse": self.misuse, "arg": self.arg}

    def scenario(self, config: TreeConfig) -> tuple[list[str], str]:
        """(the valid calls before, the misuse), as lines of Python over ``tree`` (a driver):
        what :meth:`run` executes is what the replay script prints."""
        ps, pages = config.page_size, config.pages
        k = 1 + self.arg % (min(pages, config.swa_pages) if config.window else pages)
        tokens = list(range(k * ps))
        cached = [f"slots = tree.alloc({k * ps})", f"tree.insert({tokens}, slots)",
                  f"node = tree.match({tokens})[1]"]
        elsewhere = [f"theirs = other.alloc({k * ps})", f"other.insert({tokens}, theirs)",
                     f"node = other.match({tokens})[1]"]
        if self.misuse == "double_free":
            return [f"slots = tree.alloc({k * ps})", "tree.free(slots)"], f"tree.free(slots[:{ps}])"
        if self.misuse == "free_unallocated":
            return [], f"tree.free({list(range(k * ps, k * ps + ps))})"
        if self.misuse == "free_outside":
            page = pages + 1 + self.arg % 2
            return [], f"tree.free({list(range(page * ps, page * ps + ps))})"
        if self.misuse == "double_unlock":
            return [*cached, "receipt = tree.lock(node)", "tree.unlock(receipt)"], \
                "tree.unlock(receipt)"
        if self.misuse == "lock_stale_node":
            return [*cached, f"tree.evict({k * ps})"], "receipt = tree.lock(node)"
        if self.misuse == "lock_foreign_node":
            return elsewhere, "receipt = tree.lock(node)"
        if self.misuse == "unlock_foreign_receipt":
            return [*cached, *elsewhere, "receipt = other.lock(node)"], "tree.unlock(receipt)"
        if self.misuse == "insert_short_value":
            return [f"slots = tree.alloc({k * ps})"], f"tree.insert({tokens}, slots[:-1])"
        if self.misuse == "evict_negative":
            return cached, "tree.evict(-1)"
        if self.misuse == "evict_swa_negative":
            return cached, "tree.evict(0, -1)"
        if self.misuse == "double_release_swa":
            return [*cached, "receipt = tree.lock(node)", "tree.release_swa(receipt)"], \
                "tree.release_swa(receipt)"
        raise ValueError(f"unknown misuse {self.misuse!r}; one of {sorted(MISUSES)}")

    def run(self, judge: Judging) -> str | None:
        if judge.misuse_types:  # claimed typed errors are judged every time (cheap: in-process)
            return self._run(judge)
        # Otherwise the outcome is the target's answer to one fixed program on a fresh tree:
        # run it once per process (an upstream tree costs milliseconds to build).
        key = (judge.spec, self, judge.config)
        if key not in _ANSWERS:
            _ANSWERS[key] = self._run(judge)
        return _ANSWERS[key]

    def _run(self, judge: Judging) -> str | None:
        invariant = MISUSES[self.misuse]
        setup, misuse = self.scenario(judge.config)
        where: dict[str, Any] = {"tree": judge._call("construction", judge.fresh)}
        if "other" in "".join(setup):  # another tree of the target, for foreign handles
            where["other"] = judge._call("construction", judge.fresh)
        judge._call("the probe's valid calls", exec, "\n".join(setup), where)
        before = _state(where)
        error: BaseException | None = None
        try:
            exec(misuse, where)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # a Rust core's panic is a BaseException
            error = exc
        after: Any
        try:
            after = _state(where)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # a Rust core poisoned by the misuse panics on reads
            after = f"corrupted: reading it raises {type(exc).__name__}: {exc}"
        what = f"misuse {self.misuse} (`{misuse}` after `{'; '.join(setup) or 'nothing'}`)"
        if judge.misuse_types:
            if error is None:
                raise Violation(invariant, f"{what} accepted; the target claims typed errors "
                                f"for misuse: {_diff(before, after, judge.config)}")
            if not isinstance(error, judge.misuse_types):
                raise Violation(F.CRASH, f"{what} raised {type(error).__name__}: {error}, "
                                "not one of the typed errors the target claims")
            if after != before:
                raise Violation(invariant, f"{what} raised {type(error).__name__} but changed "
                                f"the tree: {_diff(before, after, judge.config)}")
            return None
        if after == before:
            return None
        how = f"raised {type(error).__name__} but" if error is not None else "accepted it and"
        detail = f"`{misuse}` {how} {_diff(before, after, judge.config)}"
        if not robustness.known(judge.name, self.misuse):
            robustness.report(robustness.Finding(judge.name, self.misuse, detail,
                                                 self.script(judge.spec, judge.config)))
        return detail

    def line(self, config: TreeConfig) -> str:
        setup, misuse = self.scenario(config)
        return f"probe({setup!r}, {misuse!r})"

    def script(self, spec: str, config: TreeConfig) -> str:
        """A standalone script that replays the misuse and prints the state around it."""
        setup, misuse = self.scenario(config)
        make = f"open_target({spec!r}).create({', '.join(map(str, shape(config)))})"
        swa = (", sorted(tree.swa_free_slots().elements()), tree.swa_available_size(),\n"
               "                 tree.swa_sizes()") if config.window else ""
        return "\n".join([
            "from properties.families.sglang.targets import open_target", "",
            f"tree = {make}",
            *([f"other = {make}"] if "other" in "".join(setup) else []),
            *setup,
            "state = lambda: (sorted(tree.free_slots().elements()), tree.available_size(),",
            "                 tree.sizes()" + swa + (", tree.lock_count(node))" if "node" in
                                                      "".join(setup) else ")"),
            "print('before', state())",
            "try:",
            f"    {misuse}",
            "except Exception as exc:",
            "    print('raised', repr(exc))",
            "print('after ', state())",
            f"# capacity {config.size}", ""])


#: Probe outcomes of targets without typed-error claims, by (spec, probe, pool shape).
_ANSWERS: dict[tuple[str, Probe, TreeConfig], str | None] = {}


def shape(config: TreeConfig) -> tuple[int, ...]:
    """The arguments that build a tree of the run's pool shape (with a window: the SWA
    pool's size and the window too)."""
    if config.window:
        return config.size, config.page_size, config.swa_size, config.window
    return config.size, config.page_size


def _state(where: Mapping[str, Any]) -> tuple[Any, ...]:
    """What a misuse may change: the free list (a multiset), ``available_size()``, the sizes,
    the probed node's lock count (where the tree keeps one) and, on a FULL + SWA tree, the
    SWA free list, ``swa_available_size()`` and the SWA sizes."""
    tree = where["tree"]
    node = where.get("node")
    lock = tree.lock_count(node) if node is not None else None
    swa: tuple[Any, ...] = ()
    if hasattr(tree, "swa_free_slots"):
        swa = (tuple(sorted(Counter(tree.swa_free_slots()).items())),
               int(tree.swa_available_size()), tuple(int(x) for x in tree.swa_sizes()))
    return (tuple(sorted(Counter(tree.free_slots()).items())), int(tree.available_size()),
            tuple(int(x) for x in tree.sizes()), lock, *swa)


def _diff(before: tuple[Any, ...], after: Any, config: TreeConfig) -> str:
    """What changed between two :func:`_state` readings, in a scheduler's words."""
    if isinstance(after, str):
        return after
    parts = []
    if before[0] != after[0]:
        twice = sorted(s for s, n in after[0] if n > 1)
        grown = sorted(set(dict(after[0])) - set(dict(before[0])))
        parts.append("the free list" + (f" holds slot(s) {twice[:4]} twice" if twice else "")
                     + (f" gained slot(s) {grown[:4]}" if grown else ""))
    if before[1] != after[1]:
        over = f", over the capacity {config.size}" if after[1] > config.size else ""
        parts.append(f"available_size() {before[1]} -> {after[1]}{over}")
    if before[2] != after[2]:
        parts.append(f"(evictable, protected, total) {before[2]} -> {after[2]}")
    if before[3] != after[3]:
        parts.append(f"the node's lock count {before[3]} -> {after[3]}")
    if before[4:5] != after[4:5]:
        parts.append("the SWA free list")
    if before[5:6] != after[5:6]:
        parts.append(f"swa_available_size() {before[5]} -> {after[5]}")
    if before[6:7] != after[6:7]:
        parts.append(f"(swa evictable, swa protected) {before[6]} -> {after[6]}")
    return "changed " + "; ".join(parts) if parts else "changed nothing observable"


# --------------------------------------------------------------------------- the level

SlotOp = Take | Extend | Batch | Give | Probe
SLOT_OPS = (Take, Extend, Batch, Give, Probe)
KINDS = {cls.kind: cls for cls in SLOT_OPS}

#: How the machine draws each operation: one rule for the whole level (so it does not crowd
#: out the request rules), which draws the kind, then the operation; a hold to give back is
#: one of the live ones.
DRAW: Mapping[str, Any] = {
    Take.kind: st.builds(Take, st.integers(1, 3)),
    Extend.kind: st.tuples(st.integers(1, 6), st.booleans()),
    Give.kind: st.sampled_from(HOWS),
    Probe.kind: st.builds(Probe, st.sampled_from(FULL_MISUSES), st.integers(0, 3)),
}


def draw(data: st.DataObject, holds: list[int], extends: bool) -> SlotOp:
    """One operation of this level (``holds``: the live holds, the machine's record;
    ``extends``: the tree's allocator runs ``alloc_extend`` here)."""
    kinds = [Take.kind, Probe.kind] + ([Give.kind] if holds else []) + (
        [Extend.kind] if holds and extends else []) + (
        [Batch.kind] if len(holds) > 1 and extends else [])
    kind = data.draw(st.sampled_from(kinds))
    if kind == Batch.kind:
        chosen = data.draw(st.lists(st.sampled_from(holds), min_size=2, max_size=3,
                                    unique=True))
        decode = data.draw(st.booleans())
        tokens = [1] * len(chosen) if decode else data.draw(
            st.lists(st.integers(1, 6), min_size=len(chosen), max_size=len(chosen)))
        return Batch(tuple(chosen), tuple(tokens), decode)
    if kind == Give.kind:
        return Give(data.draw(st.sampled_from(holds)), data.draw(DRAW[Give.kind]))
    if kind == Extend.kind:
        tokens, decode = data.draw(DRAW[Extend.kind])
        return Extend(data.draw(st.sampled_from(holds)), 1 if decode else tokens, decode)
    op: SlotOp = data.draw(DRAW[kind])
    return op


#: The reproducer's helpers for this level (beside the request helpers).
PRELUDE = '''
holds = []


def take(n):
    """a bare alloc(n): a hold, numbered when granted."""
    got = tree.alloc(n)
    if got is not None:
        holds.append(got)
    print("alloc", got)


def extend(hold, tokens, decode):
    """the hold's KV row grows by alloc_extend (or alloc_decode: one token)."""
    row = holds[hold]
    if decode:
        got = tree.alloc_decode(len(row) + 1, row[-1])
    else:
        got = tree.alloc_extend(len(row), len(row) + tokens, row[-1])
    if got is not None:
        row.extend(got)
    print("extend", got)


def extend_batch(hs, tokens, decode):
    """several holds' KV rows grow by one alloc_extend (or alloc_decode), in hold order."""
    rows = [holds[h] for h in hs]
    if decode:
        got = tree.alloc_decode_rows([(len(row) + 1, row[-1]) for row in rows])
    else:
        got = tree.alloc_extend_rows([(len(row), len(row) + t, row[-1])
                                      for row, t in zip(rows, tokens)])
    if got is not None:
        at = 0
        for row, t in zip(rows, tokens):
            row.extend(got[at:at + t])
            at += t
    print("extend batch", got)


def give(hold, how):
    """the hold's slots back: free, free_segment from 0, or two frees in one free group."""
    slots, holds[hold] = holds[hold], None
    if how == "segment":
        tree.free_segment(slots, 0)
    elif how == "group":
        cut = len(slots) // PAGE // 2 * PAGE
        tree.free_group([slots[:cut], slots[cut:]])
    else:
        tree.free(slots)

'''

#: The reproducer's misuse helper (both levels; ``SHAPE``: the tree's construction arguments).
PROBE_PRELUDE = '''

def probe(setup, misuse):
    """a misuse on a fresh tree (another one for foreign handles); what changed."""
    where = {"tree": open_target(SPEC).create(*SHAPE), "other": open_target(SPEC).create(*SHAPE)}
    exec("\\n".join(setup), where)

    def state():
        tree = where["tree"]
        return sorted(tree.free_slots().elements()), tree.available_size(), tree.sizes()

    before = state()
    try:
        exec(misuse, where)
    except Exception as exc:
        print("probe raised", repr(exc))
    print("probe", misuse, before, "->", state())
'''


def from_json(data: Mapping[str, Any]) -> SlotOp:
    kind = data.get("op")
    if kind == Take.kind:
        return Take(int(data["pages"]))
    if kind == Extend.kind:
        return Extend(int(data["hold"]), int(data.get("tokens", 1)),
                      bool(data.get("decode", False)))
    if kind == Batch.kind:
        return Batch(tuple(int(h) for h in data["holds"]),
                     tuple(int(t) for t in data["tokens"]), bool(data.get("decode", False)))
    if kind == Give.kind:
        how = str(data.get("how", "free"))
        if how not in HOWS:
            raise ValueError(f"not a way to free: {how!r}; one of {HOWS}")
        return Give(int(data["hold"]), how)
    if kind == Probe.kind:
        misuse = str(data["misuse"])
        if misuse not in MISUSES:
            raise ValueError(f"not a misuse: {misuse!r}; one of {sorted(MISUSES)}")
        return Probe(misuse, int(data.get("arg", 0)))
    raise ValueError(f"not an SGLang allocator-level operation: {data!r}")
