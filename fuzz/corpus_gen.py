"""Regenerates the seed corpora (``fuzz/corpus/<harness>/``) and dictionaries
(``fuzz/<harness>.dict``): ``python -m fuzz corpus [--seed N]``.

Seeds are chosen, not written by hand: a seeded random search decodes candidate inputs against
the bundled allocator, and a greedy cover keeps the few dozen small inputs that together reach
every operation kind of the harness, each with every outcome it showed (success, no free
blocks, typed misuse), plus the empty input. Dictionary entries are the bytes of single
operations cut from the chosen seeds at their operation boundaries, so libFuzzer can splice
whole operations.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from pathlib import Path

from fuzz.decoder import Decoder, Level
from fuzz.execution import Execution
from fuzz.harness import Harness

CANDIDATES = 1500
MAX_SEEDS = 36
MAX_DICT = 48


def _keys(result: Execution) -> set[tuple[str, str]]:
    """What a seed shows: each kind with each outcome, each pair of consecutive kinds, and
    the pool shape (block size, whether there is a CPU pool)."""
    cfg = result.config
    keys = {("block_size", str(cfg.block_size)), ("cpu", str(cfg.num_cpu_blocks > 0))}
    previous = "start"
    for op, outcome in zip(result.program, result.outcomes, strict=True):
        keys.add((op.kind, "ok" if outcome.error is None else outcome.error.value))
        keys.add((previous, op.kind))
        previous = op.kind
        if outcome.cows:
            keys.add((op.kind, "cow"))
    return keys


def choose_seeds(harness: Harness, rng: random.Random) -> list[tuple[bytes, Execution]]:
    """A greedy cover of (kind, outcome) keys over seeded random candidates; shorter
    candidates win ties."""
    candidates: list[tuple[bytes, Execution, set[tuple[str, str]]]] = []
    for _ in range(CANDIDATES):
        size = rng.choice((8, 16, 24, 32, 48, 64))
        data = rng.randbytes(size)
        result = harness.run(data)
        if result.violation is None and result.stopped is None:
            candidates.append((data, result, _keys(result)))
    chosen: list[tuple[bytes, Execution]] = [(b"", harness.run(b""))]
    covered: set[tuple[str, str]] = set()
    while len(chosen) < MAX_SEEDS:
        best = max(candidates, key=lambda c: (len(c[2] - covered), -len(c[0])), default=None)
        if best is None or not best[2] - covered:
            break
        covered |= best[2]
        chosen.append((best[0], best[1]))
        candidates.remove(best)
    return chosen


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


def regenerate(fuzz_dir: Path, *, seed: int = 0) -> dict[str, set[str]]:
    """Rewrite every harness's corpus and dictionary; returns the kinds each corpus covers."""
    covered: dict[str, set[str]] = {}
    for level in Level:
        harness = Harness(level)
        rng = random.Random(f"{seed}/{level.value}")
        seeds = choose_seeds(harness, rng)
        out = fuzz_dir / "corpus" / level.value
        out.mkdir(parents=True, exist_ok=True)
        for old in out.iterdir():
            old.unlink()
        for data, _ in seeds:
            (out / hashlib.sha1(data).hexdigest()[:16]).write_bytes(data)
        (fuzz_dir / f"{level.value}.dict").write_text(
            _dict_text(level.value, dictionary_entries(seeds)), encoding="utf-8")
        kinds = {op.kind for _, result in seeds for op in result.program}
        want = Decoder(b"", level, harness.target.caps).kinds()
        covered[level.value] = kinds
        missing = sorted(want - kinds)
        print(f"{out}: {len(seeds)} seeds, {sum(len(d) for d, _ in seeds)} bytes, "
              f"{len(kinds)} operation kinds" + (f"; MISSING {missing}" if missing else ""))
    return covered
