"""Regenerates the seed corpora (``fuzz/families/v0/corpus/<harness>/``) and dictionaries
(``fuzz/<harness>.dict``): ``python -m fuzz corpus [--seed N]``.

Seeds are chosen, not written by hand: a seeded random search decodes candidate inputs against
the bundled allocator, and a greedy cover keeps the few dozen small inputs that together reach
every operation kind of the harness, each with every outcome it showed (success, no free
blocks, typed misuse), plus the empty input. Dictionary entries are the bytes of single
operations cut from the chosen seeds at their operation boundaries, so libFuzzer can splice
whole operations.

A second corpus, ``fuzz/families/v0/arc_corpus/<harness>/``, is a fixed regression set rather than
fuzzing seeds: the inputs that, with the seed corpus, reach every arc (line-to-line transition, the
branch coverage of coverage.py) of the bundled allocator that the candidates reach, then every step
outcome at the free-count boundary (where admission estimates decide). It has no size cap for
fuzzing time (``MAX_SEEDS`` keeps every seed's share of the fuzzing time large), only one for replay
time; ``properties/families/v0/test_seed_corpus.py`` replays both.
"""

from __future__ import annotations

import hashlib
import itertools
import random
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from fuzz.core.execution import Execution, decodable_kinds
from fuzz.core.harness import Harness
from fuzz.families.v0.decoder import MAX_GPU_BLOCKS, Level
from properties.families.v0.runner import Runner

CANDIDATES = 1500
#: CPython's default ``sys.getrecursionlimit()``.
RECURSION_LIMIT = 1000
MAX_SEEDS = 36
MAX_DICT = 48


Key = tuple[str, ...]


def _keys(result: Execution) -> tuple[set[Key], set[Key]]:
    """What a seed shows, as (primary, secondary) keys. Primary: each kind with each outcome
    (and copy-on-write), the pool shape (block size, CPU pool or not, long pool or not), and
    operations that made a chain longer than the recursion limit. Secondary: each pair of
    consecutive kinds. (Few keys for long pools: their inputs cost ~10x a tiny pool's, and
    every seed gets the same share of the fuzzing time.)"""
    cfg = result.config
    primary: set[Key] = {("block_size", str(cfg.block_size)),
                         ("cpu", str(cfg.num_cpu_blocks > 0)),
                         ("long_pool", str(cfg.num_gpu_blocks > MAX_GPU_BLOCKS))}
    secondary: set[Key] = set()
    previous = "start"
    for op, outcome in zip(result.program, result.outcomes, strict=True):
        primary.add((op.kind, "ok" if outcome.error is None else outcome.error.value))
        secondary.add(("then", previous, op.kind))
        previous = op.kind
        if outcome.cows:
            primary.add((op.kind, "cow"))
        if len(outcome.new_blocks) > RECURSION_LIMIT:
            primary.add((op.kind, "chain past the recursion limit"))
    return primary, secondary


def choose_seeds(harness: Harness, rng: random.Random) -> list[tuple[bytes, Execution]]:
    """A greedy cover over seeded random candidates: operation kinds first (so every kind some
    candidate reaches is in the corpus), then primary keys, then pairs of consecutive kinds,
    shorter candidates winning ties; at most ``MAX_SEEDS``."""
    candidates: list[tuple[bytes, Execution, set[Key], set[Key]]] = []
    for _ in range(CANDIDATES):
        size = rng.choice((8, 16, 24, 32, 48, 64))
        data = rng.randbytes(size)
        result = harness.run(data)
        if result.violation is None and result.stopped is None:
            candidates.append((data, result, *_keys(result)))
    chosen: list[tuple[bytes, Execution]] = [(b"", harness.run(b""))]
    covered: set[Key] = set()

    def gain(c: tuple[bytes, Execution, set[Key], set[Key]]) -> tuple[int, int, int, int]:
        kinds = {op.kind for op in c[1].program} - covered_kinds
        return len(kinds), len(c[2] - covered), len(c[3] - covered), -len(c[0])

    covered_kinds: set[str] = set()
    while len(chosen) < MAX_SEEDS and candidates:
        best = max(candidates, key=gain)
        if gain(best)[:3] == (0, 0, 0):
            break
        covered |= best[2] | best[3]
        covered_kinds |= {op.kind for op in best[1].program}
        chosen.append((best[0], best[1]))
        candidates.remove(best)
    return chosen


