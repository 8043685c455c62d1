"""The sglang family's zoo for ``python -m fuzz zoo`` (:class:`fuzz.core.tools.Zoo`): every
mutant of ``tests.zoo.sglang.mutants`` with the machine level that reaches it: ``MUTANTS`` (the
FULL tree and its allocator) through the FULL level's machine, ``SWA_MUTANTS`` (the FULL + SWA
tree and its allocator) through the SWA level's (the FULL level skips a FULL + SWA target),
``REQUEST_MUTANTS`` (the request API) through the request level's. Imported by name when the
zoo is asked for (the fuzzers import no test module), with the invariants each may be caught
by."""

from __future__ import annotations

import importlib

from fuzz.core.tools import ZooMutant, zoo_mutant

#: The zoo's registry module (``MUTANTS``, ``SWA_MUTANTS`` and ``REQUEST_MUTANTS``: name ->
#: mutant with ``caught_by``).
ZOO_MODULE = "tests.zoo.sglang.mutants"
#: The machine levels (``fuzz.core.machine_harness.machine_levels``) of each kind of mutant.
FULL_LEVELS = ("radix_cache",)
SWA_LEVELS = ("swa_radix_cache",)
REQUEST_LEVELS = ("request_level",)


def zoo() -> dict[str, ZooMutant]:
    """The FULL tree's mutants, then the FULL + SWA tree's, then the request API's."""
    module = importlib.import_module(ZOO_MODULE)
    out: dict[str, ZooMutant] = {}
    for registry, levels in (("MUTANTS", FULL_LEVELS), ("SWA_MUTANTS", SWA_LEVELS),
                             ("REQUEST_MUTANTS", REQUEST_LEVELS)):
        for name, mutant in getattr(module, registry).items():
            out[name] = zoo_mutant(f"{ZOO_MODULE}:{name}", mutant.caught_by, levels=levels)
    return out
