"""Hypothesis profiles for the suite, registered on import.

``dev`` for quick local runs, ``ci`` for the correctness gate (derandomized: the same examples
every run, so a red gate is reproducible; Hypothesis also picks this name on its own when the
``CI`` environment variable is set, which is why the suite registers its own ``ci``),
``nightly`` for long searches, ``mutation`` (no shrinking: mutation testing wants a verdict,
not a minimal example), and ``fuzz`` (huge budgets for HypoFuzz or long soaks).
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, Verbosity, settings

# The explain phase re-runs failing examples many times to annotate lines; reproducer scripts
# already explain a failure, so it is off everywhere.
_PHASES = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink]

_common = dict(
    deadline=None,
    phases=_PHASES,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                           HealthCheck.data_too_large],
)

PROFILES: dict[str, dict[str, object]] = {
    "dev": dict(max_examples=60, stateful_step_count=40),
    "ci": dict(max_examples=200, stateful_step_count=50, derandomize=True, database=None,
               print_blob=True),
    "nightly": dict(max_examples=4_000, stateful_step_count=100, print_blob=True),
    "mutation": dict(max_examples=150, stateful_step_count=40, derandomize=True, database=None,
                     phases=[Phase.explicit, Phase.reuse, Phase.generate],
                     verbosity=Verbosity.quiet),
    "fuzz": dict(max_examples=10_000_000, stateful_step_count=200, print_blob=True),
}

for _name, _values in PROFILES.items():
    settings.register_profile(_name, **{**_common, **_values})  # type: ignore[arg-type]