#: Kinds random inputs of seed size practically never reach (a tracked sequence whose
#: computed ids outgrow another table needs a dozen exact picks in a row); the reach tests
#: build their inputs by hand (tests/fuzz/test_freed_behind_reach.py).
RARE_KINDS = frozenset({"seq_lost_blocks"})

#: Extra candidates searched for kinds the greedy cover missed, and the seeds they may add.
RARE_CANDIDATES = 6000
MAX_RARE_SEEDS = 8


def rare_kind_seeds(harness: Harness, rng: random.Random,
                    seeds: list[tuple[bytes, Execution]]) -> list[tuple[bytes, Execution]]:
    """Seeds for the decodable kinds ``seeds`` lack (rare states, such as a tracked sequence
    that lost blocks), from longer random candidates: one per kind, at most
    ``MAX_RARE_SEEDS``, so the corpus reaches the whole vocabulary."""
    missing = set(decodable_kinds(harness.target, harness.level)) - RARE_KINDS
    missing -= {op.kind for _, result in seeds for op in result.program}
    extra: list[tuple[bytes, Execution]] = []
    for _ in range(RARE_CANDIDATES):
        if not missing or len(extra) >= MAX_RARE_SEEDS:
            break
        data = rng.randbytes(rng.choice((48, 64, 96, 128)))
        result = harness.run(data)
        kinds = {op.kind for op in result.program} & missing
        if kinds and result.violation is None and result.stopped is None:
            extra.append((data, result))
            missing -= kinds
    return extra


def dictionary_entries(seeds: list[tuple[bytes, Execution]]) -> list[bytes]:
    """Single-operation byte runs from the seeds, distinct, shortest first."""
    pieces: set[bytes] = set()
    for data, result in seeds:
        bounds = [*result.op_starts, result.consumed]
        for start, end in itertools.pairwise(bounds):
            piece = data[start:end]
            if 2 <= len(piece) <= 24:
                pieces.add(piece)
    return sorted(pieces, key=lambda p: (len(p), p))[:MAX_DICT]


def _dict_text(name: str, entries: list[bytes]) -> str:
    lines = [f"# libFuzzer dictionary for fuzz_{name}: byte runs of single operations cut from",
             "# the seed corpus (regenerate with: python -m fuzz corpus)."]
    for i, entry in enumerate(entries):
        body = "".join(f"\\x{b:02x}" for b in entry)
        lines.append(f'op{i}="{body}"')
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- arc cover

#: Where the arc-cover corpus lives, under ``fuzz/``; one directory per harness.
ARC_CORPUS = "arc_corpus"
ARC_CANDIDATES = 800
ARC_SIZES = (16, 32, 48, 64, 96, 128)
#: Replay-time cap: the three arc corpora replay in a few seconds.
MAX_ARC_SEEDS = 120

#: An arc: (file, from line, to line); a function's entry and exit are its first line negated,
#: as coverage.py writes them.
Arc = tuple[str, int, int]
T = TypeVar("T")


def bundled_package_dir() -> str:
    """The bundled allocator's source directory (imported here only: replaying the corpora
    against another target does not import it)."""
    import prefixcache

    return str(Path(prefixcache.__file__).resolve().parent)


