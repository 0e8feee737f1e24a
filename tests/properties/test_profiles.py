"""The Hypothesis profiles hold where CI runs them: CI=true changes Hypothesis's defaults."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("ci", [None, "true"])
def test_the_fuzz_and_property_tests_collect_with_and_without_ci(ci):
    """Under CI=true Hypothesis's `ci` profile (derandomized, no database) is every profile's
    parent; the suite profile reads the committed examples, so it must say derandomize=False
    or Schemathesis refuses to build the fuzz test (CI once failed on just that)."""
    env = {name: value for name, value in os.environ.items() if name != "CI"}
    if ci is not None:    # Hypothesis takes any CI variable, even empty, for a CI machine
        env["CI"] = ci
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "tests/server/test_fuzz.py", "tests/properties"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=100)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "test_the_api_fuzzed_from_its_schema" in run.stdout
