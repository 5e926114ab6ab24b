"""The conformance kit against another producer than jobstream: a correct one passes, and each
deliberately broken one fails the items its fault breaks, with the evidence."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobstream_conformance import ITEMS, Config, Outcome, Verdict, run, schema, table
from jobstream_conformance.cli import main
from jobstream_conformance.report import needing_params
from tests.support.fake_producer import FakeProducer, fake_producer
from tests.support.validation import SHARED_PROTOCOL

FAST = {"queued_s": 0.05, "run_s": 0.15, "slow_run_s": 30.0}


def kit(producer: FakeProducer, **options: object) -> dict[str, Verdict]:
    config = Config(
        url=producer.url,
        token="token-a",
        token_b="token-b",
        params={"target_id": "demo"},
        cancel_params={"target_id": "slow"},
        timeout_s=10,
        poll_s=0.05,
        **options,  # type: ignore[arg-type]
    )
    return {verdict.id: verdict for verdict in run(config)}


@pytest.fixture
def producer() -> Iterator[FakeProducer]:
    with fake_producer(**FAST) as fake:
        yield fake


def test_a_conformant_producer_passes_every_item_it_can_show(producer: FakeProducer) -> None:
    verdicts = kit(producer)
    assert list(verdicts) == [item.id for item in ITEMS]
    outcomes = {verdict.id: verdict.outcome for verdict in verdicts.values()}
    assert [v for v in verdicts.values() if v.outcome is Outcome.FAIL] == []
    # It has no callbacks to push; everything else is observed.
    skipped = {item for item, outcome in outcomes.items() if outcome is Outcome.SKIPPED}
    # The fake advertises no extension: the kit says so rather than failing them.
    assert skipped == {"R43", "R44", "C22", "X1", "X2", "X3", "X4", "X5"}
    assert "does not advertise extensions.event_feed" in verdicts["X1"].evidence[0]
    assert all(verdicts[item].evidence for item in verdicts)
    # Jobs the run left running were cancelled.
    assert all(job.status != "running" for job in producer.jobs.values())


@pytest.mark.parametrize(
    ("fault", "failing", "evidence"),
    [
        ("replay_202", {"C7"}, "→ 202, expected 200"),
        ("conflict_replays", {"R15", "C8", "R48", "C17"}, "expected 409"),
        ("plain_401", {"E1", "C2", "R31", "S1"}, "not an {error} envelope"),
        ("tenant_leak", {"T1", "T2", "T3", "T4"}, "expected 404"),
        ("ack_rewinds", {"R35", "C18"}, "ack of an older event → acked/unacked (1,"),
        ("no_terminal_event", {"R50", "C19", "R41", "R38"}, "no job.succeeded in"),
        ("string_timestamps", {"S1", "R8", "R9", "R49"}, "created_at: '"),
        ("retryable_400", {"R16", "E4"}, "retryable"),
        ("unknown_job_200", {"E2", "C13", "R16", "R32"}, "→ 200, expected 404"),
    ],
)
def test_a_broken_producer_fails_with_the_evidence(
    fault: str, failing: set[str], evidence: str
) -> None:
    with fake_producer(faults=frozenset({fault}), **FAST) as broken:
        verdicts = kit(broken)
    failed = {item for item, verdict in verdicts.items() if verdict.outcome is Outcome.FAIL}
    assert failed >= failing, table(list(verdicts.values()), broken.url)
    said = [" ".join(verdicts[item].evidence) for item in failing]
    assert any(evidence in text for text in said), said


def test_the_command_exits_by_the_verdict(
    producer: FakeProducer, capsys: pytest.CaptureFixture[str]
) -> None:
    arguments = ["--url", producer.url, "--token", "token-a", "--timeout", "10"]
    assert main([*arguments, "--params", '{"target_id": "demo"}', "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["conformant"] is True
    with fake_producer(faults=frozenset({"replay_202"}), **FAST) as broken:
        assert main(["--url", broken.url, "--token", "token-a", "--timeout", "10"]) == 1
    out = capsys.readouterr().out
    assert "C7    FAIL" in out
    assert "NOT CONFORMANT: C7 failed" in out


def test_an_unreachable_producer_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--url", "http://127.0.0.1:9", "--token", "t"]) == 2
    assert capsys.readouterr().err.strip() == (
        "jobstream-conformance: cannot reach http://127.0.0.1:9: connection refused"
    )


def test_the_vendored_protocol_is_the_published_one(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "sha256 of both files as published" in schema.self_check()
    for name in schema.PUBLISHED:
        shared = SHARED_PROTOCOL / name
        if shared.exists():
            assert schema._read(name) == shared.read_bytes()
    # A copy that differs by one byte is refused, not trusted.
    tampered = schema._read("protocol.schema.json").replace(b'"1"', b'"2"', 1)
    monkeypatch.setattr(schema, "_read", lambda name: tampered)
    schema.vendored.cache_clear()
    try:
        with pytest.raises(schema.VendoredCopyError, match="not the published"):
            schema.vendored("protocol.schema.json")
    finally:
        schema.vendored.cache_clear()


def test_the_kit_ships_its_provenance() -> None:
    provenance = Path(schema.__file__).parent / "protocol" / "v1" / "PROVENANCE.md"
    text = provenance.read_text(encoding="utf-8")
    for name, digest in schema.PUBLISHED.items():
        assert name in text
        assert digest in text


def test_without_params_a_producer_that_needs_some_is_not_called_not_conformant(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Several targets, as jobstream ships: a Task must name one, and the kit without --params
    sends none. The refusal (409 invalid_params) is the producer's right: what needed an
    admitted Task is skipped with the reason, nothing fails, and the table says what to pass."""
    with fake_producer(several_targets=True, **FAST) as producer:
        verdicts = {
            verdict.id: verdict
            for verdict in run(Config(url=producer.url, token="token-a", timeout_s=10, poll_s=0.05))
        }
        assert main(["--url", producer.url, "--token", "token-a", "--timeout", "10"]) == 0
        assert [v for v in verdicts.values() if v.outcome is Outcome.FAIL] == []
        unobserved = needing_params(list(verdicts.values()))
        for item in ("R8", "R9", "R15", "R17", "R42", "C3", "C6", "C9", "C11", "C12", "C23"):
            assert verdicts[item] in unobserved, verdicts[item]
        assert "409 invalid_params: several targets" in verdicts["R8"].evidence[0]
        # What needs no admitted Task is still judged.
        for item in ("K1", "S1", "R16", "R47", "E1", "E2", "E3"):
            assert verdicts[item].outcome is Outcome.PASS, verdicts[item]
        out = capsys.readouterr().out
        assert "NOT CONFORMANT" not in out
        assert f"{len(unobserved)} items were not observed" in out
        assert "--params" in out.splitlines()[-1]
        # Given the params it needs, the same producer passes every item it can show.
        given = kit(producer)
        assert [v for v in given.values() if v.outcome is Outcome.FAIL] == []
        assert needing_params(list(given.values())) == []


def test_without_params_a_broken_producer_still_fails() -> None:
    """The leniency is for a refused Task only: what the run observes is still judged."""
    with fake_producer(several_targets=True, faults=frozenset({"plain_401"}), **FAST) as broken:
        verdicts = run(Config(url=broken.url, token="token-a", timeout_s=10, poll_s=0.05))
    failed = {verdict.id for verdict in verdicts if verdict.outcome is Outcome.FAIL}
    assert {"E1", "C2", "R31"} <= failed
