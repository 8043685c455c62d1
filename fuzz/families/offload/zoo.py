"""The offload family's zoo for ``python -m fuzz zoo`` (:class:`fuzz.core.tools.Zoo`): every
mutant of ``tests.zoo.offload.mutants`` (``MUTANTS``), imported by name when the zoo is asked
for (the fuzzers import no test module), each under its cache policy (the allocator type)."""

from __future__ import annotations

import importlib

from fuzz.core.tools import ZooMutant, zoo_mutant

#: The zoo's registry module (``MUTANTS``: mutants with ``families`` and ``policy``).
ZOO_MODULE = "tests.zoo.offload.mutants"


def zoo() -> dict[str, ZooMutant]:
    module = importlib.import_module(ZOO_MODULE)
    return {m.name: zoo_mutant(f"{ZOO_MODULE}:{m.name}", m.families, m.policy)
            for m in module.MUTANTS}
