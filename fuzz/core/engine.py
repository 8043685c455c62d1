"""The built-in fuzzing engine: a deterministic, seeded mutation fuzzer over a corpus, used
when atheris is not installed (or when asked for), and by the zoo measurement.

Every random choice comes from ``random.Random(seed)``: the same seed, corpus and number of
executions give the same inputs in the same order. Mutations are bit flips, byte sets, byte
inserts and deletes, block duplication, splices of two corpus entries, and dictionary
insertions. Guidance is behavioural coverage (``Execution.features``): an input whose steps
behave in a way no earlier input did joins the corpus.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from fuzz.core.progress import Progress
from models.core.invariants import Violation

MAX_LEN = 512

Feature = tuple[object, ...]


class Result(Protocol):
    """What the engine reads of one execution (any family's): the verdict, whether the
    program ended early, its behavioural features and the operations run (each with a
    ``kind`` or a ``name``)."""

    @property
    def violation(self) -> Violation | None: ...
    @property
    def stopped(self) -> str | None: ...
    @property
    def features(self) -> set[Feature]: ...
    @property
    def program(self) -> Sequence[object]: ...


R = TypeVar("R", bound=Result)


@dataclass
class Failure(Generic[R]):
    """One distinct failure: its input, the execution, and when it was found."""

    data: bytes
    result: R
    execs: int
    seconds: float
    path: Path | None = None

    @property
    def signature(self) -> tuple[str, str]:
        v = self.result.violation
        last = self.result.program[-1] if self.result.program else None
        op = "start" if last is None else str(getattr(last, "kind", None)
                                               or getattr(last, "name", type(last).__name__))
        return ("" if v is None else v.family.value, op)


@dataclass
class Stats(Generic[R]):
    execs: int = 0
    seconds: float = 0.0
    corpus: int = 0
    features: int = 0
    failures: list[Failure[R]] = field(default_factory=list)
    stopped_early: int = 0


class Mutator:
    """Seeded byte-string mutations."""

    def __init__(self, rng: random.Random, dictionary: Iterable[bytes] = ()) -> None:
        self.rng = rng
        self.dictionary = [d for d in dictionary if d]

    def mutate(self, data: bytes, other: bytes) -> bytes:
        buf = bytearray(data)
        for _ in range(1 + self.rng.randrange(4)):
            self._once(buf, other)
        return bytes(buf[:MAX_LEN])

    def _once(self, buf: bytearray, other: bytes) -> None:
        rng = self.rng
        choice = rng.randrange(8 if self.dictionary else 7)
        if not buf or choice == 0:  # insert random bytes
            pos = rng.randrange(len(buf) + 1)
            buf[pos:pos] = rng.randbytes(1 + rng.randrange(8))
        elif choice == 1:  # bit flip
            pos = rng.randrange(len(buf))
            buf[pos] ^= 1 << rng.randrange(8)
        elif choice == 2:  # set a byte
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        elif choice == 3:  # nudge a byte (neighbouring choice)
            pos = rng.randrange(len(buf))
            buf[pos] = (buf[pos] + rng.choice((-1, 1))) % 256
        elif choice == 4:  # delete a range
            pos = rng.randrange(len(buf))
            del buf[pos:pos + 1 + rng.randrange(8)]
        elif choice == 5:  # duplicate a range
            pos = rng.randrange(len(buf))
            piece = buf[pos:pos + 1 + rng.randrange(16)]
            at = rng.randrange(len(buf) + 1)
            buf[at:at] = piece
        elif choice == 6:  # splice with another corpus entry
            if other:
                cut = rng.randrange(len(buf) + 1)
                start = rng.randrange(len(other))
                buf[cut:] = other[start:]
        else:  # dictionary entry
            word = rng.choice(self.dictionary)
            pos = rng.randrange(len(buf) + 1)
            buf[pos:pos] = word


class Engine(Generic[R]):
    """Runs ``run_one`` over mutated corpus inputs until a time or execution budget ends."""

    def __init__(self, run_one: Callable[[bytes], R], seeds: Iterable[bytes], *,
                 seed: int = 0, dictionary: Iterable[bytes] = (),
                 corpus_dir: Path | None = None,
                 on_failure: Callable[[Failure[R]], Path | None] | None = None,
                 progress: Progress | None = None) -> None:
        self.run_one = run_one
        self.rng = random.Random(seed)
        self.mutator = Mutator(self.rng, dictionary)
        self.corpus: list[bytes] = []
        self.seen_inputs: set[bytes] = set()
        self.features: set[Feature] = set()
        self.corpus_dir = corpus_dir
        self.on_failure = on_failure
        self.progress = progress
        self.stats: Stats[R] = Stats()
        self.signatures: set[tuple[str, str]] = set()
        self._started = 0.0
        self._seeds = [bytes(s) for s in seeds] or [b""]

    def fuzz(self, *, seconds: float | None = None, max_execs: int | None = None,
             stop_on_failure: bool = False) -> Stats[R]:
        """Run the seeds, then mutants, until ``seconds`` or ``max_execs`` is reached."""
        self._started = time.monotonic()
        for data in self._seeds:
            if self._budget_left(seconds, max_execs) and not self._one(data, seed_input=True) \
                    and stop_on_failure:
                return self._finish()
        if not self.corpus:
            self.corpus.append(b"")
        while self._budget_left(seconds, max_execs):
            parent = self.rng.choice(self.corpus)
            other = self.rng.choice(self.corpus)
            child = self.mutator.mutate(parent, other)
            if child in self.seen_inputs:
                continue
            if not self._one(child) and stop_on_failure:
                break
        return self._finish()

    def _budget_left(self, seconds: float | None, max_execs: int | None) -> bool:
        if max_execs is not None and self.stats.execs >= max_execs:
            return False
        return seconds is None or time.monotonic() - self._started < seconds

    def _one(self, data: bytes, *, seed_input: bool = False) -> bool:
        """Execute one input; False if it failed."""
        self.seen_inputs.add(data)
        result = self.run_one(data)
        self.stats.execs += 1
        if result.stopped:
            self.stats.stopped_early += 1
        new = result.features - self.features
        if new or seed_input:
            self.features |= result.features
            self.corpus.append(data)
            if new and self.corpus_dir is not None and not seed_input:
                self.corpus_dir.mkdir(parents=True, exist_ok=True)
                name = hashlib.sha1(data).hexdigest()[:16]
                (self.corpus_dir / name).write_bytes(data)
        self._report()
        if result.violation is None:
            return True
        failure = Failure(data, result, self.stats.execs, time.monotonic() - self._started)
        if failure.signature not in self.signatures:
            self.signatures.add(failure.signature)
            if self.on_failure is not None:
                failure.path = self.on_failure(failure)
        self.stats.failures.append(failure)
        return False

    def _report(self, final: bool = False) -> None:
        self.stats.seconds = time.monotonic() - self._started
        self.stats.corpus = len(self.corpus)
        self.stats.features = len(self.features)
        if self.progress is not None:
            self.progress.update(self.stats.execs, self.stats.corpus, len(self.stats.failures),
                                 self.stats.features, final=final)

    def _finish(self) -> Stats[R]:
        self._report(final=True)
        return self.stats


def minimize(data: bytes, still_fails: Callable[[bytes], bool], *,
             max_tries: int = 2000) -> bytes:
    """A shorter input that still fails: delete chunks of halving size, then zero bytes
    (zero is every choice's default), keeping each change that still fails."""
    best = data
    tries = 0
    chunk = max(len(best) // 2, 1)
    while chunk >= 1 and tries < max_tries:
        pos = 0
        while pos < len(best) and tries < max_tries:
            candidate = best[:pos] + best[pos + chunk:]
            tries += 1
            if still_fails(candidate):
                best = candidate
            else:
                pos += chunk
        chunk //= 2
    for pos in range(len(best)):
        if tries >= max_tries or best[pos] == 0:
            continue
        candidate = best[:pos] + b"\0" + best[pos + 1:]
        tries += 1
        if still_fails(candidate):
            best = candidate
    return best
