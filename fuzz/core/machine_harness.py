"""Fuzzing a family through its own Hypothesis machines: one generator for both.

A family's state machines (the ``Test*`` machine test cases of the modules in
``family.machines``) are the generator the suite runs under Hypothesis. Here the same machines
draw their programs from a fuzzer's bytes instead: each input goes to Hypothesis's
``fuzz_one_input`` of the machine's test (``hypothesis.stateful.get_state_machine_test``), so
every production the machines write (which rule, which arguments, in which state) is the
fuzzer's too, and a family needs no decoder of its own to be fuzzed.

Contract: :meth:`MachineHarness.run` never raises for anything the target does: a broken
invariant comes back as ``Execution.violation`` (the machine's ``Violation``, its replayable
script attached as a note), a program the model could not judge or an input that ran out of
bytes as ``Execution.stopped``. The judge's log is the program (``Execution.program``). Exceptions
that escape are bugs of the suite.

Levels: one per machine test case, named from its test name (``TestToy`` -> ``toy``,
``TestBlockLevel`` -> ``block_level``).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import pkgutil
import random
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, get_state_machine_test

from fuzz.core.execution import Execution, size_rung
from fuzz.core.harness import (
    HASH_MODE_VAR,
    libfuzzer_entry,
    quiet_target_logs,
    take_allocator,
    write_crash_files,
)
from fuzz.core.instrumentation import atheris_module, instrumented
from models.core.invariants import Violation
from properties.core import family as families
from properties.core import selection
from properties.core.family import Family
from properties.core.roles import WeakHashing
from properties.core.targets import ENV_VAR, Target, load_target

#: Inputs the built-in engine starts from when no corpus is given: seeded random
#: bytes of a few lengths (a fuzzer grows them; a short input ends its program early).
SEED_LENGTHS: tuple[int, ...] = (64, 128, 256, 512)


@dataclass(frozen=True)
class MachineLevel:
    """One machine of a family: ``value`` is the level's name."""

    value: str
    machine: type[RuleBasedStateMachine]


def level_name(test_name: str) -> str:
    """``TestBlockLevel`` -> ``block_level``."""
    stem = test_name.removeprefix("Test") or test_name
    return re.sub(r"(?<!^)(?=[A-Z])", "_", stem).lower()


def _import(path: Path) -> ModuleType:
    """The module at ``path``, by its dotted name where its package is importable (so its
    classes are the ones pytest sees), else from the file."""
    parts = [path.stem]
    parent = path.parent
    while (parent / "__init__.py").is_file():
        parts.insert(0, parent.name)
        parent = parent.parent
    dotted = ".".join(parts)
    try:
        return importlib.import_module(dotted)
    except ImportError:
        spec = importlib.util.spec_from_file_location(f"_prefixcache_machines.{dotted}", path)
        if spec is None or spec.loader is None:
            raise
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module


def _package_name(directory: Path) -> str | None:
    """The dotted name ``directory`` has as a package under an entry of ``sys.path``."""
    for entry in sys.path:
        try:
            relative = directory.relative_to(Path(entry or ".").resolve())
        except ValueError:
            continue
        if relative.parts and all(part.isidentifier() for part in relative.parts):
            return ".".join(relative.parts)
    return None


def _machine_modules(directory: Path) -> list[ModuleType]:
    """The ``test_*`` modules of ``directory``, in name order: its ``test_*.py`` files, else,
    where it has none on disk (a zip, a PyInstaller bundle: the build names the modules as
    hidden imports), the ``test_*`` submodules of the package it is on ``sys.path``."""
    paths = sorted(directory.glob("test_*.py"))
    if paths:
        return [_import(path) for path in paths]
    package = _package_name(directory)
    if package is None:
        return []
    try:
        found = importlib.import_module(package)
    except ImportError:
        return []
    names = sorted(info.name for info in pkgutil.iter_modules(getattr(found, "__path__", []))
                   if info.name.startswith("test_"))
    return [importlib.import_module(f"{package}.{name}") for name in names]


def _level_of(test_case: object, name: str) -> MachineLevel | None:
    """The level of a machine's test case (``Machine.TestCase``) bound to the ``Test*`` name
    ``name``, None when ``test_case`` is not one."""
    run_test = getattr(test_case, "runTest", None)
    machine = getattr(run_test, "_hypothesis_state_machine_class", None)
    if not (isinstance(machine, type) and issubclass(machine, RuleBasedStateMachine)):
        return None
    return MachineLevel(level_name(name), machine)


