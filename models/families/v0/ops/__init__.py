"""The v0 operations, one module per operation group, one class per operation.

Each class holds everything the model knows about its operation (its fields and JSON form, its
contract, its admission cost, its step, its invariant family on misuse, its validated
arguments): see :class:`models.families.v0.ops.base.Op`. ``models.families.v0.operations`` is
the vocabulary index (every class, the group tuples, the JSON registry). Layering: ``values``
and ``base`` import no operation; the model's state modules import only those two; the group
modules import the state modules; nothing here imports the index.
"""
