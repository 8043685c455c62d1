"""Importing this module applies and compiles every zoo mutant's patches (a forkserver
preloads it, so each forked search imports its mutant's copy without compiling it again)."""

from tests.zoo import patching
from tests.zoo.v0 import argument_mutants, broken

__all__ = ["argument_mutants", "broken"]

patching.precompile()
