"""Make moto answer a Secrets Manager read without a version with the AWSCURRENT version, as AWS
does, after the label was moved.

`UpdateSecretVersionStage` moves AWSCURRENT to another version; AWS then answers
`GetSecretValue` (no `VersionId`, no `VersionStage`) with that version. moto keeps answering the
version that was current before the move. The registry editor promotes each edit that way
(jobstream_cli/tenant_registry.py), and the functions read the secret without a version, so the
emulator would hide every edit from them.
"""

from __future__ import annotations

import functools
from typing import Any, Final

from moto.secretsmanager.models import SecretsManagerBackend

_PATCHED: Final = "_jobstream_current_follows_label"
CURRENT: Final = "AWSCURRENT"


def follow_the_current_label() -> None:
    """Idempotent: an unlabelled read answers the version AWSCURRENT was moved to."""
    original = SecretsManagerBackend.update_secret_version_stage
    if getattr(original, _PATCHED, False):
        return

    @functools.wraps(original)
    def update_secret_version_stage(
        self: SecretsManagerBackend,
        secret_id: str,
        version_stage: str,
        remove_from_version_id: str,
        move_to_version_id: str,
    ) -> tuple[str, str]:
        answer = original(
            self, secret_id, version_stage, remove_from_version_id, move_to_version_id
        )
        if version_stage == CURRENT and move_to_version_id:
            secret: Any = self.secrets[secret_id]
            secret.default_version_id = move_to_version_id
        return answer

    setattr(update_secret_version_stage, _PATCHED, True)
    SecretsManagerBackend.update_secret_version_stage = update_secret_version_stage  # type: ignore[method-assign]
