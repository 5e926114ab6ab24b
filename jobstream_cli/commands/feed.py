"""`feed [--consumer NAME] [--follow]`: every event of the caller's jobs, in commit order."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Annotated

import typer

from jobstream_cli.render import event_line
from jobstream_cli.state import Cli, current
from jobstream_client import Event


def feed(
    ctx: typer.Context,
    consumer: Annotated[
        str | None,
        typer.Option(
            "--consumer",
            "-c",
            help="a named cursor: resume after it, and move it forward past what was printed",
        ),
    ] = None,
    after: Annotated[
        str | None, typer.Option("--after", help="resume after this cursor (a next_after)")
    ] = None,
    follow_feed: Annotated[
        bool,
        typer.Option("--follow", "-f", help="keep long-polling for new events (Ctrl-C stops)"),
    ] = False,
) -> None:
    """Print the tenant's event feed (every job's events, in the order they committed).

    Without --follow it prints what is there now and the cursor to resume after; with a
    --consumer name the producer keeps that cursor, acked a page at a time.
    """
    state = current(ctx)
    if consumer is not None and after is not None:
        raise typer.BadParameter("give --consumer or --after, not both")
    if follow_feed:
        _follow(state, consumer, after)
        return
    client = state.client()
    page = client.feed_page(after=after, consumer=consumer)
    while True:
        for event in page.events:
            _show(state, event)
        if consumer is not None and page.events:
            client.feed_ack(consumer, page.next_after)
        if not page.has_more:
            break
        page = client.feed_page(after=page.next_after)
    if not state.json:
        state.out.print(f"resume with --after {page.next_after}")


def _follow(state: Cli, consumer: str | None, after: str | None) -> None:
    waiting: AbstractContextManager[object] = (
        state.out.status("following the feed (Ctrl-C to stop)", spinner="dots")
        if not state.json and state.out.is_terminal
        else nullcontext()
    )
    with waiting:
        for event in state.client().feed(consumer, after=after):
            _show(state, event)


def _show(state: Cli, event: Event) -> None:
    if state.json:
        state.emit_json(event.raw, line=True)
    else:
        state.out.print(event_line(event.raw))
