"""The decoder route's harness (a family's hand-written decoder, its
:class:`properties.core.roles.Fuzzing` role; no family in the tree has one, every harness file
goes through :mod:`fuzz.core.machine_harness`): target selection, one input to a verdict, and
the atheris driver; and what both routes share: crash artifacts, the libFuzzer entry, quiet
target logs.

``TestOneInput(data)`` decodes ``data`` into a program, runs it against the selected target
under the oracle, and raises the :class:`~models.core.invariants.Violation` if one is found (with
the readable program attached as a note). Selection is the plugin's: ``--allocator SPEC`` (taken out
of ``sys.argv`` before libFuzzer sees it) or ``$PREFIXCACHE_ALLOCATOR``, else the bundled allocator.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from fuzz.core.execution import Execution, execute, fuzzing
from properties.core import family as families
from properties.core import selection
from properties.core.roles import Fuzzing, WeakHashing
from properties.core.targets import ENV_VAR, Target, load_target

#: Environment variable naming the directory for crash artifacts (default: current dir).
ARTIFACTS_VAR = "PREFIXCACHE_FUZZ_ARTIFACTS"
#: Set to ``weak`` to inject the family's weak hash into its bundled allocator
#: (:class:`properties.core.roles.WeakHashing`).
HASH_MODE_VAR = "PREFIXCACHE_FUZZ_HASH"


@dataclass
class Harness:
    """One named harness: a decoding level (of the target's family) and how its target is
    built."""

    level: Any
    weak_hash: bool = False
    spec: str | None = None
    family: str | None = None  # the level's family (None: detected from the spec)
    _target: Target | None = field(default=None, init=False, repr=False)

    @property
    def name(self) -> str:
        return str(self.level.value)

    @property
    def target(self) -> Target:
        """The selected target (loaded once): ``spec`` (its family named or detected), else
        the environment's or the bundled target of ``family``, else the session's selection;
        the bundled allocator with the weak hash in weak mode."""
        if self._target is None:
            if self.weak_hash:
                chosen = families.select(self.spec, self.family)
                if not isinstance(chosen, WeakHashing):
                    raise ValueError(f"family {chosen.name!r} has no weak-hash mode")
                self._target = chosen.weak_hash_target(self.level)
            elif self.spec is not None or self.family is not None:
                self._target = load_target(self.spec, family=self.family)
            else:
                self._target = selection.current_target()
        return self._target

    def bind(self, target: Target) -> Harness:
        """Use ``target`` instead of the selected one (returns self)."""
        self._target = target
        return self

    def run(self, data: bytes) -> Execution:
        return execute(data, self.target, self.level)

    def test_one_input(self, data: bytes) -> None:
        """libFuzzer's entry: raise the violation, if any."""
        result = self.run(data)
        if result.violation is not None:
            violation = result.violation
            violation.add_note(self.listing(result))
            raise violation

    def listing(self, result: Execution) -> str:
        """``result``'s program as text (the family's listing)."""
        fuzz = fuzzing(self.target)
        return fuzz.format_program(self.target.family_object.vocabulary.geometry(result.config),
                                   result.program, result.outcomes)

    # ------------------------------------------------------------------ artifacts

    def crash_record(self, data: bytes, result: Execution) -> dict[str, Any]:
        """What a crash file's JSON sidecar holds: enough to rebuild the program without
        decoding again (decoding depends on the target's responses)."""
        vocabulary = self.target.family_object.vocabulary
        return {
            "harness": self.name,
            "target": self.target.spec,
            "allocator_type": self.target.allocator_type,
            "weak_hash": self.weak_hash,
            "input_sha1": hashlib.sha1(data).hexdigest(),
            "config": vocabulary.geometry(result.config),
            "family": None if result.violation is None else result.violation.family.value,
            "violation": None if result.violation is None else str(result.violation),
            "program": [vocabulary.op_to_json(op) for op in result.program],
        }

    def write_crash(self, data: bytes, result: Execution, directory: Path) -> Path:
        """``crash-<harness>-<sha1>`` and its ``.json`` record (:func:`write_crash_files`)."""
        return write_crash_files(self.name, data, self.crash_record(data, result), directory)

    # ------------------------------------------------------------------ atheris

    def fuzz_main(self, argv: Sequence[str]) -> None:
        """Run under atheris/libFuzzer: ``script.py [--allocator SPEC] [libFuzzer flags]``."""
        from fuzz.core.instrumentation import atheris_module, instrumented

        args = take_allocator(list(argv))
        quiet_target_logs()
        atheris = atheris_module()
        if atheris is None:
            raise SystemExit("atheris is not installed: pip install 'prefixcache[fuzz]', or "
                             f"use the built-in engine: python -m fuzz run {self.name}")
        spec = (self.spec or os.environ.get(ENV_VAR)
                or families.select(None, self.family).default_spec)
        with instrumented(True, [spec.partition(":")[0].split(".")[0]]):
            target = self.target  # imports the target's package under instrumentation
        sys.stderr.write(f"[{self.name}] target: {target.describe()}\n")
        atheris.Setup(args, libfuzzer_entry(self))
        atheris.Fuzz()


def write_crash_files(name: str, data: bytes, record: dict[str, Any], directory: Path) -> Path:
    """``crash-<name>-<sha1>`` (the raw input) and the same name ``.json`` (``record``) in
    ``directory``, for either route's harness; returns the input's path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"crash-{name}-{hashlib.sha1(data).hexdigest()[:16]}"
    path.write_bytes(data)
    path.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return path


class Fuzzable(Protocol):
    """What :func:`libfuzzer_entry` reads of a harness (either route's)."""

    @property
    def name(self) -> str: ...

    def run(self, data: bytes) -> Execution: ...

    def write_crash(self, data: bytes, result: Execution, directory: Path) -> Path: ...

    def listing(self, result: Execution) -> str: ...


def libfuzzer_entry(harness: Fuzzable) -> Callable[[bytes], None]:
    """``harness``'s libFuzzer entry: progress lines on stderr and, on a violation, the
    program printed and a crash record written (in ``$PREFIXCACHE_FUZZ_ARTIFACTS``, default
    the current directory) before the violation is raised for libFuzzer to save its
    artifact."""
    started = time.monotonic()
    state = {"execs": 0, "last": started}
    artifacts = Path(os.environ.get(ARTIFACTS_VAR, "."))

    def entry(data: bytes) -> None:
        state["execs"] += 1
        now = time.monotonic()
        if now - state["last"] >= 5.0:
            state["last"] = now
            rate = state["execs"] / max(now - started, 1e-9)
            sys.stderr.write(f"[{harness.name}] {now - started:7.1f}s  execs={state['execs']}"
                             f"  exec/s={rate:.1f}  failures=0\n")
        result = harness.run(data)
        if result.violation is not None:
            path = harness.write_crash(data, result, artifacts)
            sys.stderr.write(f"\n[{harness.name}] VIOLATION\n{result.violation}\n\n"
                             f"{harness.listing(result)}"
                             f"\n\ncrash input: {path}\n")
            raise result.violation

    return entry


def quiet_target_logs() -> None:
    """Allocators may log a warning per refused call (e.g. a cache reset while blocks are in
    use), thousands of times a second under a fuzzer."""
    logging.getLogger("prefixcache").setLevel(logging.ERROR)


def take_allocator(argv: list[str]) -> list[str]:
    """Remove ``--allocator SPEC`` / ``--allocator=SPEC`` from ``argv`` and export it as
    ``$PREFIXCACHE_ALLOCATOR`` (libFuzzer would read it as a corpus directory)."""
    out: list[str] = []
    it = iter(argv)
    for arg in it:
        if arg == "--allocator":
            spec = next(it, None)
            if spec:
                os.environ[ENV_VAR] = spec
        elif arg.startswith("--allocator="):
            os.environ[ENV_VAR] = arg.split("=", 1)[1]
        else:
            out.append(arg)
    if os.environ.get(ENV_VAR):
        selection.select(os.environ[ENV_VAR])
    return out


def harness_for(name: str, *, weak_hash: bool = False, spec: str | None = None,
                family: str | None = None) -> Harness:
    """The harness called ``name`` of the target's family (``family``, else detected from
    ``spec`` or ``$PREFIXCACHE_ALLOCATOR``; its family's ``fuzz_levels``, e.g. ``block_level``,
    ``hashing``)."""
    chosen = families.select(spec or os.environ.get(ENV_VAR), family)
    if not isinstance(chosen, Fuzzing):
        raise ValueError(f"family {chosen.name!r} has no fuzz levels")
    try:
        level = chosen.fuzz_level(name)
    except ValueError:
        known = ", ".join(chosen.fuzz_levels)
        raise ValueError(f"unknown harness {name!r}; known: {known}") from None
    weak_levels = chosen.weak_hash_levels if isinstance(chosen, WeakHashing) else ()
    if weak_hash and name not in weak_levels:
        raise ValueError(f"the weak hash mode belongs to the "
                         f"{' or '.join(weak_levels) or 'no'} harness")
    return Harness(level, weak_hash=weak_hash, spec=spec, family=family)
