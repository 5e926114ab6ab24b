"""The Typer CLI end to end: consumer commands against the real handlers over real HTTP,
operator commands against the operator runtime (moto)."""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from jobstream.runtime import Runtime
from jobstream_cli import api as cli_api
from jobstream_cli.app import app
from jobstream_local.gateway import LocalHttpApi, make_server
from jobstream_local.template import Template
from tests.integration.test_callbacks import drain, intent
from tests.integration.test_callbacks import submit as submit_with_callback
from tests.support.harness import Api, Clock
from tests.support.local_env import local_env_dir, published
from tests.support.receiver import receiver

TARGET = "bot1-illust-botefuku"


@pytest.fixture
def base_url(rt: Runtime) -> Iterator[str]:
    """The template's routes served on a free local port, as the local stack serves them."""
    server = make_server(LocalHttpApi(Template.load().http_routes()), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    yield f"http://{host!s}:{port}"
    server.shutdown()
    server.server_close()


@dataclass(frozen=True)
class Ran:
    exit_code: int
    stdout: str
    stderr: str
    output: str


def cli_lines(text: str) -> str:
    # The handlers run in this process and write their EMF metric lines to the same stdout.
    return "".join(
        line for line in text.splitlines(keepends=True) if not line.startswith('{"_aws"')
    )


def invoke(args: list[str]) -> Ran:
    # Wide enough that no table cell is cut.
    result = CliRunner().invoke(app, args, env={"COLUMNS": "240"})
    return Ran(result.exit_code, cli_lines(result.stdout), cli_lines(result.stderr), result.output)


def run(*args: str, url: str | None = None, output: str = "table") -> Ran:
    prefix = ["--output", output]
    if url is not None:
        prefix += ["--url", url, "--token", "acme-token"]
    return invoke([*prefix, *args])


def submitted(base_url: str, key: str = "cli-key") -> str:
    result = run(
        "submit", "--target-id", TARGET, "--key", key, "--no-follow", url=base_url, output="json"
    )
    assert result.exit_code == 0, result.output
    job_id: str = json.loads(result.stdout)["job_id"]
    return job_id


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_submit_without_follow_prints_the_job(base_url: str) -> None:
    result = run(
        "submit", "--target-id", TARGET, "--tag", "sky", "--limit", "2", "--no-follow", url=base_url
    )
    assert result.exit_code == 0, result.output
    assert "submitted job-" in result.stdout or "submitted " in result.stdout
    listed = json.loads(run("jobs", "list", url=base_url, output="json").stdout)["jobs"]
    (job,) = listed
    assert job["job_id"] in result.stdout
    assert job["status"] == "queued"


def test_submit_reads_a_task_file_and_options_override_it(base_url: str, tmp_path: Path) -> None:
    task = tmp_path / "task.json"
    task.write_text(
        json.dumps({"idempotency_key": "from-file", "params": {"target_id": TARGET}}),
        encoding="utf-8",
    )
    result = run(
        "submit", "--file", str(task), "--correlation-id", "chain:7", "--no-follow", url=base_url,
        output="json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    job = json.loads(result.stdout)
    assert (job["idempotency_key"], job["correlation_id"]) == ("from-file", "chain:7")


def test_submit_builds_a_task_of_any_registered_job_type(base_url: str) -> None:
    result = run(
        "submit", "--job-type", "asset_fetch", "--param", 'work_id="118416466"',
        "--param", "target_id=" + TARGET, "--no-follow", url=base_url, output="json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    job = json.loads(result.stdout)
    assert job["job_type"] == "asset_fetch"
    listed = json.loads(run("jobs", "list", url=base_url, output="json").stdout)["jobs"]
    assert [entry["job_type"] for entry in listed] == ["asset_fetch"]
    unknown = run("submit", "--job-type", "teleport", "--no-follow", url=base_url)
    assert unknown.exit_code == 2
    assert "not a job type" in unknown.output
    # A params value that is not JSON is a string; the server's own validation answers.
    refused = run(
        "submit", "-j", "asset_fetch", "-p", "work_id=abc", "--no-follow", url=base_url
    )  # fmt: skip
    assert refused.exit_code != 0
    assert "params.work_id" in refused.output


def test_jobs_list_and_show(base_url: str) -> None:
    job_id = submitted(base_url)
    listed = run("jobs", "list", "--status", "queued", "--limit", "5", url=base_url)
    assert listed.exit_code == 0, listed.output
    assert job_id in listed.stdout
    assert "queued" in listed.stdout
    assert "error code" in listed.stdout
    none = run("jobs", "list", "--correlation-id", "nobody", url=base_url)
    assert (none.exit_code, none.stdout.strip()) == (0, "no jobs")
    shown = run("jobs", "show", job_id, url=base_url)
    assert shown.exit_code == 0, shown.output
    for text in (job_id, "queued", "created", "lease", "attempt", "ms)"):
        assert text in shown.stdout


def test_show_of_a_finished_job_has_its_error(base_url: str, api: Api) -> None:
    job_id = submitted(base_url)
    assert api.post(f"/jobs/{job_id}/cancel").status == 200
    shown = run("jobs", "show", job_id, url=base_url)
    assert shown.exit_code == 0, shown.output
    assert "cancelled" in shown.stdout
    assert "total" in shown.stdout


def test_events_shows_accepted(base_url: str) -> None:
    job_id = submitted(base_url)
    result = run("events", job_id, url=base_url)
    assert result.exit_code == 0, result.output
    assert "job.accepted" in result.stdout
    lines = run("events", job_id, url=base_url, output="json").stdout.splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["job.accepted"]


def test_follow_stops_at_a_terminal_event(base_url: str, api: Api) -> None:
    job_id = submitted(base_url)
    assert api.post(f"/jobs/{job_id}/cancel").status == 200
    result = run("events", job_id, "--follow", url=base_url)
    assert result.exit_code == 0, result.output
    assert "job.accepted" in result.stdout
    assert "job.cancelled" in result.stdout


def test_follow_polls_until_the_job_finishes(
    base_url: str, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_api, "POLL_INTERVAL_S", 0.05)
    job_id = submitted(base_url)
    cancel = threading.Timer(0.3, lambda: api.post(f"/jobs/{job_id}/cancel"))
    cancel.start()
    try:
        result = run("events", job_id, "--follow", url=base_url, output="json")
    finally:
        cancel.cancel()
    assert result.exit_code == 0, result.output
    types = [json.loads(line)["type"] for line in result.stdout.splitlines()]
    assert types == ["job.accepted", "job.cancelled"]


def test_submit_follows_by_default(base_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The job never runs here (no work queue): Ctrl-C while following ends it cleanly.
    def interrupt(_seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_api, "pause", interrupt)
    result = run("submit", "--target-id", TARGET, url=base_url)
    assert result.exit_code == 130
    assert "job.accepted" in result.stdout
    assert "interrupted" in result.stderr
    assert "Traceback" not in result.output


class Pauses(list[float]):
    """The CLI's waits (between polls and before retries), recorded instead of slept."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def pauses(monkeypatch: pytest.MonkeyPatch) -> Pauses:
    recorded = Pauses()
    monkeypatch.setattr(cli_api, "pause", recorded)
    return recorded


def test_unreachable_url_is_one_line_and_exit_1(rt: Runtime, pauses: Pauses) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = run("jobs", "list", url=url)
    assert result.exit_code == 1
    assert result.stderr == (
        f"jobstream: cannot reach {url}: connection refused "
        "(is the stack running? see --url / JOBSTREAM_URL)\n"
    )
    assert "Traceback" not in result.output
    # Tried 3 times in all, well under a second apart: an interactive command does not hang.
    assert len(pauses) == 2
    assert all(wait <= 0.5 for wait in pauses)


def test_a_local_stack_that_is_gone_says_how_to_start_it(tmp_path: Path, pauses: Pauses) -> None:
    # Its file is held (the process lives on) but nothing listens at its port any more.
    url = f"http://127.0.0.1:{free_port()}"
    with local_env_dir(tmp_path) as folder, published(folder, url, JOBSTREAM_TOKEN="t"):
        result = invoke(["--local", "events", "job-1"])
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "connection refused (is the stack running? start it with `make run`)\n"
    )
    assert len(result.stderr.splitlines()) == 1


def busy_answers(monkeypatch: pytest.MonkeyPatch, count: int, retry_after: str) -> list[str]:
    """The next `count` requests are answered 503 resource_busy with Retry-After (a gateway
    shedding load) without reaching the API; the paths they were for, recorded."""
    from jobstream_client.transport import Response, Transport

    send = Transport.send
    shed: list[str] = []

    def shedding(self: Transport, method: str, path: str, **options: Any) -> Response:
        if len(shed) < count:
            shed.append(path)
            envelope = {"error": {"code": "resource_busy", "message": "busy", "retryable": True}}
            return Response(503, {"retry-after": retry_after}, json.dumps(envelope).encode())
        return send(self, method, path, **options)

    monkeypatch.setattr(Transport, "send", shedding)
    return shed


def test_a_busy_api_is_retried_as_retry_after_says(
    base_url: str, monkeypatch: pytest.MonkeyPatch, pauses: Pauses
) -> None:
    job_id = submitted(base_url)
    busy_answers(monkeypatch, 2, "1")
    result = run("jobs", "show", job_id, url=base_url)
    assert result.exit_code == 0, result.output
    assert job_id in result.stdout
    assert pauses == [1.0, 1.0]


def test_a_busy_api_that_stays_busy_fails_in_one_line_within_seconds(
    base_url: str, monkeypatch: pytest.MonkeyPatch, pauses: Pauses
) -> None:
    shed = busy_answers(monkeypatch, 10, "30")
    result = run("jobs", "list", url=base_url)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == "jobstream: resource_busy: busy (HTTP 503)"
    # 3 attempts; Retry-After: 30 is capped at 2 s for someone waiting at a terminal.
    assert (len(shed), pauses) == (3, [2.0, 2.0])


def test_a_submit_whose_answer_was_lost_says_the_retry_found_its_job(
    base_url: str, monkeypatch: pytest.MonkeyPatch, pauses: Pauses
) -> None:
    from jobstream_client import TransportError
    from jobstream_client.transport import Response, Transport

    send = Transport.send
    lost: list[str] = []

    def loses_the_first_answer(self: Transport, method: str, path: str, **options: Any) -> Response:
        response = send(self, method, path, **options)
        if (method, path) == ("POST", "/jobs") and not lost:
            lost.append(path)  # the job was admitted; its answer never arrives
            raise TransportError("POST /jobs: connection reset")
        return response

    monkeypatch.setattr(Transport, "send", loses_the_first_answer)
    result = run(
        "submit", "--target-id", TARGET, "--key", "lost", "--no-follow", url=base_url,
        output="json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "(HTTP 200) on attempt 2; an earlier attempt may have created it" in result.stderr
    listed = json.loads(run("jobs", "list", url=base_url, output="json").stdout)["jobs"]
    assert [job["job_id"] for job in listed] == [json.loads(result.stdout)["job_id"]]


def test_http_errors_print_the_envelope_code(base_url: str) -> None:
    result = run("jobs", "show", "job-does-not-exist", url=base_url)
    assert result.exit_code == 1
    # The in-process server logs its requests to stderr too: the CLI's line is the last.
    assert result.stderr.splitlines()[-1] == "jobstream: invalid_params: unknown job (HTTP 404)"
    assert "Traceback" not in result.output
    unauthorized = invoke(["--url", base_url, "--token", "wrong", "jobs", "list"])
    assert unauthorized.exit_code == 1
    assert "HTTP 401" in unauthorized.stderr


def test_bad_input_is_exit_1_and_usage_errors_exit_2(base_url: str, tmp_path: Path) -> None:
    broken = tmp_path / "task.json"
    broken.write_text("{not json", encoding="utf-8")
    result = run("submit", "--file", str(broken), "--no-follow", url=base_url)
    assert (result.exit_code, "not valid JSON" in result.stderr) == (1, True)
    missing = run("submit", "--file", str(tmp_path / "nope.json"), url=base_url)
    assert (missing.exit_code, "cannot read" in missing.stderr) == (1, True)
    assert run("jobs", "list", "--status", "bogus", url=base_url).exit_code == 2
    assert run("submit", "--expand", url=base_url).exit_code == 2
    assert run("--url", "not-a-url", "jobs", "list").exit_code == 2
    for failed in (result, missing):
        assert "Traceback" not in failed.output


def test_local_reads_the_stacks_url_and_token(base_url: str, tmp_path: Path) -> None:
    job_id = submitted(base_url)
    with local_env_dir(tmp_path) as folder:
        with published(folder, base_url, JOBSTREAM_TOKEN="acme-token"):
            result = invoke(["--local", "--output", "json", "jobs", "list"])
        stopped = invoke(["--local", "sweep"])
    assert result.exit_code == 0, result.output
    assert [job["job_id"] for job in json.loads(result.stdout)["jobs"]] == [job_id]
    assert stopped.exit_code == 1
    assert "no local stack is running" in stopped.stderr


def test_operator_commands_without_configuration_fail_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jobstream import runtime as runtime_module
    from jobstream.config.settings import ConfigurationError

    def unconfigured() -> Runtime:
        raise ConfigurationError("invalid configuration: JOBSTREAM_TABLE is required")

    monkeypatch.setattr(runtime_module, "runtime", unconfigured)
    result = run("dlq", "list")
    assert result.exit_code == 1
    assert "JOBSTREAM_TABLE is required" in result.stderr
    assert "Traceback" not in result.output


def test_dlq_list_redrive_and_sweep(crt: Runtime, queues: dict[str, Any]) -> None:
    with receiver(404, 204) as hook:
        job_id = submit_with_callback(crt, hook.url)
        drain(crt, queues)
        listed = run("dlq", "list")
        assert listed.exit_code == 0, listed.output
        assert job_id in listed.stdout
        assert "404" in listed.stdout
        (dead,) = json.loads(run("dead-letters", "list", output="json").stdout)
        assert (dead["job_id"], dead["attempts"]) == (job_id, 1)
        redriven = run("dlq", "redrive", "--job", job_id)
        assert redriven.exit_code == 0, redriven.output
        assert "revived 1 dead callback(s)" in redriven.stdout
        assert "sent 1 message(s)" in redriven.stdout
        drain(crt, queues)
        assert len(hook.requests) == 2
        assert run("dlq", "list").stdout.strip() == "no dead letters"
        swept = run("sweep")
        assert swept.exit_code == 0, swept.output
        assert "budget exhausted" in swept.stdout
        counts = json.loads(run("sweep", output="json").stdout)
        assert counts["budget_exhausted"] is False
    assert intent(crt, job_id).state == "delivered"


def test_redrive_of_everything_moves_the_dead_letter_queue(
    crt: Runtime, queues: dict[str, Any]
) -> None:
    # The first three POSTs are refused (one per job), every later one is delivered.
    with receiver(400, 400, 400, 204) as hook:
        job_ids = [submit_with_callback(crt, hook.url, key=f"k{n}") for n in range(3)]
        drain(crt, queues)
        report = json.loads(run("dlq", "redrive", output="json").stdout)
        assert report == {"revived": 3, "messages_moved": 3, "how": "move-task"}
        drain(crt, queues)
    assert {intent(crt, job_id).state for job_id in job_ids} == {"delivered"}


def test_redrive_without_move_task_permission_moves_by_hand(
    crt: Runtime, queues: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from botocore.exceptions import ClientError

    client = crt.callback_queue.client

    def denied(**_request: Any) -> None:
        error = {"Error": {"Code": "AccessDenied", "Message": "not allowed"}}
        raise ClientError(error, "StartMessageMoveTask")  # type: ignore[arg-type]

    monkeypatch.setattr(client, "start_message_move_task", denied)
    with receiver(400, 400, 204) as hook:
        job_ids = [submit_with_callback(crt, hook.url, key=f"k{n}") for n in range(2)]
        drain(crt, queues)
        redriven = run("dlq", "redrive")
        assert redriven.exit_code == 0, redriven.output
        assert "moved 2 message(s) from the dead-letter queue" in redriven.stdout
        drain(crt, queues)
    assert {intent(crt, job_id).state for job_id in job_ids} == {"delivered"}


def test_version_needs_no_stack_and_matches_the_project(monkeypatch: pytest.MonkeyPatch) -> None:
    import tomllib

    monkeypatch.setenv("JOBSTREAM_LOCAL_ENV_DIR", "/nonexistent/local-env")
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    for args in (["--version"], ["--local", "--version"], ["--version", "jobs", "list"]):
        result = invoke(args)
        assert result.exit_code == 0, result.output
        assert (
            result.stdout == f"jobstream {project['project']['version']} (Workflow Protocol v1)\n"
        )


def test_a_replay_says_so_and_a_new_submit_does_not(base_url: str) -> None:
    args = ("submit", "--target-id", TARGET, "--key", "same-key", "--no-follow")
    first = run(*args, url=base_url)
    assert first.exit_code == 0, first.output
    assert "(HTTP 202)" in first.stdout
    assert "replay" not in first.output
    again = run(*args, url=base_url)
    assert again.exit_code == 0, again.output
    assert "replay: key 'same-key' already named this job (HTTP 200)" in again.stdout
    assert not again.stdout.startswith("submitted")
    # JSON on stdout stays the job; the note goes to stderr.
    piped = run(*args, url=base_url, output="json")
    assert json.loads(piped.stdout)["idempotency_key"] == "same-key"
    assert "jobstream: replay: key 'same-key'" in piped.stderr
    new = run("submit", "--target-id", TARGET, "--key", "other-key", "--no-follow", url=base_url,
              output="json")  # fmt: skip
    assert "replay" not in new.stderr


def test_cancel_a_queued_job_then_again(base_url: str) -> None:
    job_id = submitted(base_url)
    cancelled = run("cancel", job_id, url=base_url)
    assert cancelled.exit_code == 0, cancelled.output
    assert cancelled.stdout.startswith(f"cancelled {job_id}\n")
    assert "cancelled_by_consumer" in cancelled.stdout
    again = json.loads(run("cancel", job_id, url=base_url, output="json").stdout)
    assert again["status"] == "cancelled"
    types = [json.loads(line)["type"] for line in run("events", job_id, url=base_url,
             output="json").stdout.splitlines()]  # fmt: skip
    assert types == ["job.accepted", "job.cancelled"]  # cancelled once


def test_cancel_of_a_finished_job_changes_nothing_and_says_so(
    base_url: str, rt: Runtime, clock: Any
) -> None:
    job_id = submitted(base_url)
    clock.advance(rt.settings.queued_timeout_ms + 1)
    assert run("sweep").exit_code == 0
    result = run("cancel", job_id, url=base_url)
    assert result.exit_code == 0, result.output
    assert f"{job_id} had already finished (expired): nothing to cancel" in result.stdout


def test_cancel_of_an_unknown_job_is_one_line(base_url: str) -> None:
    result = run("cancel", "job-nope", url=base_url)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == "jobstream: invalid_params: unknown job (HTTP 404)"


def test_ack_through_the_newest_event_or_a_given_one(base_url: str, api: Api) -> None:
    job_id = submitted(base_url)
    assert api.post(f"/jobs/{job_id}/cancel").status == 200
    events = [json.loads(line) for line in run("events", job_id, url=base_url,
              output="json").stdout.splitlines()]  # fmt: skip
    first, newest = events[0]["event_id"], events[-1]["event_id"]
    partial = run("ack", job_id, first, url=base_url)
    assert partial.exit_code == 0, partial.output
    assert partial.stdout.strip() == f"acked through {first}: 1 acked, 1 unacked"
    everything = run("ack", job_id, url=base_url)
    assert everything.stdout.strip() == f"acked through {newest}: 2 acked, 0 unacked"
    # The cursor never moves back; the JSON is the API's AckResult.
    result = json.loads(run("ack", job_id, first, url=base_url, output="json").stdout)
    assert (result["job_id"], result["acked"], result["unacked"]) == (job_id, 2, 0)


def test_ack_of_an_event_the_job_does_not_have_is_one_line(base_url: str) -> None:
    job_id = submitted(base_url)
    result = run("ack", job_id, "evt-1-99", url=base_url)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        f"jobstream: evt-1-99 is not an event of {job_id} (see `jobstream events {job_id}`)"
    )
    assert "Traceback" not in result.output
    missing = run("ack", "job-nope", url=base_url)
    assert missing.exit_code == 1
    assert missing.stderr.splitlines()[-1] == "jobstream: invalid_params: unknown job (HTTP 404)"


def test_progress_lines_show_what_each_event_reported(
    base_url: str, rt: Runtime, api: Api, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each progress line says what its own event reported, listed or followed, whatever the
    job reported since or however it ended (the event carries its progress)."""
    from jobstream.service import execution

    monkeypatch.setattr(cli_api, "POLL_INTERVAL_S", 0.05)
    job_id = submitted(base_url)
    record = execution.claim(rt, job_id, "worker-cli")
    assert record is not None
    lease = execution.Lease(rt, record, "worker-cli")
    clock.advance(6_000)  # no progress event within 5 s of `job.started`
    lease.progress("searching", "scanned 10 works")
    clock.advance(6_000)
    lease.progress("ranking")
    listed = run("events", job_id, url=base_url)
    lines = [line for line in listed.stdout.splitlines() if "job.progress" in line]
    assert [line.split(None, 4)[-1] for line in lines] == ["searching: scanned 10 works", "ranking"]
    assert "internal_kind" not in listed.stdout
    # Cancelled once the first page was printed: at the first wait between two polls.
    monkeypatch.setattr(cli_api, "pause", lambda _s: api.post(f"/jobs/{job_id}/cancel"))
    followed = run("events", job_id, "--follow", url=base_url)
    assert followed.exit_code == 0, followed.output
    lines = [line for line in followed.stdout.splitlines() if "job.progress" in line]
    assert [line.split(None, 4)[-1] for line in lines] == ["searching: scanned 10 works", "ranking"]
    assert "job.cancelled" in followed.stdout


def _dead_letter(job_id: str) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "event_id": "evt-1764734712345-3",
        "callback_url": "https://consumer.example.com/api/bot1/v1/jobs/events/with/a/long/path",
        "attempts": 8,
        "last_status": 503,
        "last_error": "HTTP 503 after a long answer from the consumer that keeps explaining",
        "dead_at": 1_764_734_712_345,
    }


@pytest.mark.parametrize("columns", [80, 100, 240])
def test_dlq_list_is_readable_at_any_width(monkeypatch: pytest.MonkeyPatch, columns: int) -> None:
    from jobstream.service import dead_letters

    job_ids = [f"job_{letter * 32}" for letter in "AB"]
    monkeypatch.setattr(dead_letters, "list_dead", lambda _rt: [_dead_letter(j) for j in job_ids])
    from jobstream import runtime as runtime_module

    monkeypatch.setattr(runtime_module, "runtime", lambda: None)
    result = CliRunner().invoke(app, ["-o", "table", "dlq", "list"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    assert max(len(line) for line in lines) <= columns
    text = "\n".join(lines)
    for job_id in job_ids:
        assert job_id in text  # ids whole, never cut with an ellipsis
    assert text.count("evt-1764734712345-3") == 2
    assert "…" not in text
    # A table only where every id and URL fits whole; one block per dead letter elsewhere.
    assert ("┃ job" in text) == (columns == 240)
    # Wrapped values come back whole when the wrapping is undone.
    unwrapped = re.sub(r"\s+", "", text.replace("│", ""))
    assert "https://consumer.example.com/api/bot1/v1/jobs/events/with/a/long/path" in unwrapped
    assert "503" in text


def test_smoke_names_the_step_that_failed(base_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_api, "POLL_INTERVAL_S", 0.05)
    refused = invoke(["--url", base_url, "--token", "wrong", "-o", "table", "smoke"])
    assert refused.exit_code == 1
    assert refused.stdout.startswith("FAIL  capabilities")
    assert refused.stderr.splitlines()[-1].startswith(
        "jobstream: smoke test failed at step capabilities: auth_error: "
    )
    unknown = run("smoke", "--target-id", "nope", url=base_url)
    assert unknown.exit_code == 1
    assert [line.split()[:2] for line in unknown.stdout.splitlines()] == [
        ["ok", "capabilities"],
        ["FAIL", "submit"],
    ]
    # Nothing runs jobs here: the first job never finishes, and the report says so.
    stuck = run("smoke", "--timeout", "1", url=base_url, output="json")
    assert stuck.exit_code == 1
    report = json.loads(stuck.stdout)
    assert report["ok"] is False
    assert [(step["step"], step["ok"]) for step in report["steps"]] == [
        ("capabilities", True),
        ("submit", True),
        ("replay", True),
        ("follow", False),
    ]
    assert report["steps"][-1]["detail"] == "no terminal event within 1 s (job queued)"
    assert "Traceback" not in stuck.output


def test_smoke_cancel_step_fails_when_the_job_finished_first() -> None:
    from jobstream_cli.commands import smoke
    from jobstream_client import Job, Submission

    def job(status: str) -> Job:
        return Job.from_dict(
            {"protocol_version": "1", "job_id": "job-fast", "job_type": "candidate_search",
             "status": status, "created_at": 1, "updated_at": 2}
        )  # fmt: skip

    class Fast:
        """A deployment whose job finishes before a cancel can reach it."""

        def submit(self, task: dict[str, Any]) -> Submission:
            return Submission(job=job("queued"), replayed=False)

        def cancel(self, job_id: str) -> Job:
            return job("succeeded")

    run_ = smoke.Run(Fast(), "t", None, 1.0)  # type: ignore[arg-type]
    with pytest.raises(smoke.StepFailed) as failed:
        smoke.cancel(run_)
    assert str(failed.value) == (
        "job-fast ended succeeded before the cancel reached it: give --cancel-target-id a slower "
        "target (the shipped demo-slow)"
    )


def _listed_job(job_id: str, status: str, code: str | None, created_at: int) -> dict[str, Any]:
    job: dict[str, Any] = {
        "job_id": job_id,
        "status": status,
        "created_at": created_at,
        "updated_at": created_at + 1_500,
        "attempt": 1,
        "lease_active": status == "running",
        "lease_expires_at": created_at + 60_000,
    }
    if code is not None:
        job["error"] = {"code": code, "message": "m", "retryable": False}
    return job


@pytest.mark.parametrize("columns", [80, 100, 160])
def test_jobs_list_is_readable_at_any_width(columns: int) -> None:
    from io import StringIO

    from rich.console import Console

    from jobstream_cli.render import jobs_view

    now = 1_764_734_712_345
    cancelled = "0f8fad5b-d9cb-469f-a165-70867728950e"
    running = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
    jobs = [
        _listed_job(cancelled, "cancelled", "cancelled_by_consumer", now - 245_000),
        _listed_job(running, "running", None, now - 7_380_000),
    ]
    out = StringIO()
    Console(file=out, width=columns, color_system=None).print(jobs_view(jobs, now, columns))
    lines = [line.rstrip() for line in out.getvalue().splitlines()]
    assert max(len(line) for line in lines) <= columns
    text = "\n".join(lines)
    assert "…" not in text
    for job in jobs:
        assert job["job_id"] in text  # whole, never cut
    assert "cancelled_by_consumer" in text
    # Every column where they fit; else what tells jobs apart, with the age of each.
    full = columns == 160
    assert ("lease" in text, "updated" in text, "age" in text) == (full, full, not full)
    if not full:
        assert "4m 05s" in text
        assert "2h 03m" in text
