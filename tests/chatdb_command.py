"""The real `chatdb` command as the tests start it: a new Python process on this checkout."""

import sys

# Speculative decoding only where a test asks for it (its own --draft, given after the
# subcommand, wins over this root option). On, it costs every process on a new archive
# (as every test's is) a measurement of forward-pass costs for the draft policy, about
# a second on a 2-core machine, in tests about something else.
NO_DRAFT = ("--draft", "off")


def chatdb_argv(*args) -> list[str]:
    """argv of `chatdb ARGS` (the module run from the repository root)."""
    return [sys.executable, "-m", "cli.main", *NO_DRAFT, *map(str, args)]
