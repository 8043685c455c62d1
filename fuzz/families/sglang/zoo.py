"""The sglang family's zoo for ``python -m fuzz zoo`` (:class:`fuzz.core.tools.Zoo`): every
mutant of ``tests.zoo.sglang.mutants.MUTANTS`` (the FULL tree and its allocator, fuzzed
through the FULL level's machine) and of its ``SWA_MUTANTS`` (the FULL + SWA tree and its
allocator, through the SWA level's machine: the FULL level skips a FULL + SWA target),
imported by name when the zoo is asked for (the fuzzers import no test module), with the
invariants each may be caught by."""

from __future__ import annotations

import importlib

from fuzz.core.tools import ZooMutant, zoo_mutant

#: The zoo's registry module (``MUTANTS`` and ``SWA_MUTANTS``: name -> mutant with
#: ``caught_by``).
ZOO_MODULE = "tests.zoo.sglang.mutants"
#: The machine levels (``fuzz.core.machine_harness.machine_levels``) of each kind of mutant.
FULL_LEVELS = ("radix_cache",)
SWA_LEVELS = ("swa_radix_cache",)


def zoo() -> dict[str, ZooMutant]:
    module = importlib.import_module(ZOO_MODULE)
    out = {name: zoo_mutant(f"{ZOO_MODULE}:{name}", mutant.caught_by, levels=FULL_LEVELS)
           for name, mutant in module.MUTANTS.items()}
    out.update({name: zoo_mutant(f"{ZOO_MODULE}:{name}", mutant.caught_by, levels=SWA_LEVELS)
                for name, mutant in module.SWA_MUTANTS.items()})
    return out
