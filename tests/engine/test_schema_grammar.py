"""JSON-schema grammars enforce what the schema says, by construction: integer and number
bounds (each integer near a bound accepted exactly when it is within), formats, and answers
sampled by a random "model" that pushes toward long digit runs all validate; a keyword the
grammar cannot hold is refused, never ignored."""

import ctypes
import json
from datetime import datetime

import jsonschema
import llama_cpp
import numpy as np
import pytest

from engine.llama.grammar import CALL_CLOSE, CALL_OPEN, GrammarError, json_grammar, tool_call_grammar
from engine.llama.sampling import Sampler, SamplingSettings, _grammar_sampler

BIG = 10**15


@pytest.fixture
def model(smollm2_vocab):
    return smollm2_vocab


class Acceptor:
    """Whether a grammar takes a whole text: token by token through llama.cpp's grammar
    sampler, then the end of the text (the end-of-generation token allowed)."""

    def __init__(self, model, grammar):
        self.model, self.smpl = model, _grammar_sampler(model.vocab, grammar)
        self.one = (llama_cpp.llama_token_data * 1)()
        self.array = llama_cpp.llama_token_data_array(self.one, 1, -1, False)
        self.eos = llama_cpp.llama_vocab_eos(model.vocab)

    def _allows(self, token: int) -> bool:
        self.one[0].id, self.one[0].logit, self.one[0].p = token, 0.0, 0.0
        self.array.size, self.array.selected, self.array.sorted = 1, -1, False
        llama_cpp.llama_sampler_apply(self.smpl, ctypes.byref(self.array))
        return self.one[0].logit != float("-inf")

    def __call__(self, text: str) -> bool:
        llama_cpp.llama_sampler_reset(self.smpl)
        for token in self.model.tokenize(text, special=False):
            if not self._allows(token):
                return False
            llama_cpp.llama_sampler_accept(self.smpl, token)
        return self._allows(self.eos)

    def close(self):
        llama_cpp.llama_sampler_free(self.smpl)


INTEGER_BOUNDS = [
    ({"minimum": 1, "maximum": 7}, range(-12, 25)),
    ({"exclusiveMinimum": -3, "exclusiveMaximum": 12}, range(-15, 30)),
    ({"minimum": -120, "maximum": -45}, range(-135, -30)),
    ({"minimum": 42, "maximum": 42}, range(30, 55)),
    ({"minimum": BIG - 20, "maximum": BIG + 20}, range(BIG - 35, BIG + 35)),
    ({"minimum": 95}, [*range(-20, 1100, 7), BIG, -BIG]),
    ({"maximum": -5}, [*range(-1100, 20, 7), BIG, -BIG]),
    ({"minimum": 0, "exclusiveMinimum": True, "maximum": 3}, range(-5, 8)),    # draft 4
    ({"minimum": 1.5, "exclusiveMaximum": 4.5}, range(-2, 8)),
]


@pytest.mark.parametrize("bounds, window", INTEGER_BOUNDS)
def test_an_integer_is_accepted_exactly_when_it_is_within_its_bounds(model, bounds, window):
    schema = {"type": "integer", **bounds}
    draft4 = any(isinstance(v, bool) for v in bounds.values())
    valid = (jsonschema.Draft4Validator if draft4 else jsonschema.Draft202012Validator)(schema)
    accepts = Acceptor(model, json_grammar(schema))
    try:
        wrong = [n for n in window if accepts(json.dumps(n)) != valid.is_valid(n)]
    finally:
        accepts.close()
    assert not wrong, f"{bounds}: accepted or refused wrongly: {wrong[:8]}"


NUMBER_BOUNDS = [
    ({"minimum": 0, "maximum": 1}, ["0", "0.5", "0.999", "1"]),
    ({"exclusiveMinimum": -1, "maximum": 2}, ["-0.5", "0", "1.25", "2"]),
    ({"minimum": -40, "exclusiveMaximum": -10}, ["-40", "-39.5", "-10.5", "-11"]),
    ({"exclusiveMinimum": 0}, ["0.001", "3", "123456.7"]),
    ({"minimum": 3, "maximum": 3}, ["3"]),
]
NUMBER_PROBES = ["-41", "-40.5", "-40", "-10", "-9.999", "-1", "-0.5", "-0", "0", "0.0", "0.5",
                 "1", "1.5", "2", "2.001", "3", "3.5", "1e1", "-1e1", "40", "123456.7"]


