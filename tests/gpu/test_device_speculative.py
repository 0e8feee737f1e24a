"""Speculative decoding on the device, lookup and a draft model (offloaded as the target is):
greedy drafted = plain. The CPU suite's checks, run here on the device."""

from ..engine.test_speculative import (  # noqa: F401
    test_draft_model_greedy_output_equals_plain_decoding, test_lookup_greedy_output_equals_plain_decoding)


def test_the_draft_model_is_offloaded_as_the_target(open_engine, model_path):
    _, engine = open_engine(draft="model", draft_model=model_path)
    assert engine.draft.model.config.n_gpu_layers == -1
    assert engine.draft.model.config.devices == engine.model.config.devices != ()
    assert engine.draft.fingerprint != engine.fingerprint
