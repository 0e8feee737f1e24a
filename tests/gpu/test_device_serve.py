"""`chatdb serve --parallel 4` on the device: four clients at once, each answer batched with
the others, equal to its answer alone, and stored. The CPU suite's check, run on the device."""

from ..server.test_concurrency import (  # noqa: F401
    test_concurrent_requests_are_batched_and_each_gets_the_greedy_text_it_gets_alone)
