"""Waiting on a condition in tests: poll it, with a deadline (never a bare sleep)."""

import time


def wait_until(check, timeout: float = 60.0, what: str = "the condition", interval: float = 0.01):
    """Poll `check()` until it returns something true, and return that; fail after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
    return value
