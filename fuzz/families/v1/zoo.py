"""The v1 family's zoo for ``python -m fuzz zoo`` (:class:`fuzz.core.tools.Zoo`): every broken
bundled pool of ``tests.zoo.v1.bundled.VARIANTS``, imported by name when the zoo is asked for
(the fuzzers import no test module), with the invariants it may be caught by."""

from __future__ import annotations

import importlib

from fuzz.core.tools import ZooMutant, zoo_mutant

#: The zoo's registry module (``VARIANTS``: variants with ``family`` and ``also``; each name is
#: also a target spec of that module).
ZOO_MODULE = "tests.zoo.v1.bundled"


def zoo() -> dict[str, ZooMutant]:
    module = importlib.import_module(ZOO_MODULE)
    return {v.name: zoo_mutant(f"{ZOO_MODULE}:{v.name}", (v.family, *v.also))
            for v in module.VARIANTS}
