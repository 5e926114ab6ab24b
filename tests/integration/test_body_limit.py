"""Every body the API accepts can be stored: a Task of exactly the 256 KiB body limit is
admitted, whatever it is made of, and one byte more is a 413 (it used to be refused
`task_too_large`: the job item holds its keys and some ids twice besides the Task)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jobstream.http.request import MAX_BODY_BYTES
from jobstream.jobtypes.asset_fetch.keys import MAX_KEY_BYTES, longest_key_bytes
from jobstream.jobtypes.asset_fetch.params import MAX_ASSET_ID_LENGTH, MAX_ASSETS, MAX_URL_LENGTH
from jobstream.protocol.task import MAX_CORRELATION_ID, MAX_IDEMPOTENCY_KEY
from jobstream.runtime import Runtime
from jobstream.service import admission
from jobstream.store.budgets import ADMITTED_JOB_BYTES
from jobstream.store.item_size import MAX_ITEM_BYTES, item_size
from jobstream.tenant_names import is_tenant_name
from tests.support.fat import WIDE, fill
from tests.support.harness import Api
from tests.support.state import whole_table

# The one target, named by no Task: its id is in the job, not in the body.
TARGET_ID = "\U0001f600" * 200
LONGEST_TENANT = "t" * 63
JSON = {"content-type": "application/json"}


@pytest.fixture
def targets_path(tmp_path: Path) -> Path:
    path = tmp_path / "targets.json"
    target = {
        "id": TARGET_ID,
        "work_type": "illustration",
        "source": "catalog",
        "query": {"tags": ["x"]},
    }
    path.write_text(json.dumps({"account": "default", "targets": [target]}), encoding="utf-8")
    return path


def encoded(task: dict[str, Any]) -> bytes:
    return json.dumps(task, ensure_ascii=False, separators=(",", ":")).encode()


def widest_asset_id(index: int) -> str:
    """The asset id of the most UTF-8 bytes admission takes: 200 characters, as many of them
    wide as its object key allows (a wide character is 3 bytes, 9 once percent-encoded in the
    key, whose 1,024 bytes S3 caps; a letter is 1 and 1)."""
    for wide in range(MAX_ASSET_ID_LENGTH - 2, -1, -1):
        asset_id = f"{index:02d}" + WIDE * wide + "a" * (MAX_ASSET_ID_LENGTH - 2 - wide)
        if longest_key_bytes(asset_id) <= MAX_KEY_BYTES:
            return asset_id
    raise AssertionError("no asset id fits")


def task_of(size: int, filler: str) -> bytes:
    """An asset_fetch Task of exactly `size` bytes: every id as wide as admission allows, params
    as large as allowed (the most assets, the longest ids and URLs), labels making up the rest."""
    assets = [
        {
            "asset_id": widest_asset_id(index),
            "locator": {
                "kind": "url",
                "value": "https://i.pximg.net/" + "p" * (MAX_URL_LENGTH - 20),
            },
        }
        for index in range(MAX_ASSETS)
    ]

    def task(labels: str) -> dict[str, Any]:
        return {
            "protocol_version": "1",
            "job_type": "asset_fetch",
            "idempotency_key": WIDE * MAX_IDEMPOTENCY_KEY,
            "correlation_id": WIDE * MAX_CORRELATION_ID,
            "deadline_ms": 600_000,
            "labels": {"l": labels},
            "params": {"assets": assets},
        }

    body = encoded(task(fill(lambda labels: len(encoded(task(labels))), size, filler)))
    assert len(body) == size
    return body


@pytest.mark.parametrize("filler", ["x", "é", WIDE, "\U0001f600", '"', "\x01"])
def test_a_task_of_exactly_the_body_limit_is_admitted_and_stored(rt: Runtime, filler: str) -> None:
    assert is_tenant_name(LONGEST_TENANT)
    body = task_of(MAX_BODY_BYTES, filler)
    status, answer = admission.submit(rt, LONGEST_TENANT, json.loads(body), None)
    assert status == 202, answer
    job_id = answer["job"]["job_id"]
    stored = item_size(whole_table(rt)[(f"JOB#{job_id}", "#JOB")])
    assert stored <= ADMITTED_JOB_BYTES < MAX_ITEM_BYTES


@pytest.mark.usefixtures("rt")
def test_over_http_the_limit_is_admitted_and_one_byte_more_is_413(api: Api) -> None:
    admitted = api.post("/jobs", raw=task_of(MAX_BODY_BYTES, WIDE), headers=JSON)
    assert admitted.status == 202, admitted.body
    refused = api.post("/jobs", raw=task_of(MAX_BODY_BYTES + 1, "x"), headers=JSON)
    assert refused.status == 413
    assert refused.body["error"]["detail"] == {"limit_bytes": MAX_BODY_BYTES}
