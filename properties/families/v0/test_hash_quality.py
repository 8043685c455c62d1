"""The selected target's block keys checked for collision resistance directly, at scale
(``properties.families.v0.hash_quality``): thousands of distinct contents, near-miss pairs and the
keys' range. A finding is HASH with a two-allocation program; one matching an expected-failure
entry (``--xfails-file``) is absorbed, as in the machines."""

from __future__ import annotations

import pytest

from models.core.invariants import Violation
from properties.core import plugin
from properties.core.baseline import attach_run
from properties.core.reproducer import render_script
from properties.core.selection import current_target
from properties.families.v0 import hash_quality
from properties.families.v0.judge import V0Judge


def test_block_keys_resist_collisions(request: pytest.FixtureRequest) -> None:
    target = current_target()
    unobservable = hash_quality.observable(target)
    if unobservable is not None:
        pytest.skip(f"{unobservable}: no key to check")
    try:
        hash_quality.check(target)
    except Violation as violation:
        history = getattr(violation, "prefixcache_history", None)
        entries = plugin.expected_entries(request.config)
        entry = next((e for e in entries if e.matches(violation, history)), None)
        if entry is not None:
            plugin.record(entry, violation, [op.kind for op in (history or [])[:-1]])
            return
        plugin.note_worse(entries, violation, history, None)
        shown = getattr(violation, "prefixcache_program", None)
        if shown is None:
            raise
        config, program = shown
        judge = V0Judge(target, config)
        for op in program:
            judge.runner.execute(op)
        script = render_script(target, config, judge.log, judge=judge)
        violation.add_note("Replay it as a plain Python script:\n\n" + script)
        # Replayable, so --write-xfails writes it (with its sizes: the ratchet's baseline).
        attach_run(violation, target, config, program, script)
        raise
