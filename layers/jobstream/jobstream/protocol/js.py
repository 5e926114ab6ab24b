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


def is_plain_object(value: Any) -> bool:
    return isinstance(value, dict)


def js_json(value: Any) -> str:
    """JSON.stringify for the scalar values quoted in messages (null for None)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