@pytest.mark.parametrize("bounds, wanted", NUMBER_BOUNDS)
def test_a_number_is_accepted_only_within_its_bounds(model, bounds, wanted):
    schema = {"type": "number", **bounds}
    accepts = Acceptor(model, json_grammar(schema))
    try:
        taken = {text for text in NUMBER_PROBES + wanted if accepts(text)}
    finally:
        accepts.close()
    assert set(wanted) <= taken
    outside = [t for t in taken if not jsonschema.Draft202012Validator(schema).is_valid(json.loads(t))]
    assert not outside, f"{bounds}: accepted {outside}"


def test_dates_are_calendar_dates(model):
    accepts = Acceptor(model, json_grammar({"type": "string", "format": "date"}))
    try:
        assert accepts('"2024-02-29"') and accepts('"2000-02-29"') and accepts('"1999-12-31"')
        for wrong in ("2023-02-29", "1900-02-29", "2023-02-30", "2023-04-31", "0000-01-01",
                      "2023-13-01", "2023-00-10"):
            assert not accepts(json.dumps(wrong)), wrong
    finally:
        accepts.close()


def test_a_pattern_is_held_inside_the_json_string(model):
    cases = [(r"^[A-Z]{3}-\d{2,4}$", ['"ABC-12"', '"XYZ-1234"'], ['"AB-12"', '"ABC-12345"', '"abc-12"']),
             ("^[^x]{1,8}$", ['"ab"', '"a b"'], ['"a"b"', r'"a\"b"', r'"a\\b"', '"axb"']),
             (".", ['"a"', '"any text"'], ['""', r'"\n"', '"a"b"']),
             ("^ab|cd$", ['"ab"', '"cd"'], ['"ab', 'cd"', '"abcd"'])]
    for pattern, wanted, refused in cases:
        accepts = Acceptor(model, json_grammar({"type": "string", "pattern": pattern}))
        try:
            assert [t for t in wanted if not accepts(t)] == [], pattern
            assert [t for t in refused if accepts(t)] == [], pattern
        finally:
            accepts.close()


SCHEMA = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "day": {"type": "integer", "minimum": 1, "maximum": 7},
        "cold": {"type": "integer", "minimum": -50, "maximum": -3},
        "open": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10},
        "only": {"type": "integer", "minimum": 5, "maximum": 5},
        "big": {"type": "integer", "minimum": 10**12, "maximum": 10**12 + 345},
        "floor": {"type": "integer", "minimum": -7},
        "ratio": {"type": "number", "minimum": 0, "maximum": 1},
        "temp": {"type": "number", "exclusiveMinimum": -40, "maximum": 60},
        "maybe": {"type": ["integer", "null"], "minimum": 3, "maximum": 4},
        "tags": {"type": "array", "items": {"type": "integer", "maximum": 0}, "maxItems": 3},
        "when": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"},
        "code": {"type": "string", "pattern": r"^[A-Z]{3}-\d{2,4}$"},
        "file": {"type": "string", "pattern": r"^(?:foo|bar)+\.txt$"},
        "free": {"type": "string", "pattern": "^[^x]{1,8}$"},
    },
    "required": ["day", "cold", "open", "only", "big", "floor", "ratio", "temp", "maybe",
                 "tags", "when", "at", "code", "file", "free"],
}


def _random_answers(model, grammar, n: int, seed: int) -> list[str]:
    """Answers sampled under `grammar` from random logits pushed toward digits and '-'
    (a model that would write any long number it liked)."""
    rng = np.random.default_rng(seed)
    push = np.zeros(model.n_vocab, dtype=np.float32)
    for text in "0123456789-":
        push[model.tokenize(text, special=False)] = 6.0
    answers = []
    for i in range(n):
        settings = SamplingSettings(temperature=1.0, top_k=64, top_p=1.0, min_p=0.0, seed=seed + i,
                                    grammar=grammar)
        pieces = []
        with Sampler(settings, model.n_vocab, model.vocab) as sampler:
            for _ in range(400):
                row = (rng.normal(0, 2, model.n_vocab).astype(np.float32) + push)
                token = sampler._constrained(row)
                if model.is_eog(token):
                    break
                pieces.append(model.piece(token))
            else:
                raise AssertionError("an answer under the grammar did not end")
        answers.append(b"".join(pieces).decode())
    return answers


