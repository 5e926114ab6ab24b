"""One run of the kit: its options, its consumers, the jobs it made, and the verdict per item."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NoReturn

from jobstream_client.transport import Transport
from jobstream_conformance.catalogue import BY_ID, ITEMS, Outcome
from jobstream_conformance.probe import ENVELOPE, Exchange, Probe

TERMINAL = frozenset({"succeeded", "failed", "cancelled", "expired"})
# How an item the run could not observe for want of --params begins its evidence.
NEEDS_PARAMS = "skipped: pass --params"


@dataclass(frozen=True)
class Config:
    url: str
    token: str
    token_b: str | None = None
    # Params of a Task that succeeds; of one that runs long enough to be cancelled while
    # running; of one that finds nothing (default: the first with an impossible query tag).
    params: Mapping[str, Any] = field(default_factory=dict)
    cancel_params: Mapping[str, Any] | None = None
    fail_params: Mapping[str, Any] | None = None
    job_type: str | None = None
    timeout_s: float = 120.0  # for one job to reach the state a check needs
    poll_s: float = 0.25
    request_timeout_s: float = 30.0
    # Callbacks: where to listen, the URL the producer should POST to (default: the listening
    # address), and what to verify them with.
    receiver: str | None = None
    receiver_url: str | None = None
    callback_secrets: tuple[str, ...] = ()
    callback_token: str | None = None

    @property
    def long_params(self) -> Mapping[str, Any]:
        """Params of a Task to cancel while it runs (the main Task's when none were given)."""
        return self.params if self.cancel_params is None else self.cancel_params


@dataclass
class Verdict:
    id: str
    title: str
    outcome: Outcome
    evidence: list[str]


class Failed(Exception):  # noqa: N818 - a verdict, not an error of the kit
    """The producer broke the item."""


class Skipped(Exception):  # noqa: N818 - a verdict, not an error of the kit
    """This run could not observe the item."""


class Check:
    """Evidence for one item; `expect` stops it at the first broken expectation."""

    def __init__(self) -> None:
        self.evidence: list[str] = []

    def note(self, text: str) -> None:
        self.evidence.append(text)

    def expect(self, condition: bool, failure: str) -> None:
        if not condition:
            raise Failed(failure)

    def status(self, exchange: Exchange, *expected: int) -> Any:
        """The exchange's document, once its status is one of `expected` and it validates."""
        if exchange.status not in expected:
            wanted = " or ".join(map(str, expected))
            raise Failed(f"{exchange}, expected {wanted}: {_preview(exchange)}")
        if exchange.schema_errors:
            raise Failed(
                f"{exchange}: not a valid {exchange.definition}: {exchange.schema_errors[0]}"
            )
        return exchange.document

    def error(self, exchange: Exchange, status: int, code: str | None = None) -> dict[str, Any]:
        """The envelope's error, once the status (and code) are the expected ones."""
        self.status(exchange, status)
        error = dict(exchange.error)
        if code is not None:
            self.expect(
                error.get("code") == code,
                f"{exchange}: code {error.get('code')!r}, expected {code!r}",
            )
        return error

    def skip(self, reason: str) -> NoReturn:
        raise Skipped(reason)


def _preview(exchange: Exchange) -> str:
    text = exchange.body.decode("utf-8", "replace")
    return text if len(text) <= 120 else text[:117] + "..."


@dataclass
class Job:
    """A job this run made: its key, its latest document, and what was seen along the way."""

    name: str
    key: str
    job_id: str
    document: dict[str, Any]
    statuses: list[str] = field(default_factory=list)
    running: Exchange | None = None  # the first answer that showed it running

    @property
    def status(self) -> str:
        return str(self.document.get("status"))


class Session:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.run_id = uuid.uuid4().hex[:10]
        self.correlation_id = f"conformance:{self.run_id}"
        self.exchanges: list[Exchange] = []
        transport = Transport(config.url, timeout_s=config.request_timeout_s)
        self.a = Probe(transport, config.token, self.exchanges, name="A")
        self.b = (
            Probe(transport, config.token_b, self.exchanges, name="B")
            if config.token_b is not None
            else None
        )
        self.verdicts: dict[str, Verdict] = {}
        self.job_type = config.job_type or "candidate_search"
        self.features: frozenset[str] = frozenset()
        self.capabilities: dict[str, Any] | None = None
        self.jobs: dict[str, Job] = {}
        self.callback_events: list[dict[str, Any]] = []

    # --- verdicts ----------------------------------------------------------------------------

    @contextmanager
    def item(self, item_id: str) -> Iterator[Check]:
        """Judge one item: PASS unless an expectation breaks (FAIL) or it cannot be observed
        (SKIP). Called again for another part of the same item, FAIL wins over SKIP over PASS,
        and the evidence adds up."""
        check = Check()
        try:
            yield check
        except Failed as failure:
            self.record(item_id, Outcome.FAIL, [str(failure), *check.evidence])
        except Skipped as skipped:
            self.record(item_id, Outcome.SKIPPED, [str(skipped), *check.evidence])
        except Exception as error:  # noqa: BLE001 - whatever a broken producer answers is a failure, not a crash
            self.record(item_id, Outcome.FAIL, [f"{type(error).__name__}: {error}"])
        else:
            self.record(item_id, Outcome.PASS, check.evidence)

    def record(self, item_id: str, outcome: Outcome, evidence: list[str]) -> None:
        spec = BY_ID[item_id]
        previous = self.verdicts.get(item_id)
        if previous is None:
            self.verdicts[item_id] = Verdict(item_id, spec.title, outcome, list(evidence))
            return
        # An item passes only when every part of it was observed and passed.
        rank = {Outcome.FAIL: 3, Outcome.SKIPPED: 2, Outcome.PASS: 1, Outcome.NOT_APPLICABLE: 0}
        if rank[outcome] > rank[previous.outcome]:
            previous.outcome = outcome
            previous.evidence = [*evidence, *previous.evidence]
        else:
            previous.evidence += evidence

    def skip(self, reason: str, *item_ids: str) -> None:
        for item_id in item_ids:
            self.record(item_id, Outcome.SKIPPED, [reason])

    def report(self) -> list[Verdict]:
        """Every catalogue item, in order; what no step reached is said so (for want of
        --params, when that is what stopped the run)."""
        unreached = next(
            (
                evidence
                for verdict in self.verdicts.values()
                for evidence in verdict.evidence
                if evidence.startswith(NEEDS_PARAMS)
            ),
            "not reached in this run",
        )
        verdicts = []
        for spec in ITEMS:
            if spec.not_applicable is not None:
                reason = f"not applicable over HTTP: {spec.not_applicable}"
                verdicts.append(Verdict(spec.id, spec.title, Outcome.NOT_APPLICABLE, [reason]))
            else:
                verdicts.append(
                    self.verdicts.get(spec.id)
                    or Verdict(spec.id, spec.title, Outcome.SKIPPED, [unreached])
                )
        return verdicts

    # --- jobs --------------------------------------------------------------------------------

    def key(self, name: str) -> str:
        return f"conformance-{self.run_id}-{name}"

    def task(self, name: str, params: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
        return {
            "protocol_version": "1",
            "job_type": self.job_type,
            "idempotency_key": self.key(name),
            "correlation_id": self.correlation_id,
            "params": dict(params),
            **extra,
        }

    def params_needed(self, exchange: Exchange) -> str | None:
        """Why a refused submit says nothing against the producer: no --params were given, and
        it refused the Task the kit made up with a valid `invalid_params` envelope, as a
        producer may (params are its own: with several targets it needs one named). None when
        the refusal is the producer's to answer for."""
        if self.config.params or exchange.status in {200, 202}:
            return None
        if not 400 <= exchange.status < 500 or exchange.definition != ENVELOPE:
            return None
        if exchange.schema_errors or exchange.error.get("code") != "invalid_params":
            return None
        said = f"{exchange.status} invalid_params: {exchange.error.get('message')}"
        return f"{NEEDS_PARAMS} of a Task this producer admits (a Task with none: {said})"

    def accepted(self, check: Check, exchange: Exchange) -> Any:
        """The document of a submit that must admit a new job (202); a refusal that only says
        the run lacks --params makes the item a skip, not a failure."""
        reason = self.params_needed(exchange)
        if reason is not None:
            check.skip(reason)
        return check.status(exchange, 202)

    def not_admitted(self, exchange: Exchange, what: str) -> str:
        """Why items that needed the Task `what` were not observed."""
        return self.params_needed(exchange) or f"{what} was not admitted: {exchange}"

    def admitted(self, name: str, exchange: Exchange) -> Job | None:
        """Remember the job a submit admitted (None when it did not)."""
        document = exchange.document
        job = document.get("job") if isinstance(document, dict) else None
        if exchange.status not in {200, 202} or not isinstance(job, dict):
            return None
        if not isinstance(job.get("job_id"), str):
            return None
        made = Job(
            name, str(job.get("idempotency_key")), job["job_id"], job, [str(job.get("status"))]
        )
        self.jobs[name] = made
        return made

    def refresh(self, job: Job, probe: Probe | None = None) -> Exchange:
        exchange = (probe or self.a).job(job.job_id)
        document = exchange.document
        if exchange.status == 200 and isinstance(document, dict):
            job.document = document
            job.statuses.append(str(document.get("status")))
            if document.get("status") == "running" and job.running is None:
                job.running = exchange
        return exchange

    def wait(
        self, job: Job, until: frozenset[str] = TERMINAL, timeout_s: float | None = None
    ) -> list[Exchange]:
        """Poll GET /jobs/{id} until the status is in `until` or the time is up."""
        deadline = time.monotonic() + (self.config.timeout_s if timeout_s is None else timeout_s)
        polls: list[Exchange] = []
        while True:
            exchange = self.refresh(job)
            polls.append(exchange)
            if exchange.status != 200 or job.status in until or time.monotonic() >= deadline:
                return polls
            time.sleep(self.config.poll_s)

    def job_documents(self) -> list[tuple[Exchange, dict[str, Any]]]:
        """Every valid Job document answered so far, with its exchange."""
        return [(exchange, job) for exchange in self.exchanges for job in exchange.jobs]

    def tidy(self) -> None:
        """Cancel what this run left running (best effort: the run's verdicts are made)."""
        for job in self.jobs.values():
            if job.status not in TERMINAL:
                probe = self.b if job.name.startswith("b-") and self.b else self.a
                # Tidying up must not change the verdicts, whatever the producer answers.
                with contextlib.suppress(Exception):
                    probe.cancel(job.job_id)
