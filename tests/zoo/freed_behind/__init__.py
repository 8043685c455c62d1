"""Broken allocators only a table whose block was freed behind its back (``TableFreeBlock``)
and tracker misuse (``SeqLostBlocks``) reach.

A package of its own: the suite's adapter takes ``BlockTable`` from the ``block_table`` module
of the package that defines the allocator's class, and the trackers from the module of the
GPU allocator's class (see ``tests.zoo.block_table``).
"""
