"""The functions' logs in the emulator's CloudWatch Logs: what went wrong, and the sweep."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# Text that marks a log line as a failure whatever its format: an IAM refusal, a crash, an
# import error in a function's init.
FAILURE_MARKERS = (
    "AccessDenied",
    "is not authorized to perform",
    "Traceback (most recent call last)",
    "Runtime.ImportModuleError",
    "No module named",
    "invalid configuration",
)
MAX_MESSAGE = 600


@dataclass(frozen=True)
class LogLine:
    function: str  # logical id
    message: str

    def short(self) -> str:
        text = self.message.strip().replace("\n", " | ")
        return f"{self.function}: {text[:MAX_MESSAGE]}"


def is_failure(message: str) -> bool:
    """An ERROR/CRITICAL JSON record, or any line with a failure marker."""
    try:
        record = json.loads(message)
    except ValueError:
        record = None
    if isinstance(record, dict) and str(record.get("level", "")).upper() in {"ERROR", "CRITICAL"}:
        return True
    return any(marker in message for marker in FAILURE_MARKERS)


def explain(message: str) -> str:
    """The useful part of a JSON log record: its message and the exception's last line."""
    try:
        record = json.loads(message)
    except ValueError:
        return message
    if not isinstance(record, dict):
        return message
    parts = [str(record.get("message", ""))]
    exception = record.get("exception")
    if isinstance(exception, str) and exception.strip():
        parts.append(exception.strip().splitlines()[-1])
    return " - ".join(p for p in parts if p) or message


@dataclass
class FunctionLogs:
    """Reads the log group of every function of the stack (Stack.log_groups)."""

    logs_client: Any
    groups: Mapping[str, str]  # logical id -> the function's log group

    def lines(self, logical_ids: Iterable[str] | None = None) -> list[LogLine]:
        found = []
        for logical in logical_ids or self.groups:
            kwargs: dict[str, Any] = {"logGroupName": self.groups[logical]}
            while True:
                try:
                    page = self.logs_client.filter_log_events(**kwargs)
                except self.logs_client.exceptions.ResourceNotFoundException:
                    break
                found += [LogLine(logical, e["message"]) for e in page.get("events", [])]
                if not page.get("nextToken"):
                    break
                kwargs["nextToken"] = page["nextToken"]
        return found

    def failures(self) -> list[LogLine]:
        return [
            LogLine(line.function, explain(line.message))
            for line in self.lines()
            if is_failure(line.message)
        ]

    def containing(self, logical_id: str, text: str) -> list[str]:
        return [line.message for line in self.lines([logical_id]) if text in line.message]
