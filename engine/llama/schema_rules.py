"""llama.cpp's JSON-schema-to-GBNF converter, made to enforce every keyword it is given.

llama-cpp-python's port of the converter (llama_cpp.llama_grammar) drops some
keywords without a word: integer and number bounds, a pattern's JSON escaping,
keywords beside `type: [..]`, duplicate keys beside additionalProperties, and
it writes dates such as 2023-02-31. `Converter` checks each schema it visits
against what its grammar enforces: a keyword that would change which answers
are valid and that the grammar does not hold is refused (GrammarError naming
it), so an answer the grammar lets through is valid by construction, not by
the model's good manners. Where the grammar is narrower than the schema
(no exponents in bounded numbers, no extra keys beside declared properties,
years 1000-9999) every answer still matches.
"""

import json
import math
import re

from llama_cpp.llama_grammar import RESERVED_NAMES, SchemaConverter

from .number_range import BOUNDS, RangeError, number_rule
from .pattern import JSON_SAFE_CLASS, PatternError, json_safe_pattern


class GrammarError(ValueError):
    """A schema the grammar conversion cannot express."""


# Keywords that say nothing about validity (annotations, containers, vendor notes):
# accepted anywhere. Words that are not JSON Schema keywords at all are annotations too.
ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "$comment", "$schema", "$id", "$defs",
    "definitions", "deprecated", "readOnly", "writeOnly", "contentEncoding", "contentMediaType",
    "nullable", "discriminator"})
# Assertion keywords by the instance type they constrain; others' types' are vacuous.
TYPE_KEYWORDS = {
    "string": {"minLength", "maxLength", "pattern", "format"},
    "number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
    "object": {"properties", "required", "additionalProperties", "patternProperties",
               "propertyNames", "minProperties", "maxProperties", "dependentRequired",
               "dependentSchemas", "dependencies", "unevaluatedProperties"},
    "array": {"items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems",
              "contains", "minContains", "maxContains", "unevaluatedItems"},
}
TYPE_KEYWORDS["integer"] = TYPE_KEYWORDS["number"]
ANY_TYPE = {"type", "enum", "const", "allOf", "anyOf", "oneOf", "not", "if", "then", "else",
            "$ref", "$dynamicRef", "$recursiveRef", "$anchor", "$dynamicAnchor"}
ASSERTIONS = ANY_TYPE.union(*TYPE_KEYWORDS.values())
TYPES = ("string", "number", "integer", "boolean", "null", "object", "array")
FORMATS = ("date", "time", "date-time", "uuid")

# A calendar date: each month its own days, 29 February in leap years (the
# converter's rule allows 31 days in every month, and year 0000).
DATE_RULE = (
    '[1-9] [0-9]{3} "-" ( ("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01])'
    ' | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30")'
    ' | "02" "-" ("0" [1-9] | "1" [0-9] | "2" [0-8]) )'
    ' | leap-year "-02-29"')
LEAP_YEAR_RULE = ('[1-9] [0-9] ("0" [48] | [2468] [048] | [13579] [26])'
                  ' | ([2468] [048] | [13579] [26]) "00"')


