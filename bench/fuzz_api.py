"""The API fuzzed longer than the suite does: tests/server/test_fuzz.py with many cases.

    PYTHONPATH=$PWD .venv/bin/python bench/fuzz_api.py              # the 'long' profile
    PYTHONPATH=$PWD .venv/bin/python bench/fuzz_api.py --coverage   # and every boundary case

Prints, for each operation, the cases sent and whether any failed (no 500, no hang,
every 4xx in the OpenAI shape and as documented, the archive unchanged by refusals);
a failure's shrunk case stays in tests/properties/.hypothesis-examples for the suite.
"""

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="long", help="Hypothesis profile (default long)")
    parser.add_argument("--coverage", action="store_true",
                        help="also Schemathesis's coverage phase (every field's boundary cases)")
    args = parser.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "CHATDB_FUZZ_COVERAGE": "1" if args.coverage else "0"}
    done = subprocess.run([sys.executable, "-m", "pytest", "tests/server/test_fuzz.py", "-v",
                           "-p", "no:cacheprovider", "--timeout", "7200",
                           f"--hypothesis-profile={args.profile}", "--hypothesis-show-statistics"],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    lines = done.stdout.splitlines()
    results = [(re.search(r"\[(.+?)\]", l)[1], "FAILED" in l) for l in lines
               if "test_the_api_fuzzed_from_its_schema[" in l and ("PASSED" in l or "FAILED" in l)]
    cases = [int(m[1]) + int(m[2]) for l in lines
             if (m := re.search(r"(\d+) passing, (\d+) failing", l))][-len(results):] if results else []
    print(f"{'operation':<34}{'cases':>8}  failed")
    for (name, failed), n in zip(results, cases + [0] * len(results)):
        print(f"{name:<34}{n:>8}  {'yes' if failed else 'no'}")
    failures = done.stdout.find("= FAILURES =")
    print(done.stdout[failures:failures + 6000] if done.returncode else "every operation passed")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
