"""The operator's alert topic (SNS): endpoint transitions are published to it, when it is set."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, Final

from jobstream.aws import retrying_client

# SNS's limit on a subject (email subscriptions show it).
MAX_SUBJECT_CHARS: Final = 100


@cache
def sns_client() -> Any:
    """The client the topic uses: each call retried on transient failures (jobstream.retries).
    Untyped: the project carries no SNS stubs for one call."""
    return retrying_client("sns")


class AlertTopic:
    def __init__(self, arn: str | None, client_factory: Callable[[], Any] = sns_client) -> None:
        self.arn = arn
        self._client_factory = client_factory

    def publish(self, subject: str, message: Mapping[str, Any]) -> bool:
        """Publish one alert; False when no topic is set."""
        if not self.arn:
            return False
        self._client_factory().publish(
            TopicArn=self.arn,
            Subject=subject[:MAX_SUBJECT_CHARS],
            Message=json.dumps(message, separators=(",", ":")),
        )
        return True
