"""The toy family: a complete small allocator family (a dict-based prefix cache, its model and
judge, its machine and two mutants) that proves the core takes a family it has never seen,
through the family interface alone. ``docs/FAMILIES.md`` walks through it."""