def test_random_answers_under_bounds_and_formats_all_validate(model):
    validator = jsonschema.Draft202012Validator(
        SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    answers = _random_answers(model, json_grammar(SCHEMA), 3, seed=21)
    for text in answers:
        value = json.loads(text)
        validator.validate(value)
        datetime.fromisoformat(value["at"])          # FORMAT_CHECKER has no date-time here
    assert len({a for a in answers}) == len(answers), "the answers should differ"


def test_random_tool_call_arguments_keep_their_bounds(model):
    parameters = {"type": "object", "required": ["n", "level"], "properties": {
        "n": {"type": "integer", "minimum": 1, "maximum": 7},
        "level": {"type": "number", "minimum": -1, "maximum": 1}}}
    for text in _random_answers(model, tool_call_grammar([("pick", parameters)], False), 4, seed=5):
        call = json.loads(text.removeprefix(CALL_OPEN).removesuffix(CALL_CLOSE))
        jsonschema.validate(call["arguments"], parameters)


@pytest.mark.parametrize("schema, word", [
    ({"type": "integer", "multipleOf": 5}, "multipleOf"),
    ({"type": "object", "properties": {"code": {"type": "string", "pattern": r"^\s+$"}}}, r"\\s"),
    ({"type": "string", "pattern": "^(?=a)a$"}, r"\(\?"),
    ({"type": "string", "pattern": '^"$'}, "JSON escapes"),
    ({"type": "string", "pattern": "^a$|^b$"}, "only at its ends"),
    ({"type": "string", "format": "email"}, "email"),
    ({"type": "number", "maximum": 0.5}, "bounds"),
    ({"type": "integer", "minimum": 5, "maximum": 4}, "no integer"),
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, "uniqueItems"),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["b"]}, "required"),
    ({"type": "object", "minProperties": 1}, "minProperties"),
    ({"allOf": [{"type": "integer"}, {"minimum": 1}]}, "allOf"),
    ({"not": {"type": "null"}}, "not"),
    ({"type": "string", "enum": ["a", 1]}, "enum"),
    ({"anyOf": [{"type": "integer"}], "minimum": 3}, "minimum"),
    ({"type": "string", "format": "date", "maxLength": 4}, "maxLength"),
    ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, "overlap"),
    ({"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}},
                {"type": "object", "properties": {"b": {"type": "integer"}}}]}, "overlap"),
])
def test_what_the_grammar_cannot_enforce_is_refused_naming_it(schema, word):
    with pytest.raises(GrammarError, match=word):
        json_grammar(schema)


def test_what_holds_for_other_types_or_says_nothing_is_accepted():
    # minLength says nothing about an integer; a title or a vendor's note nothing at all
    json_grammar({"type": "integer", "minLength": 3, "title": "n", "x-order": 1})
    json_grammar({"type": ["string", "null"], "maxLength": 3})
    json_grammar({"type": ["string", "null"], "enum": ["a", None]})
    json_grammar({"allOf": [{"$ref": "#/$defs/n"}], "description": "one",
                  "$defs": {"n": {"type": "integer", "minimum": 0}}})
    # oneOf whose schemas cannot overlap: by type, or a discriminated union (pydantic's)
    json_grammar({"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]})
    json_grammar({"oneOf": [{"$ref": "#/$defs/cat"}, {"$ref": "#/$defs/dog"}], "$defs": {
        "cat": {"type": "object", "required": ["kind"], "properties": {"kind": {"const": "cat"}}},
        "dog": {"type": "object", "required": ["kind", "bark"], "properties": {
            "kind": {"type": "string", "enum": ["dog"]}, "bark": {"type": "boolean"}}}}})
