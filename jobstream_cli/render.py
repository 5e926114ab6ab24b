"""How jobs, events, dead letters and counts look in a terminal (Rich renderables only)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from rich.box import SIMPLE_HEAD
from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from jobstream.jobtypes import registry
from jobstream.jobtypes.base import summarize_any_result

STATUS_STYLES: Final = {
    "queued": "dim",
    "running": "cyan",
    "succeeded": "green",
    "failed": "red",
    "expired": "yellow",
    "cancelled": "yellow",
}
FIRST_ITEMS: Final = 3


def now_ms() -> int:
    return int(time.time() * 1000)


def timestamp(ms: int | None) -> str:
    """Local wall-clock time of an epoch-ms value, or '-'."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def duration(ms: int) -> str:
    """A human duration: '850 ms', '12.3 s', '4m 05s', '2h 03m'."""
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    minutes, seconds = divmod(ms // 1000, 60)
    if minutes < 60:
        return f"{minutes}m {seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def timing(ms: int) -> str:
    """Human and exact: '4m 05s (245012 ms)'."""
    return f"{duration(ms)} ({ms} ms)"


def status(value: str) -> Text:
    return Text(value, style=STATUS_STYLES.get(value, ""))


def lease(job: Mapping[str, Any], now: int) -> str:
    expires = job.get("lease_expires_at")
    if not job.get("lease_active") or expires is None:
        return "-"
    left = expires - now
    return f"{duration(left)} left" if left > 0 else "expired"


def error_code(job: Mapping[str, Any]) -> str:
    error = job.get("error") or {}
    return str(error.get("code") or "-")


def fits_whole(
    headers: tuple[str, ...],
    rows: Iterable[tuple[str, ...]],
    width: int,
    wrapping: tuple[str, int] | None = None,
) -> bool:
    """Whether a ruled table of `rows` fits in `width` with every cell on one line, but the one
    `wrapping` column, given its minimum width."""
    rows = list(rows)
    wrapped, minimum = wrapping if wrapping is not None else (None, 0)
    widths = [
        minimum if header == wrapped else max([len(header), *(len(row[index]) for row in rows)])
        for index, header in enumerate(headers)
    ]
    # Each column has a space either side and a rule after it.
    return width >= sum(widths) + 3 * len(headers) + 1


JOB_COLUMNS: Final = ("id", "status", "created", "updated", "attempt", "lease", "error code")
# Where the whole table does not fit: what tells jobs apart (`jobs show` has the rest).
SHORT_JOB_COLUMNS: Final = ("id", "status", "age", "error code")


def jobs_view(jobs: Iterable[Mapping[str, Any]], now: int, width: int) -> Table:
    """Every column where they fit with each job id whole; else id, status, age and error."""
    records = list(jobs)
    rows = [_job_row(job, now) for job in records]
    if fits_whole(JOB_COLUMNS, rows, width):
        return _jobs_table(JOB_COLUMNS, rows)
    short = [
        (job_id, state, _age(job, now), error)
        for job, (job_id, state, *_, error) in zip(records, rows, strict=True)
    ]
    return _jobs_table(SHORT_JOB_COLUMNS, short, compact=True)


def _job_row(job: Mapping[str, Any], now: int) -> tuple[str, ...]:
    attempt = job.get("attempt")
    return (
        str(job.get("job_id")),
        str(job.get("status")),
        timestamp(job.get("created_at")),
        timestamp(job.get("updated_at")),
        str(attempt if attempt is not None else "-"),
        lease(job, now),
        error_code(job),
    )


def _age(job: Mapping[str, Any], now: int) -> str:
    created = job.get("created_at")
    return duration(max(now - created, 0)) if isinstance(created, int) else "-"


def _jobs_table(
    headers: tuple[str, ...], rows: Iterable[tuple[str, ...]], *, compact: bool = False
) -> Table:
    if compact:
        # No side rules and one space between columns: 78 columns with the longest error code.
        table = Table(
            header_style="bold",
            box=SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            collapse_padding=True,
        )
    else:
        table = Table(header_style="bold")
    for header in headers:
        table.add_column(header, no_wrap=header != "error code")
    for job_id, state, *rest in rows:
        table.add_row(job_id, status(state), *rest)
    return table


def job_detail(job: Mapping[str, Any], now: int) -> RenderableType:
    """State, timings (human + ms), lease, attempt, progress, and the result or the error."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    finished = job.get("status") in STATUS_STYLES and job.get("status") not in {
        "queued",
        "running",
    }
    created, started = job.get("created_at"), job.get("started_at")
    end = job.get("updated_at") if finished else now
    grid.add_row("job", Text(str(job.get("job_id"))))
    grid.add_row("status", status(str(job.get("status"))))
    for label in ("idempotency_key", "correlation_id"):
        if job.get(label):
            grid.add_row(label.replace("_", " "), Text(str(job[label])))
    grid.add_row("created", timestamp(created))
    grid.add_row("started", timestamp(started))
    grid.add_row("updated", timestamp(job.get("updated_at")))
    if job.get("deadline_at") is not None:
        grid.add_row("deadline", timestamp(job["deadline_at"]))
    if created is not None and started is not None:
        grid.add_row("waited", timing(started - created))
    if started is not None and end is not None:
        grid.add_row("ran" if finished else "running for", timing(max(0, end - started)))
    if created is not None and end is not None:
        grid.add_row("total" if finished else "age", timing(max(0, end - created)))
    if job.get("heartbeat_at") is not None:
        grid.add_row("heartbeat", timestamp(job["heartbeat_at"]))
    grid.add_row("lease", lease(job, now))
    grid.add_row("attempt", str(job.get("attempt") if job.get("attempt") is not None else "-"))
    progress = job.get("progress")
    if progress:
        grid.add_row("progress", Text(progress_text(progress)))
    parts: list[RenderableType] = [grid]
    if job.get("result") is not None:
        parts.append(result_summary(job["result"], job.get("job_type")))
    if job.get("error"):
        parts.append(error_text(job["error"]))
    return Group(*parts)


def progress_text(progress: Mapping[str, Any]) -> str:
    message = progress.get("message")
    return f"{progress.get('stage')}: {message}" if message else str(progress.get("stage"))


def result_summary(result: Mapping[str, Any], job_type: Any) -> Text:
    """The result in the words of its job type (what a type this deployment does not know
    holds, by its keys), then the first few things in it: candidates' URLs, fetched files."""
    declared = registry.get(job_type) if isinstance(job_type, str) else None
    summary = (declared.summarize_result if declared else summarize_any_result)(result)
    text = Text(f"result: {summary.headline}", style="green")
    for item in summary.items[:FIRST_ITEMS]:
        text.append(f"\n  {item}", style="")
    if len(summary.items) > FIRST_ITEMS:
        text.append(f"\n  (+{len(summary.items) - FIRST_ITEMS} more)", style="dim")
    return text


def error_text(error: Mapping[str, Any]) -> Text:
    text = Text(f"error: {error.get('code')}", style="red")
    if error.get("message"):
        text.append(f": {error['message']}")
    reason = (error.get("detail") or {}).get("reason")
    if reason:
        text.append(f" ({reason})", style="dim")
    return text


def event_line(event: Mapping[str, Any]) -> Text:
    """One line per event: time, type, id, and what it says (a progress event, its progress)."""
    kind = str(event.get("type"))
    style = STATUS_STYLES.get(kind.removeprefix("job."), "")
    line = Text(f"{timestamp(event.get('at'))}  ")
    line.append(f"{kind:<14}", style=style or "bold")
    line.append(f"  {event.get('event_id')}", style="dim")
    payload = event.get("payload") or {}
    progress = payload.get("progress")
    if isinstance(progress, Mapping) and progress.get("stage"):
        line.append(f"  {progress_text(progress)}")
    if payload.get("result") is not None:
        job_type = (payload.get("job") or {}).get("job_type")
        line.append("  ").append_text(result_summary(payload["result"], job_type))
    if payload.get("error"):
        line.append("  ").append_text(error_text(payload["error"]))
    return line


DEAD_LETTER_COLUMNS: Final = (
    "job", "event", "target", "attempts", "last status", "last error", "dead at"
)  # fmt: skip
MIN_ERROR_WIDTH: Final = 20


def _dead_letter_row(record: Mapping[str, Any]) -> tuple[str, ...]:
    last_status = record.get("last_status")
    return (
        str(record.get("job_id")),
        str(record.get("event_id")),
        str(record.get("callback_url")),
        str(record.get("attempts")),
        str(last_status if last_status is not None else "-"),
        str(record.get("last_error") or "-"),
        timestamp(record.get("dead_at")),
    )


def dead_letters_view(dead: Iterable[Mapping[str, Any]], width: int) -> RenderableType:
    """A table where it fits with every id and URL whole, else one short block per dead letter."""
    records = list(dead)
    rows = [_dead_letter_row(record) for record in records]
    # The error wraps in what is left, at least MIN_ERROR_WIDTH.
    fits = fits_whole(DEAD_LETTER_COLUMNS, rows, width, wrapping=("last error", MIN_ERROR_WIDTH))
    return dead_letters_table(records) if rows and fits else dead_letter_blocks(records)


def dead_letter_blocks(dead: Iterable[Mapping[str, Any]]) -> Group:
    """Job and event on one line; target, attempts, time and last error under them, long values
    wrapped in their own column: readable at 80 columns."""
    parts: list[RenderableType] = []
    for record in dead:
        job_id, event_id, target, attempts, last_status, error, dead_at = _dead_letter_row(record)
        if parts:
            parts.append(Text(""))
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(overflow="fold")
        grid.add_row("target", target)
        grid.add_row("attempts", f"{attempts}, last status {last_status}")
        grid.add_row("dead at", dead_at)
        grid.add_row("last error", Text(error, style="red"))
        head = Text(job_id, style="bold")
        head.append(f"  {event_id}", style="dim")
        parts += [head, Padding(grid, (0, 0, 0, 2))]
    return Group(*parts)


def dead_letters_table(dead: Iterable[Mapping[str, Any]]) -> Table:
    table = Table(header_style="bold")
    for header in DEAD_LETTER_COLUMNS:
        if header == "last error":
            table.add_column(header)
        elif header in {"attempts", "last status"}:
            table.add_column(header, no_wrap=True, justify="right")
        else:
            table.add_column(header, no_wrap=True)
    for record in dead:
        *before, error, dead_at = _dead_letter_row(record)
        table.add_row(*before, Text(error), dead_at)
    return table


def counts_table(counts: Mapping[str, Any]) -> Table:
    table = Table(header_style="bold")
    table.add_column("count")
    table.add_column("value", justify="right")
    for name, value in counts.items():
        table.add_row(
            name.replace("_", " "), str(value).lower() if isinstance(value, bool) else str(value)
        )
    return table
