"""Running the whole suite against one producer."""

from __future__ import annotations

from jobstream_client.errors import TransportError
from jobstream_conformance import (
    admission,
    callbacks,
    deliveries,
    discovery,
    feed,
    lifecycle,
    stream,
    summary,
    tenancy,
)
from jobstream_conformance.session import Config, Session, Verdict


class UnreachableError(RuntimeError):
    """Nothing answered at the URL: there is no producer to judge."""


def run(config: Config) -> list[Verdict]:
    """Every catalogue item's verdict, in order. Jobs the run leaves running are cancelled."""
    if config.token_b is not None and config.token_b == config.token:
        raise ValueError("--token-b must be another consumer's token than --token")
    session = Session(config)
    try:
        session.a.capabilities()
    except TransportError as error:
        raise UnreachableError(str(error)) from None
    try:
        discovery.self_check(session)
        discovery.capabilities(session)
        discovery.authentication(session)
        feed_start = feed.start(session)
        if feed_start is not None:
            feed.long_poll(session, feed_start)
        main = admission.admission(session)
        admission.validation(session)
        admission.odd_key(session)
        if main is not None:
            lifecycle.fresh_events(session, main)
        cancelled = lifecycle.cancellation(session)
        if main is not None:
            lifecycle.run_to_the_end(session, main)
            lifecycle.cancel_of_a_finished_job(session, main)
        lifecycle.failing_job(session)
        if main is not None:
            foreign = _first_event_id(session, cancelled.job_id) if cancelled else None
            stream.finished_stream(session, main, foreign)
        lifecycle.observe_running(session)
        lifecycle.unknown_jobs(session)
        tenancy.tenancy(session)
        callbacks.callbacks(session)
        tenancy.listing(session)
        if feed_start is not None:
            feed.follow(session, feed_start)
        deliveries.deliveries(session, main)
        summary.summary(session)
    finally:
        session.tidy()
    return session.report()


def _first_event_id(session: Session, job_id: str) -> str | None:
    page = session.a.events(job_id).document
    events = page.get("events") if isinstance(page, dict) else None
    if isinstance(events, list) and events and isinstance(events[0], dict):
        event_id = events[0].get("event_id")
        return event_id if isinstance(event_id, str) else None
    return None
