"""`response_format`: plain text, any JSON object, or JSON matching a schema, enforced by a grammar."""

from dataclasses import dataclass

from engine.llama.grammar import Grammar, GrammarError, json_grammar

from .errors import bad_field

KINDS = ("text", "json_object", "json_schema")


@dataclass(frozen=True)
class OutputFormat:
    kind: str = "text"
    schema: "dict | None" = None
    grammar: "Grammar | None" = None     # None for text


def read_response_format(value) -> OutputFormat:
    if value is None:
        return OutputFormat()
    if not isinstance(value, dict):
        raise bad_field("response_format", "'response_format' must be an object")
    kind = value.get("type")
    if kind not in KINDS:
        raise bad_field("response_format.type", f"'response_format.type' must be one of "
                        f"{', '.join(KINDS)} (got {kind!r})")
    # Checked whatever the type: a malformed json_schema is refused, not quietly ignored.
    spec = read_json_schema(value.get("json_schema"), needed=kind == "json_schema")
    if kind == "text":
        return OutputFormat()
    if kind == "json_object":
        return OutputFormat(kind, None, json_grammar(None))
    schema = spec.get("schema", {"type": "object"})
    try:
        grammar = json_grammar(schema)
    except GrammarError as exc:
        raise bad_field("response_format.json_schema.schema",
                        f"'response_format.json_schema.schema': {exc}") from None
    return OutputFormat(kind, schema, grammar)


def read_json_schema(spec, needed: bool) -> "dict | None":
    """`response_format.json_schema` as the API document has it (None where left out and
    not `needed`), or a 400 naming the field that is wrong."""
    if spec is None and not needed:
        return None
    if not isinstance(spec, dict):
        raise bad_field("response_format.json_schema",
                        "'response_format.json_schema' must be an object {name, schema, strict}")
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise bad_field("response_format.json_schema.name",
                        "'response_format.json_schema.name' must be a non-empty string")
    if spec.get("strict") is not None and not isinstance(spec["strict"], bool):
        raise bad_field("response_format.json_schema.strict",
                        "'response_format.json_schema.strict' must be true or false")
    if spec.get("description") is not None and not isinstance(spec["description"], str):
        raise bad_field("response_format.json_schema.description",
                        "'response_format.json_schema.description' must be a string")
    if not isinstance(spec.get("schema", {}), dict):
        raise bad_field("response_format.json_schema.schema",
                        "'response_format.json_schema.schema' must be a JSON schema object")
    return spec
