"""JavaScript-compatible value rules, so validation matches the reference producer byte for byte."""

from __future__ import annotations

import json
import math
from typing import Any

# ECMAScript WhiteSpace + LineTerminator: what String.prototype.trim() removes. Python's
# str.strip() differs (it removes U+001C..U+001F and U+0085, and keeps U+FEFF).
JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def js_trim(value: str) -> str:
    """Trim like JavaScript's String.prototype.trim()."""
    return value.strip(JS_WHITESPACE)


def is_blank(value: str) -> bool:
    return js_trim(value) == ""


def js_length(value: str) -> int:
    """Length in UTF-16 code units, like JavaScript's String.length (astral characters count 2)."""
    return len(value.encode("utf-16-le", "surrogatepass")) // 2


def is_js_number(value: Any) -> bool:
    # bool is an int subclass in Python, but never a number in JSON/JavaScript.
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_js_integer(value: Any) -> bool:
    """Number.isInteger: a finite number with no fractional part (1000.0 and 1e3 count)."""
    if not is_js_number(value):
        return False
    if isinstance(value, int):
        return True
    return math.isfinite(value) and value == math.floor(value)


def js_json(value: Any) -> str:
    """JSON.stringify of a decoded JSON value, as quoted in reference messages. Iterative: a
    value may nest as deep as the JSON parser allows, deeper than Python may recurse."""
    parts: list[str] = []
    # Each entry is a value to write, or a literal (str) to write as it is.
    pending: list[tuple[bool, Any]] = [(False, value)]
    while pending:
        literal, current = pending.pop()
        if literal:
            parts.append(current)
        elif isinstance(current, list):
            _push_members(pending, "[", [(None, item) for item in current], "]")
        elif isinstance(current, dict):
            _push_members(pending, "{", list(current.items()), "}")
        else:
            parts.append(_js_scalar(current))
    return "".join(parts)


def _push_members(
    pending: list[tuple[bool, Any]], opening: str, members: list[tuple[Any, Any]], closing: str
) -> None:
    """Schedule an array's items (names None) or an object's members, comma-separated, so that
    they pop in order."""
    pending.append((True, closing))
    for index in range(len(members) - 1, -1, -1):
        name, member = members[index]
        pending.append((False, member))
        if name is not None:
            pending.append((True, json.dumps(str(name), ensure_ascii=False) + ":"))
        if index:
            pending.append((True, ","))
    pending.append((True, opening))


def _js_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return js_number(value) if math.isfinite(value) else "null"
    return json.dumps(value, ensure_ascii=False)


def js_number(value: float) -> str:
    """Number.prototype.toString for a finite number (ECMAScript Number::toString)."""
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    # repr gives the shortest round-tripping digits, as ECMAScript requires.
    mantissa, _, exponent_text = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    significant = (whole + fraction).lstrip("0")
    leading_zeros = len(whole + fraction) - len(significant)
    digits = significant.rstrip("0")
    # ECMAScript's n and k: value = 0.<digits> x 10^n, with k significant digits.
    n = len(whole) - leading_zeros + int(exponent_text or 0)
    k = len(digits)
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = f"{digits[:n]}.{digits[n:]}"
    elif -6 < n <= 0:
        text = "0." + "0" * -n + digits
    else:
        exponent = n - 1
        exponent_sign = "+" if exponent >= 0 else "-"
        head = digits if k == 1 else f"{digits[0]}.{digits[1:]}"
        text = f"{head}e{exponent_sign}{abs(exponent)}"
    return sign + text