class Converter(SchemaConverter):
    """The converter, checking each schema it visits, with integer and number ranges."""

    def visit(self, schema, name):
        where = _where(name)
        if isinstance(schema, bool):
            raise GrammarError(f"a true/false schema (at {where}) is not supported: "
                               "write {} or leave the property out")
        if not isinstance(schema, dict):
            raise GrammarError(f"a JSON schema must be an object (at {where})")
        kind = schema.get("type")
        if isinstance(kind, list):
            if not kind or any(t not in TYPES for t in kind):
                raise GrammarError(f"'type' at {where} must name JSON types ({', '.join(TYPES)})")
            if "enum" in schema or "const" in schema:     # the values, each of one of the types
                _values(schema, kind, where)
                return self.visit({k: v for k, v in schema.items() if k != "type"}, name)
            alternatives = [{**schema, "type": t} for t in kind]
            return self._add_rule(_rule_name(name), self._generate_union_rule(name, alternatives))
        if kind is not None and kind not in TYPES:
            raise GrammarError(f"'type' at {where} must be one of {', '.join(TYPES)} (got {kind!r})")
        if "allOf" in schema:
            parts = schema["allOf"]
            if not isinstance(parts, list) or len(parts) != 1 or not _only_annotations(schema, "allOf"):
                raise GrammarError(f"'allOf' at {where} is supported only with one schema in it")
            return self.visit(parts[0], name)
        schema = _normalised(schema)
        enforced, produces = _branch(schema, where)
        if "oneOf" in enforced:
            self._check_exclusive(schema["oneOf"], where)
        _refuse_the_rest(schema, enforced, produces, where)
        if produces in ("integer", "number"):
            try:
                rule = number_rule(schema, produces == "integer", where)
            except RangeError as exc:
                raise GrammarError(str(exc)) from None
            if rule is not None:
                return self._add_rule(_rule_name(name), f"({rule}) space")
        return super().visit(schema, name)

    def _check_exclusive(self, alternatives: list, where: str) -> None:
        """oneOf: an answer must match exactly one, and the grammar writes any of them, so
        they must not overlap: of different JSON types, or objects told apart by a required
        property's const/enum values (a discriminated union)."""
        resolved = [self._resolved(a) for a in alternatives]
        for i, a in enumerate(resolved):
            for b in resolved[i + 1:]:
                if not (_types_apart(a, b) or self._told_apart(a, b)):
                    raise GrammarError(f"'oneOf' at {where}: its schemas may overlap (an answer "
                                       "could match two); use anyOf, or tell them apart by type "
                                       "or by a required property's const")

    def _resolved(self, schema):
        while isinstance(schema, dict) and "$ref" in schema and schema["$ref"] in self._refs:
            schema = self._refs[schema["$ref"]]
        return schema if isinstance(schema, dict) else {}

    def _told_apart(self, a: dict, b: dict) -> bool:
        shared = set(a.get("required", [])) & set(b.get("required", []))
        for key in shared:
            va = _constants(self._resolved(a.get("properties", {}).get(key)))
            vb = _constants(self._resolved(b.get("properties", {}).get(key)))
            if va is not None and vb is not None and not va & vb:
                return True
        return False

    def _visit_pattern(self, pattern, name):
        """The converter's regular-expression rule, of a pattern rewritten to what it
        translates exactly (pattern.py), inside the string's quotes (the converter's own
        wrapping leaves a top-level '|' outside them)."""
        try:
            safe = json_safe_pattern(pattern, _where(name))
        except PatternError as exc:
            raise GrammarError(str(exc)) from None
        raw, self._raw_pattern = self._raw_pattern, True
        try:
            key = super()._visit_pattern(safe, name)
        finally:
            self._raw_pattern = raw
        self._rules[key] = f'"\\"" ({self._rules[key]}) "\\"" space'
        return key

    def format_grammar(self):
        if "dot" in self._rules:          # a pattern's '.': no character JSON would escape
            self._rules["dot"] = JSON_SAFE_CLASS
        if "date" in self._rules:
            leap = self._add_rule("leap-year", LEAP_YEAR_RULE)
            self._rules["date"] = DATE_RULE.replace("leap-year", leap)
        return super().format_grammar()


def _json_types(schema: dict) -> "set | None":
    """The JSON types a schema's answers can have (None: any); integer within number."""
    values = _constants(schema)
    if values is not None:
        found = {_type_of(json.loads(v)) for v in values}
    elif isinstance(schema.get("type"), (str, list)):
        found = {schema["type"]} if isinstance(schema["type"], str) else set(schema["type"])
    elif "properties" in schema:
        found = {"object"}
    else:
        return None
    return found | {"number"} if "integer" in found else found


def _types_apart(a: dict, b: dict) -> bool:
    ta, tb = _json_types(a), _json_types(b)
    return ta is not None and tb is not None and not ta & tb


def _constants(schema) -> "set | None":
    """A schema's const/enum values (as JSON text), None if it has neither."""
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return {json.dumps(schema["const"], sort_keys=True)}
    if isinstance(schema.get("enum"), list):
        return {json.dumps(v, sort_keys=True) for v in schema["enum"]}
    return None


def _type_of(value) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return {float: "number", str: "string", type(None): "null", dict: "object",
            list: "array"}[type(value)]


def _where(name: str) -> str:
    """The rule's name as the place in the schema an error names (a tool's prefix off)."""
    return re.sub(r"^f\d+-args-?", "", name) or "the schema's root"


def _rule_name(name: str) -> str:
    """The converter's name for a schema's rule (a primitive's name gets a '-')."""
    return name + "-" if name in RESERVED_NAMES else name or "root"


def _normalised(schema: dict) -> dict:
    """The same set of valid answers (or a narrower one) in a form the converter holds."""
    kind, keys = schema.get("type"), set(schema)
    if kind is None and not keys & ASSERTIONS:
        return {"type": "object"}        # any value; the converter writes {} as an object
    if kind is None and keys & TYPE_KEYWORDS["number"] and not keys & (
            ANY_TYPE | TYPE_KEYWORDS["string"] | TYPE_KEYWORDS["object"] | TYPE_KEYWORDS["array"]):
        return {**schema, "type": "number"}
    if kind == "array" and "items" not in schema and "prefixItems" not in schema and (
            "minItems" in schema or "maxItems" in schema):
        return {**schema, "items": {}}
    extra = schema.get("additionalProperties")
    if schema.get("properties") and (extra is True or isinstance(extra, dict)):
        # extra keys could repeat a declared one (a parser keeps the last): none instead
        return {k: v for k, v in schema.items() if k != "additionalProperties"}
    return schema


