"""What every third-party xfails file (``conformance/<release>.xfails.json``) must satisfy,
shared by the per-release test modules: the file is well formed and each entry has a script;
each entry's program still fails against the upstream target with a violation the entry (and
no other entry) matches, at its last step; it passes against the bundled allocator; its
script prints the violation. The upstream-dependent checks skip, naming the fetch command,
when the release's wheel is not cached (``.ci/run`` fetches every one first)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from models.core.invariants import Violation
from models.families.v0.capabilities import Config, tolerating
from models.families.v0.invariants import Family
from models.families.v0.operations import Op, op_from_json
from properties.core.plugin import ExpectedFailure, load_expected, tolerated_by
from properties.core.replay import run_program
from properties.core.targets import Target, load_target
from properties.families.v0.upstream import UpstreamSourceMissing

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = "prefixcache.cpu_gpu_block_allocator:CpuGpuBlockAllocator.create"
CLASSES = {"real upstream bug", "upstream design deviation"}


@dataclass(frozen=True)
class XfailsFile:
    """One release's expected failures, its scripts and the upstream target they judge."""

    release: str  # e.g. "aphrodite-0.6.5": conformance/<release>.xfails.json and <release>/
    spec: str
    load: Callable[[], object]  # loads the upstream modules; UpstreamSourceMissing if absent
    fetch_command: str
    entries: list[ExpectedFailure] = field(init=False)
    raw: dict[str, dict[str, Any]] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "entries", load_expected(str(self.path), Family))
        object.__setattr__(self, "raw", {e["id"]: e for e in json.loads(
            self.path.read_text("utf-8"))})

    @property
    def path(self) -> Path:
        return ROOT / "conformance" / f"{self.release}.xfails.json"

    @property
    def scripts(self) -> Path:
        return ROOT / "conformance" / self.release

    @property
    def ids(self) -> list[str]:
        return [e.id for e in self.entries]

    def target(self) -> Iterator[Target]:
        """The upstream target (a fixture body: skips when the wheel is not cached)."""
        try:
            self.load()
        except UpstreamSourceMissing:
            pytest.skip(f"{self.release} wheel not cached; fetch it with `{self.fetch_command}`")
        logging.disable(logging.WARNING)  # upstream warns on every refused prefix-cache reset
        try:  # the model follows the entries' tolerated deviations, as in the CI run
            target = load_target(self.spec)
            yield replace(target, caps=tolerating(target.caps, tolerated_by(self.entries)))
        finally:
            logging.disable(logging.NOTSET)


def program(entry: ExpectedFailure) -> list[Op]:
    return [op_from_json(op) for op in entry.program]


def run(target: Target, entry: ExpectedFailure, entries: list[ExpectedFailure]) -> None:
    """Replay ``entry`` against ``target`` built as the allocator type the entry records,
    judged with the other ``entries``' tolerated deviations (never its own)."""
    if target.allocator_type != entry.allocator_type:
        target = load_target(target.spec, allocator_type=entry.allocator_type)
    caps = tolerating(target.caps, tolerated_by(entries, entry))
    run_program(target, Config(caps=caps, **entry.config), program(entry))


def violation_of(target: Target, entry: ExpectedFailure,
                 entries: list[ExpectedFailure]) -> Violation:
    with pytest.raises(Violation) as info:
        run(target, entry, entries)
    return info.value


def check_well_formed(file: XfailsFile) -> None:
    assert file.entries and len(file.ids) == len(set(file.ids))
    for entry in file.entries:
        raw = file.raw[entry.id]
        assert raw.get("class") in CLASSES, entry.id
        assert 1 <= len(entry.program) <= 10, entry.id
        assert len(entry.explanation) > 80, entry.id
        assert entry.family is not Family.CRASH or entry.families or entry.after, entry.id
        assert (file.scripts / f"{entry.id}.py").is_file(), f"render it: {entry.id}"
        assert raw.get("allocator_type") in ("prefix_caching", "naive"), entry.id


def check_reproduces(file: XfailsFile, target: Target, entry: ExpectedFailure) -> None:
    violation = violation_of(target, entry, file.entries)
    history = program(entry)[: (violation.step or 0) + 1]
    assert violation.family is entry.family, str(violation)
    assert entry.matches(violation, history, entry.allocator_type), str(violation)
    assert violation.step == len(entry.program) - 1, "the program should end at its violation"


def check_only_entry(file: XfailsFile, target: Target, entry: ExpectedFailure) -> None:
    """A broad clause listed earlier (the first match wins) must not swallow another entry's
    reproducer: each entry documents its own deviation."""
    violation = violation_of(target, entry, file.entries)
    history = program(entry)[: (violation.step or 0) + 1]
    matched = [e.id for e in file.entries
               if e.matches(violation, history, entry.allocator_type)]
    assert matched == [entry.id], str(violation)


def check_script(file: XfailsFile, entry: ExpectedFailure) -> None:
    result = subprocess.run([sys.executable, str(file.scripts / f"{entry.id}.py")],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "observed:" in result.stdout
    assert f"violation: [{entry.family.value}]" in result.stdout, result.stdout
