"""Deliberately misbehaving targets for ``test_misbehaving_targets`` (see ``targets``)."""
