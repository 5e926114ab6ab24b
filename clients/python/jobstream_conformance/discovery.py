"""The kit's own copy, capabilities, and authentication on every route."""

from __future__ import annotations

from typing import Any

from jobstream_conformance import schema
from jobstream_conformance.probe import NO_TOKEN, Exchange, Omitted, Probe
from jobstream_conformance.session import Failed, Session

UNKNOWN_JOB = "conformance-no-such-job"
CANDIDATE_SEARCH_SCHEMAS = ("#/$defs/CandidateSearchParams", "#/$defs/Result_CandidateSearch")
BUDGETS = ("queued_timeout_ms", "stall_timeout_ms", "default_deadline_ms")


def self_check(session: Session) -> None:
    with session.item("K1") as check:
        check.note(schema.self_check())


def capabilities(session: Session) -> None:
    exchange = session.a.capabilities()
    with session.item("R47") as check:
        document = check.status(exchange, 200)
        check.expect("1" in document["protocol_versions"], 'protocol_versions lacks "1"')
        declared = _declared(session, document)
        for budget in BUDGETS:
            value = declared.get(budget)
            check.expect(
                isinstance(value, int) and value > 0, f"{budget} is {value!r}, not a positive int"
            )
        check.note(
            f"versions {document['protocol_versions']}, job type {session.job_type!r}, "
            + ", ".join(f"{budget} {declared[budget]}" for budget in BUDGETS)
        )
    with session.item("C1") as check:
        document = check.status(exchange, 200)
        versions = [str(version) for version in document["protocol_versions"]]
        check.expect(
            any(version.split(".", 1)[0] == "1" for version in versions),
            f"no version 1 in {versions}",
        )
        declared = _declared(session, document)
        for name in ("params_schema", "result_schema"):
            check.expect(isinstance(declared.get(name), str), f"{name} missing")
        check.note(f"{session.job_type}: {declared['params_schema']}, {declared['result_schema']}")
    with session.item("R29") as check:
        document = check.status(exchange, 200)
        features = set(_declared(session, document).get("features") or [])
        missing = {"target_selector", "events"} - features
        check.expect(not missing, f"features {sorted(features)} lack {sorted(missing)}")
        check.note(f"features {sorted(features)}")
    with session.item("R19") as check:
        document = check.status(exchange, 200)
        declared = _declared(session, document)
        if declared["name"] == "candidate_search":
            named = (declared.get("params_schema"), declared.get("result_schema"))
            check.expect(named == CANDIDATE_SEARCH_SCHEMAS, f"schemas named {named}")
        interval = declared.get("heartbeat_interval_ms")
        check.expect(
            isinstance(interval, int) and interval > 0,
            f"heartbeat_interval_ms is {interval!r}",
        )
        check.note("capabilities valid; schemas and budgets declared (values are configuration)")


def _declared(session: Session, document: dict[str, Any]) -> dict[str, Any]:
    """The declaration of the job type this run submits; the first one if none was chosen."""
    job_types = document["job_types"]
    if session.config.job_type is None and job_types and session.capabilities is None:
        session.job_type = str(job_types[0]["name"])
    session.capabilities = document
    declared = next((t for t in job_types if t.get("name") == session.job_type), None)
    if declared is None:
        raise Failed(f"job_types declare no {session.job_type!r}")
    session.features = frozenset(declared.get("features") or ())
    return dict(declared)


def every_route(probe: Probe, **options: Any) -> list[Exchange]:
    """One request to each protocol route (an unknown job where one is needed)."""
    task = {"protocol_version": "1", "job_type": "x", "idempotency_key": "k", "params": {}}
    return [
        probe.capabilities(**options),
        probe.submit(task, **options),
        probe.list({"idempotency_key": "k"}, **options),
        probe.job(UNKNOWN_JOB, **options),
        probe.cancel(UNKNOWN_JOB, **options),
        probe.events(UNKNOWN_JOB, {"unacked": "1"}, **options),
        probe.ack(UNKNOWN_JOB, {"ack_through": "x"}, **options),
    ]


def authentication(session: Session) -> None:
    """E1, R31, C2: every route refuses a missing, wrong or non-Bearer token with a 401 envelope."""
    refused: list[Exchange] = []
    with session.item("E1") as check:
        refusals: tuple[tuple[str, str | Omitted], ...] = (
            ("no token", NO_TOKEN),
            ("a wrong token", f"Bearer wrong-{session.run_id}"),
            ("another scheme", f"Basic {session.config.token}"),
        )
        for label, authorization in refusals:
            answers = every_route(session.a, authorization=authorization)
            refused += answers
            for exchange in answers:
                error = check.error(exchange, 401)
                check.expect(error.get("retryable") is False, f"{exchange}: retryable is not false")
            check.note(f"{label}: 7 routes → 401 {answers[0].error.get('code')}")
    with session.item("R31") as check:
        for exchange in refused[5:7]:  # events and ack, without a token
            check.error(exchange, 401)
        check.note("events and ack without a token → 401")
    with session.item("C2") as check:
        check.expect(
            all(
                exchange.status in {401, 403} and not exchange.schema_errors for exchange in refused
            ),
            "a refused token is not always a 401/403 envelope (E1)",
        )
        check.note("refused with an envelope on every route (E1)")
