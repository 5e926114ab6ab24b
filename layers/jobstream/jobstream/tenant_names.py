"""Tenant names: a safe alphabet, so no key or job id built from one can reach another tenant's.

Keys are `T#<tenant>` and `T#<tenant>#C#<correlation_id>` (store/keys.py) and job ids hash
`<tenant>\\0<idempotency_key>` (lifecycle/identity.py). A name holds neither `#` nor `\\0`, so the
tenant is always the text up to the first separator and two tenants' ranges never meet.
"""

from __future__ import annotations

import re
from typing import Final

TENANT_NAME_PATTERN: Final = r"^[a-z0-9][a-z0-9_-]{0,62}$"
_TENANT_NAME: Final = re.compile(TENANT_NAME_PATTERN, re.ASCII)


def is_tenant_name(name: str) -> bool:
    # fullmatch: with search/match, `$` would also accept a trailing newline.
    return _TENANT_NAME.fullmatch(name) is not None


def check_tenant_name(name: str) -> str:
    """`name` itself, or ValueError: a name outside the alphabet must never reach a key."""
    if not is_tenant_name(name):
        raise ValueError(
            f"tenant name {name[:80]!r} is not allowed: 1-63 characters of a-z, 0-9, '-' and "
            "'_', starting with a letter or digit"
        )
    return name