def traced_arcs(run: Callable[[], T], root: str | None = None) -> tuple[T, frozenset[Arc]]:
    """``run()``'s result and the arcs it executed in the files under ``root`` (the bundled
    allocator's by default; ``sys.settrace``, frames elsewhere are not traced line by line).
    Restores the tracer it found."""
    root = bundled_package_dir() if root is None else root
    arcs: set[Arc] = set()

    def call(frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        code = frame.f_code
        name = code.co_filename
        if not name.startswith(root):
            return None
        entry = -code.co_firstlineno
        last = entry

        def line(frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
            nonlocal last
            if event == "line":
                arcs.add((name, last, frame.f_lineno))
                last = frame.f_lineno
            elif event == "return":
                arcs.add((name, last, entry))
            return line

        return line

    previous = sys.gettrace()
    sys.settrace(call)
    try:
        result = run()
    finally:
        sys.settrace(previous)
    return result, frozenset(arcs)


PressureKey = tuple[object, ...]


def pressure_keys(harness: Harness, result: Execution) -> set[PressureKey]:
    """Each step's outcome at the free-count boundary, per device: the free count before it
    (0, 1, 2, 3 or more), what it took (-1 when it gave back, 0, 1, 2, 3 or more), whether
    it left the device with none, and its copy-on-write copies (0, 1, 2 or more). Admission
    estimates (copy-on-write copies, hits, extra hashes, ids a window gives back) decide
    exactly these steps, and random inputs reach them only by luck. The program is re-run on
    a fresh runner (the public ``Runner`` API) for the free count before each step."""
    runner = Runner(harness.target, result.config)
    before = runner.snapshot().free
    keys: set[PressureKey] = set()
    for op, expected in zip(result.program, result.outcomes, strict=True):
        outcome, snapshot = runner.execute(op)
        if outcome.error != expected.error:  # pragma: no cover - the runner is deterministic
            break
        err = "ok" if outcome.error is None else outcome.error.value
        for dev, had in before.items():
            left = snapshot.free.get(dev, had)
            keys.add((op.kind, err, dev.value, min(had, 3), max(-1, min(had - left, 3)),
                      left == 0, min(len(outcome.cows), 2)))
        before = snapshot.free
    return keys


def choose_arc_seeds(harness: Harness, rng: random.Random, base: list[bytes]
                     ) -> list[tuple[bytes, Execution]]:
    """A greedy cover (afl-cmin style) over seeded random candidates, on top of what ``base``
    (the seed corpus) reaches: arcs of the bundled allocator first, then steps at the
    free-count boundary (:func:`pressure_keys`), shorter candidates winning ties; at most
    ``MAX_ARC_SEEDS``."""
    arcs: set[Arc] = set()
    pressure: set[PressureKey] = set()
    for data in base:
        result, reached = traced_arcs(partial(harness.run, data))
        arcs |= reached
        pressure |= pressure_keys(harness, result)
    candidates: list[tuple[bytes, Execution, frozenset[Arc], set[PressureKey]]] = []
    for _ in range(ARC_CANDIDATES):
        data = rng.randbytes(rng.choice(ARC_SIZES))
        result, reached = traced_arcs(partial(harness.run, data))
        if result.violation is None and result.stopped is None:
            candidates.append((data, result, reached, pressure_keys(harness, result)))

    def gain(c: tuple[bytes, Execution, frozenset[Arc], set[PressureKey]]
             ) -> tuple[int, int, int]:
        return len(c[2] - arcs), len(c[3] - pressure), -len(c[0])

    chosen: list[tuple[bytes, Execution]] = []
    while len(chosen) < MAX_ARC_SEEDS and candidates:
        best = max(candidates, key=gain)
        if gain(best)[:2] == (0, 0):
            break
        arcs |= best[2]
        pressure |= best[3]
        chosen.append((best[0], best[1]))
        candidates.remove(best)
    return chosen


def _write_corpus(out: Path, seeds: list[bytes]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for old in out.iterdir():
        old.unlink()
    for data in seeds:
        (out / hashlib.sha1(data).hexdigest()[:16]).write_bytes(data)


def regenerate(fuzz_dir: Path, *, seed: int = 0) -> dict[str, set[str]]:
    """Rewrite every harness's corpus and dictionary; returns the kinds each corpus covers."""
    covered: dict[str, set[str]] = {}
    for level in Level:
        harness = Harness(level)
        rng = random.Random(f"{seed}/{level.value}")
        seeds = choose_seeds(harness, rng)
        seeds += rare_kind_seeds(harness, rng, seeds)
        out = fuzz_dir / "corpus" / level.value
        _write_corpus(out, [data for data, _ in seeds])
        (fuzz_dir / f"{level.value}.dict").write_text(
            _dict_text(level.value, dictionary_entries(seeds)), encoding="utf-8")
        kinds = {op.kind for _, result in seeds for op in result.program}
        want = decodable_kinds(harness.target, level)
        covered[level.value] = kinds
        missing = sorted(want - kinds - RARE_KINDS)
        print(f"{out}: {len(seeds)} seeds, {sum(len(d) for d, _ in seeds)} bytes, "
              f"{len(kinds)} operation kinds" + (f"; MISSING {missing}" if missing else ""))
        arc_seeds = choose_arc_seeds(harness, random.Random(f"{seed}/{level.value}/arcs"),
                                     [data for data, _ in seeds])
        arc_out = fuzz_dir / ARC_CORPUS / level.value
        _write_corpus(arc_out, [data for data, _ in arc_seeds])
        print(f"{arc_out}: {len(arc_seeds)} seeds, {sum(len(d) for d, _ in arc_seeds)} bytes")
    return covered
