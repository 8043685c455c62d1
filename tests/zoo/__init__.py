"""The self-test zoo: deliberately broken allocators the conformance suite must catch.

Each mutant is the bundled allocator with ONE small, realistic bug, written as a patch of the
reference package (see ``broken.ZOO``, ``patching`` and ``README.md``).
"""
