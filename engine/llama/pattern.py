"""A JSON schema's `pattern`, rewritten so that llama.cpp's regex-to-GBNF translation
holds it exactly inside a JSON string.

The translation (SchemaConverter._visit_pattern) copies a regular expression
almost verbatim into GBNF, so what it lets a model write is the string's raw
JSON text, not the decoded string: a '.', a negated class or a range such as
[ -~] would let the model write a bare '"' (ending the string early) or a
'\\' (an escape the pattern never meant). Here every character the rule can
write is one JSON writes as itself: '.' and classes lose '"', '\\' and the
control characters (a narrower set of strings, each still a match), and a
pattern that needs one of them, or a construct the translation does not know
(lookarounds, backreferences, \\b, \\s, flags), is refused by name.
"""

import re

# The characters a JSON string holds unescaped: what '.' becomes inside a pattern.
JSON_SAFE_CLASS = r'[^"\\\x7F\x00-\x1F]'
UNSAFE = [(0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C), (0x7F, 0x7F)]
CLASS_ESCAPES = {"d": [(0x30, 0x39)],
                 "w": [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]}
QUANTIFIER = re.compile(r"\{\d*(,\d*)?\}")
METACHARACTERS = set(".^$|?*+()[]{}/-")


class PatternError(ValueError):
    """A pattern that cannot be held exactly inside a JSON string."""


def json_safe_pattern(pattern, where: str) -> str:
    """`pattern` as an anchored expression (^...$) the translation holds exactly, matching
    only strings JSON writes without escapes; PatternError naming what it cannot."""
    if not isinstance(pattern, str):
        raise PatternError(f"'pattern' at {where} must be a string")
    body = pattern[1:] if pattern.startswith("^") else ".*" + pattern   # a search, not a match
    body = body[:-1] if body.endswith("$") and not body.endswith("\\$") else body + ".*"
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            out.append(_escape(body[i + 1:i + 2], where))
            i += 2
        elif c == "[":
            end = _class_end(body, i, where)
            out.append(_class(body[i + 1:end], where))
            i = end + 1
        elif c == "(" and body.startswith("(?", i):
            if not body.startswith("(?:", i):
                raise PatternError(f"'pattern' at {where}: '(?' groups (lookarounds, flags, "
                                   "names) are not supported")
            out.append("(")
            i += 3
        elif c == "?" and out and out[-1] and (out[-1][-1] in "*+?" or QUANTIFIER.fullmatch(out[-1])):
            i += 1                      # a lazy quantifier matches the same strings
        elif c == "{" and QUANTIFIER.match(body, i):
            end = QUANTIFIER.match(body, i).end()
            out.append(body[i:end])
            i = end
        elif c in "^$":
            raise PatternError(f"'pattern' at {where}: '{c}' is supported only at its ends")
        elif c in '"' or ord(c) < 0x20 or ord(c) == 0x7F:
            raise PatternError(f"'pattern' at {where} holds {c!r}, which JSON escapes in a "
                               "string: not supported")
        else:
            out.append(c)
            i += 1
    return "^" + "".join(out) + "$"


def _escape(c: str, where: str) -> str:
    if c in CLASS_ESCAPES:
        return _written(CLASS_ESCAPES[c])
    if c and c in METACHARACTERS:
        return _written([(ord(c), ord(c))])
    raise PatternError(f"'pattern' at {where}: the escape \\{c} is not supported "
                       "(\\d, \\w and escaped punctuation are)")


def _class_end(body: str, start: int, where: str) -> int:
    i = start + 1 + (body.startswith("^", start + 1))
    i += body.startswith("]", i)                    # a leading ']' is itself
    while i < len(body) and body[i] != "]":
        i += 2 if body[i] == "\\" else 1
    if i >= len(body):
        raise PatternError(f"'pattern' at {where}: a '[' is not closed")
    return i


def _class(inner: str, where: str) -> str:
    """A character class, as code-point ranges without JSON's escaped characters."""
    negated = inner.startswith("^")
    chars, i, items = inner[negated:], 0, []     # items: (code, escaped) or a list of ranges
    while i < len(chars):
        if chars[i] == "\\":
            c = chars[i + 1:i + 2]
            if c in CLASS_ESCAPES:
                items.append(CLASS_ESCAPES[c])
            elif c and not c.isalnum():
                items.append((ord(c), True))
            else:
                raise PatternError(f"'pattern' at {where}: the escape \\{c} in a class is not "
                                   "supported")
            i += 2
        else:
            items.append((ord(chars[i]), False))
            i += 1
    ranges, j = [], 0
    while j < len(items):
        item = items[j]
        if isinstance(item, list):
            ranges.extend(item)
        elif j + 2 < len(items) and items[j + 1] == (ord("-"), False) and isinstance(items[j + 2], tuple):
            if item[0] > items[j + 2][0]:
                raise PatternError(f"'pattern' at {where}: a class range runs backwards")
            ranges.append((item[0], items[j + 2][0]))
            j += 2
        else:
            ranges.append((item[0], item[0]))
        j += 1
    if negated:
        return "[^" + _ranges_text(ranges + UNSAFE) + "]"
    return _written(ranges, where)


def _written(ranges: list, where: str = "") -> str:
    safe = _without_unsafe(ranges)
    if not safe:
        raise PatternError(f"'pattern' at {where}: a class holds only characters JSON escapes")
    return "[" + _ranges_text(safe) + "]"


def _without_unsafe(ranges: list) -> list:
    out = []
    for low, high in ranges:
        pieces = [(low, high)]
        for bad_low, bad_high in UNSAFE:
            pieces = [p for a, b in pieces for p in ((a, min(b, bad_low - 1)), (max(a, bad_high + 1), b))
                      if p[0] <= p[1]]
        out.extend(pieces)
    return out


def _ranges_text(ranges: list) -> str:
    return "".join(_point(a) if a == b else f"{_point(a)}-{_point(b)}" for a, b in ranges)


def _point(code: int) -> str:
    return f"\\x{code:02X}" if code < 0x80 else f"\\u{code:04X}" if code < 0x10000 else f"\\U{code:08X}"
