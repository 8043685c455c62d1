"""A broken sliding-window ``BlockTable`` (issue 18, defect 4, the fork side).

A package of its own: the suite's adapter takes ``BlockTable`` from the ``block_table`` module
of the package that defines the allocator's class (see ``tests.zoo.block_table``).
"""
