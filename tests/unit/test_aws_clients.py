"""The AWS clients come from botocore's session, never from boto3, whose import would add to every
cold start (docs/performance.md, the cold start), and one session makes them all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from jobstream import aws
from jobstream.botocore_data import NARROWED_SERVICES

REPOSITORY = Path(__file__).resolve().parents[2]
FUNCTIONS = sorted(path.parent.name for path in (REPOSITORY / "functions").glob("*/app.py"))


def test_every_function_makes_every_client_without_importing_boto3() -> None:
    """Each handler imported and every client of the layer made (no call is sent), in a fresh
    interpreter as on a cold start: boto3 is never imported."""
    code = f"""
import importlib.util, json, sys
for function in {FUNCTIONS!r}:
    spec = importlib.util.spec_from_file_location(
        "app_" + function, {str(REPOSITORY / "functions")!r} + "/" + function + "/app.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
from jobstream import runtime
from jobstream.alerts_topic import sns_client
from jobstream.config import stored
from jobstream.jobtypes.asset_fetch.storage import _s3_client
from jobstream.queue import sqs_client
from jobstream.store.client import dynamodb_client
runtime.runtime().store.connect()
made = [dynamodb_client(), sqs_client(), stored.client("secretsmanager"), stored.client("ssm"),
        sns_client(), _s3_client()]
from jobstream import aws
print(json.dumps({{
    "boto3": sorted(name for name in sys.modules if name.split(".")[0] == "boto3"),
    "clients": sorted(type(client).__name__ for client in made),
    "sessions": sorted(aws._sessions),
    "services": sorted(client.meta.service_model.service_name for client in made),
}}))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBSTREAM_", "AWS_"))}
    env.update(
        {
            "PYTHONPATH": str(REPOSITORY / "layers" / "jobstream"),
            "AWS_DEFAULT_REGION": "eu-west-1",
            "AWS_ACCESS_KEY_ID": "none",
            "AWS_SECRET_ACCESS_KEY": "none",
            "JOBSTREAM_TABLE": "t",
            "JOBSTREAM_API_TOKENS": "acme=a1",
        }
    )
    result = subprocess.run(  # noqa: S603 - our own interpreter and code
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=REPOSITORY,
    )
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout.splitlines()[-1])
    assert found["boto3"] == []
    assert found["clients"] == ["RetryingClient"] * 6
    # Every client of the layer reads the narrowed endpoint data (botocore_data.py), which holds
    # exactly the services they are of.
    assert found["sessions"] == [True]
    assert found["services"] == sorted(NARROWED_SERVICES)


class CountingSession:
    """A stand-in for botocore's session: how many clients it is making at once, at most."""

    def __init__(self) -> None:
        self.inside = 0
        self.most = 0
        self.made = 0
        self._count = threading.Lock()

    def create_client(self, service: str, **_kwargs: object) -> str:
        with self._count:
            self.inside += 1
            self.most = max(self.most, self.inside)
        time.sleep(0.005)  # long enough for another thread to come in, were it let in
        with self._count:
            self.inside -= 1
            self.made += 1
        return service


def test_clients_are_made_one_at_a_time_whatever_the_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """botocore's session may not make two clients at once: aws.py makes them one at a time."""
    session = CountingSession()
    monkeypatch.setattr(aws, "_sessions", {True: session})
    threads = [threading.Thread(target=aws.client, args=("dynamodb", None)) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (session.made, session.most) == (16, 1)
