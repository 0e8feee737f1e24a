"""Sampling under a grammar: exact with speculative decoding, and every answer in the grammar."""

import json

from engine.llama.grammar import json_grammar, tool_call_grammar
from engine.llama.sampling import SamplingSettings

SCHEMA = {"type": "object", "required": ["items"], "additionalProperties": False,
          "properties": {"items": {"type": "array", "maxItems": 6,
                                   "items": {"type": "string", "maxLength": 12}}}}
QUESTION = "List the items on a desk, then list them again."


def test_drafted_answers_under_a_grammar_equal_plain_decoding(open_engine):
    """Each drafted position is sampled with the grammar applied, and only the tokens kept
    are fed to it, so drafting changes nothing (lookup drafting guesses repeats well)."""
    settings = SamplingSettings(temperature=0, max_tokens=120, grammar=json_grammar(SCHEMA))
    texts = {}
    for mode in ("off", "lookup"):
        archive, engine = open_engine(draft=mode, sampling=settings)
        conv = archive.create_conversation(mode)
        result = engine.reply(conv.id, QUESTION)
        texts[mode] = result.text
        if mode == "lookup":
            assert result.speculative["drafted"] > 0, "the test must exercise drafting"
        engine.close()
    assert texts["lookup"] == texts["off"]
    assert set(json.loads(texts["off"])) == {"items"}


def test_a_grammar_the_sampler_cannot_use_is_refused_before_the_turn(open_engine):
    from engine.errors import EngineError
    from engine.llama.grammar import Grammar
    from engine.llama.sampling import check_grammar
    _, engine = open_engine()
    check_grammar(engine.model.vocab, tool_call_grammar([("f", {"type": "object"})], True))
    try:
        check_grammar(engine.model.vocab, Grammar('root ::= "a" undefined-rule'))
    except EngineError as exc:
        assert "grammar" in str(exc)
    else:
        raise AssertionError("an undefined rule must be refused")