def machine_levels(family: Family) -> dict[str, MachineLevel]:
    """The family's machines by level name, in file and definition order: every module-level
    ``Test*`` name of ``family.machines/test_*.py`` that is a machine's test case."""
    levels: dict[str, MachineLevel] = {}
    for module in _machine_modules(Path(family.machines)):
        for name, value in vars(module).items():
            level = _level_of(value, name) if name.startswith("Test") else None
            if level is not None:
                levels.setdefault(level.value, level)
    return levels


def machine_level(family: Family, name: str | None) -> MachineLevel:
    """The level ``name`` (None: the first) of ``family``; a ``ValueError`` naming the known
    ones otherwise."""
    levels = machine_levels(family)
    if not levels:
        raise ValueError(f"family {family.name!r} has no state machines in {family.machines}")
    if name is None or name == "":
        return next(iter(levels.values()))
    if name not in levels:
        raise ValueError(f"unknown machine {name!r} of family {family.name!r}; known: "
                         f"{', '.join(levels)}")
    return levels[name]


def _outcome_class(outcome: Any) -> tuple[object, ...]:
    """A coarse class of an outcome: its type, and its size rung when it has a length."""
    try:
        return (type(outcome).__name__, size_rung(len(outcome)))
    except TypeError:
        return (type(outcome).__name__,)


@dataclass
class MachineHarness:
    """A family's machine driven by fuzz inputs (the harness the engine, the CLI and
    :func:`fuzz.core.harness.libfuzzer_entry` use). ``weak_hash``: the
    family's bundled target with its weak hash injected
    (:class:`properties.core.roles.WeakHashing`), for a level it names."""

    level: MachineLevel
    spec: str | None = None
    family: str | None = None
    steps: int = 50
    weak_hash: bool = False
    _target: Target | None = field(default=None, init=False, repr=False)
    _made: list[RuleBasedStateMachine] = field(default_factory=list, init=False, repr=False)
    _test: Any = field(default=None, init=False, repr=False)

    @property
    def name(self) -> str:
        return self.level.value

    @property
    def target(self) -> Target:
        """The target (loaded once): ``spec`` (its family named or detected), else the
        environment's or the bundled target of ``family``, else the session's selection.
        The machines read it from the session's selection, so it is selected too. In weak-hash
        mode, the family's weak-hash target (a ``ValueError`` for a family or level without
        one)."""
        if self._target is None:
            if self.weak_hash:
                chosen = families.select(self.spec, self.family)
                if not isinstance(chosen, WeakHashing) or self.name not in chosen.weak_hash_levels:
                    levels = chosen.weak_hash_levels if isinstance(chosen, WeakHashing) else ()
                    raise ValueError(f"family {chosen.name!r} has no weak-hash mode for "
                                     f"{self.name!r} (levels with one: "
                                     f"{', '.join(levels) or 'none'})")
                target = chosen.weak_hash_target(self.level)
            elif self.spec is not None or self.family is not None:
                target = load_target(self.spec or os.environ.get(ENV_VAR), family=self.family)
            else:
                target = selection.current_target()
            selection.use(target)
            self._target = target
        return self._target

    def bind(self, target: Target) -> MachineHarness:
        """Use ``target`` instead of the selected one (returns self)."""
        self._target = target
        selection.use(target)
        return self

    def _machine_test(self) -> Any:
        if self._test is None:
            self.target  # noqa: B018  (loads and selects it before a machine is built)
            made = self._made

            def factory() -> RuleBasedStateMachine:
                machine = self.level.machine()
                made.append(machine)
                return machine

            chosen = settings(database=None, deadline=None, stateful_step_count=self.steps,
                              suppress_health_check=list(HealthCheck))
            # a factory is what Hypothesis calls (its annotation says a class)
            self._test = get_state_machine_test(factory,  # type: ignore[arg-type]
                                                settings=chosen)
        return self._test

    def seeds(self, seed: int) -> list[bytes]:
        """Seeded random inputs (:data:`SEED_LENGTHS`)."""
        rng = random.Random(seed)
        return [rng.randbytes(n) for n in SEED_LENGTHS]

    def run(self, data: bytes) -> Execution:
        test = self._machine_test()
        self._made.clear()
        result = Execution(self.level, None)
        try:
            if test.hypothesis.fuzz_one_input(data) is None:
                result.stopped = "the input ended the program early (too short, or rejected)"
        except Violation as violation:
            result.violation = violation
        machine = self._made[-1] if self._made else None
        judge = getattr(machine, "judge", None)
        result.config = getattr(machine, "config", None)
        result.judge = judge
        result.consumed = len(data)
        if judge is None:
            return result
        log = list(judge.log)
        result.program = [step.op for step in log]
        result.outcomes = [step.outcome for step in log]
        previous = "start"
        for step in log:
            kind = str(getattr(step.op, "kind", type(step.op).__name__))
            result.features.add((previous, kind, *_outcome_class(step.outcome)))
            previous = kind
        if result.violation is not None:
            result.features.add(("violation", result.violation.family.value, previous))
        return result

    def test_one_input(self, data: bytes) -> None:
        """libFuzzer's entry: raise the violation, if any."""
        result = self.run(data)
        if result.violation is not None:
            raise result.violation

    def fuzz_main(self, argv: Sequence[str]) -> None:
        """Run under atheris/libFuzzer: ``script.py [--allocator SPEC] [--weak-hash]
        [libFuzzer flags and corpus dirs]`` (``--allocator`` and ``--weak-hash`` are taken out
        of ``argv`` first); the target's package is imported under instrumentation."""
        args = take_allocator(list(argv))
        if "--weak-hash" in args:
            args.remove("--weak-hash")
            self.weak_hash = True
        quiet_target_logs()
        atheris = atheris_module()
        if atheris is None:
            raise SystemExit("atheris is not installed: pip install 'prefixcache[fuzz]', or use "
                             "the built-in engine: python -m fuzz run")
        spec = (self.spec or os.environ.get(ENV_VAR)
                or families.select(None, self.family).default_spec)
        with instrumented(True, [spec.partition(":")[0].split(".")[0]]):
            target = self.target
        weak = ", the weak hash injected" if self.weak_hash else ""
        sys.stderr.write(f"[{self.name}] target: {target.describe()} (machine route{weak})\n")
        atheris.Setup(args, libfuzzer_entry(self))
        atheris.Fuzz()

    def listing(self, result: Execution) -> str:
        """``result``'s program as the family's plain script."""
        if result.config is None:
            return "(no program: the input did not reach the first operation)"
        family = self.target.family_object
        log = result.judge.log if result.judge is not None else []
        return "\n".join(family.script(self.target, result.config, list(log),
                                       result.judge).body)

    def crash_record(self, data: bytes, result: Execution) -> dict[str, Any]:
        """The crash file's JSON sidecar: the program, replayable without the input
        (``python -m properties.core.replay``)."""
        family = self.target.family_object
        vocabulary = family.vocabulary
        return {
            "harness": self.name,
            "route": "machine",
            "family": family.name,
            "target": self.target.spec,
            "allocator_type": self.target.allocator_type,
            "input_sha1": hashlib.sha1(data).hexdigest(),
            "config": None if result.config is None else vocabulary.geometry(result.config),
            "invariant": None if result.violation is None else result.violation.family.value,
            "violation": None if result.violation is None else str(result.violation),
            "program": [vocabulary.op_to_json(op) for op in result.program],
        }

    def write_crash(self, data: bytes, result: Execution, directory: Path) -> Path:
        """``crash-<level>-<sha1>`` and its ``.json`` record (:func:`write_crash_files`)."""
        return write_crash_files(self.name, data, self.crash_record(data, result), directory)


