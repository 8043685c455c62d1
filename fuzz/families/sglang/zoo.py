"""The sglang family's zoo for ``python -m fuzz zoo`` (:class:`fuzz.core.tools.Zoo`): every
mutant of ``tests.zoo.sglang.mutants.MUTANTS`` and ``REQUEST_MUTANTS``, imported by name when
the zoo is asked for (the fuzzers import no test module), with the invariants it may be caught
by and, for the request level's, the machine that reaches it."""

from __future__ import annotations

import importlib

from fuzz.core.tools import ZooMutant, zoo_mutant

#: The zoo's registry module (``MUTANTS``: name -> mutant with ``caught_by``).
ZOO_MODULE = "tests.zoo.sglang.mutants"


def zoo() -> dict[str, ZooMutant]:
    """The tree level's mutants (the first machine), then the request level's
    (``REQUEST_MUTANTS``, fuzzed through the request machine)."""
    module = importlib.import_module(ZOO_MODULE)
    out = {name: zoo_mutant(f"{ZOO_MODULE}:{name}", mutant.caught_by)
           for name, mutant in module.MUTANTS.items()}
    for name, mutant in getattr(module, "REQUEST_MUTANTS", {}).items():
        out[name] = zoo_mutant(f"{ZOO_MODULE}:{name}", mutant.caught_by,
                               levels=("request_level",))
    return out
