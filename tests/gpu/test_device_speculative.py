"""Speculative decoding on the device, lookup and a draft model (offloaded as the target is):
greedy drafted = plain, with the CPU suite's helpers and its draft-model check.

Mesa 22's llvmpipe crashes (in its own worker thread) running flash attention over a
batch of a few rows after single steps, which is what verifying guesses is: on that
software device chatdb plans flash attention off by itself (the conftest checks each
plan); on a card it is on.
"""

from engine.decode.modes import DraftMode
from engine.llama.sampling import SamplingSettings

from ..engine.test_speculative import (  # noqa: F401
    COPY_TASK, _generate, _prompt, test_draft_model_greedy_output_equals_plain_decoding)

TOKENS = 24


def test_lookup_greedy_output_equals_plain_decoding_on_the_device(open_engine):
    _, engine = open_engine(draft="off")
    prompt = _prompt(engine, COPY_TASK)
    greedy = SamplingSettings(temperature=0)
    plain = _generate(engine, prompt, greedy, n=TOKENS)
    drafted = _generate(engine, prompt, greedy, DraftMode.LOOKUP, n=TOKENS)
    assert drafted.tokens == plain.tokens
    assert drafted.accepted > 0 and drafted.target_forwards < plain.target_forwards


def test_the_draft_model_is_offloaded_as_the_target(open_engine, model_path):
    _, engine = open_engine(draft="model", draft_model=model_path)
    assert engine.draft.model.config.n_gpu_layers == -1
    assert engine.draft.model.config.devices == engine.model.config.devices != ()
    assert engine.draft.fingerprint != engine.fingerprint
