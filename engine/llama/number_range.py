"""The GBNF for the integers, or the decimals, between a JSON schema's bounds.

Integers: llama.cpp's own range rules (_generate_min_max_int, ported below).
Decimals (type number): whole-number bounds, the values written without an
exponent, with at most six decimals, so no answer rounds onto a bound as a
double; that is narrower than the schema (no 1e3), never wider.
"""

import math
import sys

BOUNDS = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")
FLOAT_BOUND = 10**9       # past this a bound's neighbours round onto it as doubles
FRACTION = '"." [0-9]{1,6}'
NONZERO_FRACTION = '"." [0-9]{0,5} [1-9]'


class RangeError(ValueError):
    """Bounds no grammar here can hold, or that no value satisfies."""


def number_rule(schema: dict, integer: bool, where: str) -> "str | None":
    """The GBNF for the integers (or numbers) within the schema's bounds; None: no bounds."""
    low, low_open = _bound(schema, "minimum", "exclusiveMinimum", where)
    high, high_open = _bound(schema, "maximum", "exclusiveMaximum", where)
    if low is None and high is None:
        return None
    if integer:
        low = None if low is None else math.floor(low) + 1 if low_open else math.ceil(low)
        high = None if high is None else math.ceil(high) - 1 if high_open else math.floor(high)
        if low is not None and high is not None and low > high:
            raise RangeError(f"no integer lies within the bounds at {where}")
        out = []
        _generate_min_max_int(low, high, out)
        return "".join(out)
    for value in (low, high):
        if value is not None and (not float(value).is_integer() or abs(value) > FLOAT_BOUND):
            raise RangeError(f"a number's bounds at {where} must be whole numbers within "
                             f"±{FLOAT_BOUND} (or use type integer)")
    low = None if low is None else int(low)
    high = None if high is None else int(high)
    return _decimal_rule(low, low_open, high, high_open, where)


def _bound(schema: dict, inclusive: str, exclusive: str, where: str):
    """(value, open) of the tighter of the two bound keywords, (None, False) for none;
    draft 4's boolean exclusiveMinimum/exclusiveMaximum make the inclusive one open."""
    found = []
    for key in (inclusive, exclusive):
        value = schema.get(key)
        if value is None or (key == exclusive and isinstance(value, bool)):
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise RangeError(f"'{key}' at {where} must be a number")
        found.append((value, key == exclusive or schema.get(exclusive) is True))
    if not found:
        return None, False
    lower = inclusive == "minimum"
    # the tighter: the larger lower bound (open over closed at a tie), the smaller upper one
    return max(found, key=lambda b: (b[0] if lower else -b[0], b[1]))


def _decimal_rule(low, low_open, high, high_open, where: str) -> str:
    """Numbers between whole-number bounds, written without an exponent: the non-negative
    ones, then the negative ones as '-' and their magnitudes' range."""
    alternatives = []
    if high is None or high > 0 or (high == 0 and not high_open):
        start, start_open = (0, False) if low is None or low < 0 else (low, low_open)
        alternatives.append(_magnitudes(start, start_open, high, high_open))
    if low is None or low < 0:
        start, start_open = (-high, high_open) if high is not None and high < 0 else (0, True)
        rule = _magnitudes(start, start_open, None if low is None else -low, low_open)
        alternatives.append(rule and f'"-" ({rule})')
    alternatives = [a for a in alternatives if a]
    if not alternatives:
        raise RangeError(f"no number lies within the bounds at {where}")
    return " | ".join(alternatives)


def _magnitudes(low: int, low_open: bool, high: "int | None", high_open: bool) -> "str | None":
    """Non-negative decimals between whole numbers low and high (None: no end)."""
    if high is not None and low >= high:
        return f'"{low}"' if low == high and not (low_open or high_open) else None
    parts = [f'"{low}" {NONZERO_FRACTION}' if low_open else f'"{low}" ({FRACTION})?']
    if high is None or high - 1 >= low + 1:
        out = []
        _generate_min_max_int(low + 1, None if high is None else high - 1, out)
        parts.append(f"({''.join(out)}) ({FRACTION})?")
    if high is not None and not high_open:
        parts.append(f'"{high}"')
    return " | ".join(parts)


