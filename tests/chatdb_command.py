"""The real `chatdb` command as the tests start it: a new Python process on this checkout."""

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# The tests' draft mode, for processes and in-process engines alike: speculative decoding
# only where a test asks for it (its own --draft, given after the subcommand, wins over
# the root option here). On, it costs every engine on a new archive (as every test's is)
# a measurement of forward-pass costs for the draft policy, one to several seconds on a
# 2-core machine, in tests about something else.
DRAFT = "off"


def chatdb_argv(*args) -> list[str]:
    """argv of `chatdb ARGS` (the module run from the repository root)."""
    return [sys.executable, "-m", "cli.main", "--draft", DRAFT, *map(str, args)]


def python_path(env=None) -> str:
    """PYTHONPATH for a child process: this checkout first, then what `env` (by default
    ours) holds, such as packages installed with --target on a GPU machine."""
    env = os.environ if env is None else env
    return os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