def harness_for(name: str | None, *, spec: str | None = None, family: str | None = None,
                steps: int = 50, weak_hash: bool | None = None) -> MachineHarness:
    """The machine harness ``name`` (None: the first machine) of ``family``, else of the
    family that accepts ``spec`` or ``$PREFIXCACHE_ALLOCATOR``; in weak-hash mode when
    ``weak_hash`` says so (None: when ``$PREFIXCACHE_FUZZ_HASH`` is ``weak``)."""
    chosen = families.select(spec or os.environ.get(ENV_VAR), family)
    if weak_hash is None:
        weak_hash = os.environ.get(HASH_MODE_VAR) == "weak"
    return MachineHarness(machine_level(chosen, name), spec=spec, family=chosen.name,
                          steps=steps, weak_hash=weak_hash)


def main(argv: Sequence[str] | None = None) -> None:
    """Under atheris/libFuzzer: ``python -m fuzz.core.machine_harness --family NAME
    [--level LEVEL] [--allocator SPEC] [libFuzzer flags and corpus dirs]``."""
    args = list(sys.argv if argv is None else argv)
    picked: dict[str, str] = {}
    rest: list[str] = []
    it = iter(args)
    for arg in it:
        key = arg.removeprefix("--")
        if key in ("family", "level"):
            picked[key] = next(it, "")
        else:
            rest.append(arg)
    rest = take_allocator(rest)  # before the family is chosen: the spec may name it
    with instrumented(True):  # the family's model is imported here
        harness = harness_for(picked.get("level"), spec=os.environ.get(ENV_VAR),
                              family=picked.get("family"))
    harness.fuzz_main(rest)


if __name__ == "__main__":
    main()
