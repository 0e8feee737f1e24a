"""Hypothesis's settings for the property tests: bounded in the suite, longer on asking.

    pytest tests/properties                              # "suite": a few examples each
    pytest tests/properties --hypothesis-profile=long    # hundreds, for a search

Found examples are kept in the repository (tests/properties/.hypothesis-examples), so a
case that once failed is tried first on every run after, anyone's: it stays a test. The
suite reads them only: Hypothesis deletes a saved example that no longer fails, and a
fixed case must stay in the corpus (and the suite must not change the checkout). The
longer profiles, run by hand to search, write what they find there, to be committed.

Every profile says derandomize=False: under CI=true Hypothesis makes its own `ci` profile
(derandomized, no database) the parent of any profile registered, and a derandomized run
can read no examples, so Schemathesis refused to build the fuzz test at all.
"""

from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase, ReadOnlyDatabase

EXAMPLES = DirectoryBasedExampleDatabase(str(Path(__file__).parent / ".hypothesis-examples"))
SLOW_IS_FINE = [HealthCheck.too_slow, HealthCheck.data_too_large,
                HealthCheck.function_scoped_fixture]


def register() -> None:
    common = dict(deadline=None, derandomize=False, suppress_health_check=SLOW_IS_FINE, print_blob=True)
    settings.register_profile("suite", max_examples=20, stateful_step_count=20,
                              database=ReadOnlyDatabase(EXAMPLES), **common)
    common["database"] = EXAMPLES
    settings.register_profile("bench", max_examples=100, stateful_step_count=30, **common)
    settings.register_profile("long", max_examples=500, stateful_step_count=50, **common)
    settings.load_profile("suite")