def _branch(schema: dict, where: str) -> "tuple[set, str | None]":
    """The keywords the converter's rule for `schema` enforces, and the one JSON type its
    answers have (None: any, or decided elsewhere), in the converter's own order."""
    kind = schema.get("type")
    if "$ref" in schema:     # resolve_refs has refused any but the schema's own (#/...)
        return {"$ref"}, None
    if "oneOf" in schema or "anyOf" in schema:
        if "oneOf" in schema and "anyOf" in schema:
            raise GrammarError(f"'anyOf' beside 'oneOf' at {where} is not supported")
        key = "oneOf" if "oneOf" in schema else "anyOf"
        if not isinstance(schema[key], list) or not schema[key]:
            raise GrammarError(f"'{key}' at {where} must be a non-empty array of schemas")
        return {key}, None
    if "const" in schema or "enum" in schema:
        _values(schema, [kind] if kind else list(TYPES), where)
        return {"const" if "const" in schema else "enum", "type"}, None
    if kind in (None, "object") and ("properties" in schema or schema.get(
            "additionalProperties", True) is not True):
        missing = set(schema.get("required", [])) - set(schema.get("properties", {}))
        if missing:
            raise GrammarError(f"'required' at {where} names {', '.join(sorted(missing))}, "
                               "which 'properties' does not define")
        return {"type", "properties", "required", "additionalProperties"}, "object"
    if kind in (None, "array") and ("items" in schema or "prefixItems" in schema):
        return _array_branch(schema, where), "array"
    if kind in (None, "string") and "pattern" in schema:
        return {"type", "pattern"}, "string"
    if kind in (None, "string") and "format" in schema:
        if schema["format"] not in FORMATS:
            raise GrammarError(f"'format' {schema['format']!r} at {where} is not supported "
                               f"(supported: {', '.join(FORMATS)})")
        return {"type", "format"}, "string"
    if kind == "string":
        _check_counts(schema, "minLength", "maxLength", where)
        return {"type", "minLength", "maxLength"}, "string"
    if kind in ("integer", "number"):
        return {"type", *BOUNDS}, kind
    if kind in ("object", None):
        return {"type", "additionalProperties"}, "object"
    return {"type"}, kind


def _array_branch(schema: dict, where: str) -> set:
    items, prefix = schema.get("items"), schema.get("prefixItems")
    if prefix is not None and items not in (None, False):
        raise GrammarError(f"'items' beside 'prefixItems' at {where} is not supported")
    _check_counts(schema, "minItems", "maxItems", where)
    tuple_items = prefix if prefix is not None else items
    if isinstance(tuple_items, list):       # a tuple: exactly its items
        n = len(tuple_items)
        if schema.get("minItems", 0) > n or schema.get("maxItems", n) < n:
            raise GrammarError(f"'minItems'/'maxItems' at {where} do not allow the tuple's "
                               f"{n} items")
    enforced = {"type", "items", "prefixItems", "minItems", "maxItems"}
    if schema.get("uniqueItems") is False or schema.get("maxItems", 2) <= 1:
        enforced.add("uniqueItems")
    return enforced


def _check_counts(schema: dict, low: str, high: str, where: str) -> None:
    for key in (low, high):
        if key in schema and (not isinstance(schema[key], int) or isinstance(schema[key], bool)
                              or schema[key] < 0):
            raise GrammarError(f"'{key}' at {where} must be a whole number, 0 or more")
    if schema.get(low, 0) > schema.get(high, math.inf):
        raise GrammarError(f"'{low}' at {where} is above '{high}'")


def _refuse_the_rest(schema: dict, enforced: set, produces: "str | None", where: str) -> None:
    """GrammarError naming the first keyword that constrains answers and is not enforced."""
    vacuous = set()
    if produces is not None:         # keywords about other types hold for every answer
        vacuous = set().union(*(v for t, v in TYPE_KEYWORDS.items() if t != produces))
        vacuous -= TYPE_KEYWORDS.get(produces, set())
    for key in schema:
        if key in ASSERTIONS and key not in enforced and key not in vacuous:
            raise GrammarError(f"'{key}' at {where} is not supported here (the grammar "
                               "cannot enforce it)")


def _only_annotations(schema: dict, but: str) -> bool:
    return all(k == but or k in ANNOTATIONS or k not in ASSERTIONS for k in schema)


def _values(schema: dict, kinds: list, where: str) -> None:
    """'enum'/'const' must list values, each of one of `kinds`."""
    values = [schema["const"]] if "const" in schema else schema["enum"]
    if not isinstance(values, list) or not values:
        raise GrammarError(f"'enum' at {where} must be a non-empty array")
    for value in values:
        if not any(_is_type(value, kind) for kind in kinds):
            raise GrammarError(f"'enum'/'const' at {where}: {value!r} is not of type "
                               f"{' or '.join(kinds)}")


def _is_type(value, kind: str) -> bool:
    if isinstance(value, bool):
        return kind == "boolean"
    if kind == "integer":
        return isinstance(value, int) or isinstance(value, float) and value.is_integer()
    python = {"string": str, "number": (int, float), "null": type(None), "object": dict,
              "array": list, "boolean": bool}[kind]
    return isinstance(value, python)