# _generate_min_max_int is ported from llama.cpp's examples/json_schema_to_grammar.py
# (ggml-org/llama.cpp, MIT licence, Copyright (c) 2023-2024 The ggml authors), as is:
# the GBNF for the integers from min_value to max_value (either may be None).
def _generate_min_max_int(min_value, max_value, out: list, decimals_left: int = 16,
                          top_level: bool = True) -> None:
    def digit_range(from_char: str, to_char: str):
        out.append("[")
        if from_char == to_char:
            out.append(from_char)
        else:
            out.append(from_char)
            out.append("-")
            out.append(to_char)
        out.append("]")

    def more_digits(min_digits: int, max_digits: int):
        out.append("[0-9]")
        if min_digits == max_digits and min_digits == 1:
            return
        out.append("{")
        out.append(str(min_digits))
        if max_digits != min_digits:
            out.append(",")
            if max_digits != sys.maxsize:
                out.append(str(max_digits))
        out.append("}")

    def uniform_range(from_str: str, to_str: str):
        i = 0
        while i < len(from_str) and from_str[i] == to_str[i]:
            i += 1
        if i > 0:
            out.append("\"")
            out.append(from_str[:i])
            out.append("\"")
        if i < len(from_str):
            if i > 0:
                out.append(" ")
            sub_len = len(from_str) - i - 1
            if sub_len > 0:
                from_sub = from_str[i + 1:]
                to_sub = to_str[i + 1:]
                sub_zeros = "0" * sub_len
                sub_nines = "9" * sub_len

                to_reached = False
                out.append("(")
                if from_sub == sub_zeros:
                    digit_range(from_str[i], chr(ord(to_str[i]) - 1))
                    out.append(" ")
                    more_digits(sub_len, sub_len)
                else:
                    out.append("[")
                    out.append(from_str[i])
                    out.append("] ")
                    out.append("(")
                    uniform_range(from_sub, sub_nines)
                    out.append(")")
                    if ord(from_str[i]) < ord(to_str[i]) - 1:
                        out.append(" | ")
                        if to_sub == sub_nines:
                            digit_range(chr(ord(from_str[i]) + 1), to_str[i])
                            to_reached = True
                        else:
                            digit_range(chr(ord(from_str[i]) + 1), chr(ord(to_str[i]) - 1))
                        out.append(" ")
                        more_digits(sub_len, sub_len)
                if not to_reached:
                    out.append(" | ")
                    digit_range(to_str[i], to_str[i])
                    out.append(" ")
                    uniform_range(sub_zeros, to_sub)
                out.append(")")
            else:
                out.append("[")
                out.append(from_str[i])
                out.append("-")
                out.append(to_str[i])
                out.append("]")

    if min_value is not None and max_value is not None:
        if min_value < 0 and max_value < 0:
            out.append("\"-\" (")
            _generate_min_max_int(-max_value, -min_value, out, decimals_left, top_level=True)
            out.append(")")
            return

        if min_value < 0:
            out.append("\"-\" (")
            _generate_min_max_int(0, -min_value, out, decimals_left, top_level=True)
            out.append(") | ")
            min_value = 0

        min_s = str(min_value)
        max_s = str(max_value)
        min_digits = len(min_s)
        max_digits = len(max_s)

        for digits in range(min_digits, max_digits):
            uniform_range(min_s, "9" * digits)
            min_s = "1" + "0" * digits
            out.append(" | ")
        uniform_range(min_s, max_s)
        return

    less_decimals = max(decimals_left - 1, 1)

    if min_value is not None:
        if min_value < 0:
            out.append("\"-\" (")
            _generate_min_max_int(None, -min_value, out, decimals_left, top_level=False)
            out.append(") | [0] | [1-9] ")
            more_digits(0, decimals_left - 1)
        elif min_value == 0:
            if top_level:
                out.append("[0] | [1-9] ")
                more_digits(0, less_decimals)
            else:
                more_digits(1, decimals_left)
        elif min_value <= 9:
            c = str(min_value)
            range_start = '1' if top_level else '0'
            if c > range_start:
                digit_range(range_start, chr(ord(c) - 1))
                out.append(" ")
                more_digits(1, less_decimals)
                out.append(" | ")
            digit_range(c, "9")
            out.append(" ")
            more_digits(0, less_decimals)
        else:
            min_s = str(min_value)
            length = len(min_s)
            c = min_s[0]

            if c > "1":
                digit_range("1" if top_level else "0", chr(ord(c) - 1))
                out.append(" ")
                more_digits(length, less_decimals)
                out.append(" | ")
            digit_range(c, c)
            out.append(" (")
            _generate_min_max_int(int(min_s[1:]), None, out, less_decimals, top_level=False)
            out.append(")")
            if c < "9":
                out.append(" | ")
                digit_range(chr(ord(c) + 1), "9")
                out.append(" ")
                more_digits(length - 1, less_decimals)
        return

    if max_value is not None:
        if max_value >= 0:
            if top_level:
                out.append("\"-\" [1-9] ")
                more_digits(0, less_decimals)
                out.append(" | ")
            _generate_min_max_int(0, max_value, out, decimals_left, top_level=True)
        else:
            out.append("\"-\" (")
            _generate_min_max_int(-max_value, None, out, decimals_left, top_level=False)
            out.append(")")
        return

    raise RuntimeError("At least one of min_value or max_value must be set")
