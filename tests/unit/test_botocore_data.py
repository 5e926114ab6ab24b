"""The clients' botocore data (jobstream/botocore_data.py): the narrowed endpoint data is what the
pinned botocore holds for those services, and a client made from it sends each request where and
as botocore's own client would, in every region and partition; the loader still refuses an
unknown service and still reads an endpoint file the environment puts before botocore's."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import UnknownServiceError
from botocore.loaders import Loader
from botocore.regions import EndpointResolver
from botocore.session import get_session

from jobstream import aws
from jobstream.botocore_data import (
    NARROWED_ENDPOINTS_FILE,
    NARROWED_SERVICES,
    ClientDataLoader,
)
from tools import botocore_endpoints

QUEUE = "https://sqs.us-east-1.amazonaws.com/1/q"
# One request of each service, sent nowhere: what is compared is where it would go and how it
# is signed.
REQUESTS: dict[str, tuple[str, dict[str, Any]]] = {
    "dynamodb": ("get_item", {"TableName": "t", "Key": {"pk": {"S": "k"}}}),
    "s3": ("get_object", {"Bucket": "bucket", "Key": "k"}),
    "secretsmanager": ("get_secret_value", {"SecretId": "s"}),
    "sns": ("publish", {"TopicArn": "arn:aws:sns:us-east-1:1:t", "Message": "m"}),
    "sqs": ("send_message", {"QueueUrl": QUEUE, "MessageBody": "m"}),
    "ssm": ("get_parameter", {"Name": "p"}),
}
REGIONS = ("us-east-1", "eu-west-1", "ap-southeast-2", "cn-north-1", "us-gov-west-1")


class SentError(Exception):
    """Raised in place of sending a request: its URL and credential scope."""

    def __init__(self, url: str, scope: str) -> None:
        super().__init__(url)
        self.url, self.scope = url, scope


def _stop_before_sending(request: Any, **_kwargs: Any) -> None:
    authorization = request.headers.get("Authorization", b"")
    text = authorization.decode() if isinstance(authorization, bytes) else authorization
    scope = text.split("Credential=", 1)[-1].split(",", 1)[0].split("/", 1)[-1]
    raise SentError(request.url, scope)


def _sent(client: Any, service: str) -> tuple[str, str, str]:
    operation, parameters = REQUESTS[service]
    client.meta.events.register("before-send", _stop_before_sending)
    with pytest.raises(SentError) as sent:
        getattr(client, operation)(**parameters)
    return client.meta.region_name, sent.value.url, sent.value.scope


@pytest.fixture(autouse=True)
def fresh_sessions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aws, "_sessions", {})
    monkeypatch.delenv(aws.ENDPOINT_VARIABLE, raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_DATA_PATH", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")


def test_the_narrowed_file_is_what_the_pinned_botocore_holds() -> None:
    """Rewritten by `make botocore-endpoints` after the botocore pin changes."""
    assert NARROWED_ENDPOINTS_FILE.read_text(encoding="utf-8") == botocore_endpoints.rendered()


def test_the_narrowed_data_resolves_every_endpoint_of_its_services_as_the_whole_file() -> None:
    full = botocore_endpoints.builtin_endpoints()
    narrowed = json.loads(NARROWED_ENDPOINTS_FILE.read_text(encoding="utf-8"))
    whole, ours = EndpointResolver(full, True), EndpointResolver(narrowed, True)
    compared = 0
    for partition in full["partitions"]:
        names = set(partition["regions"])
        for service in NARROWED_SERVICES:
            names |= set(partition["services"].get(service, {}).get("endpoints", {}))
        for service in sorted(NARROWED_SERVICES):
            for region in sorted(names):
                for fips, dualstack in itertools.product((False, True), repeat=2):
                    arguments = {"use_fips_endpoint": fips, "use_dualstack_endpoint": dualstack}
                    expected = _resolved(whole, service, region, arguments)
                    assert _resolved(ours, service, region, arguments) == expected
                    compared += 1
    assert compared > 1500  # every partition's regions and variants, not a handful


def _resolved(resolver: EndpointResolver, service: str, region: str, arguments: Any) -> Any:
    try:
        return resolver.construct_endpoint(service, region, **arguments)
    except Exception as error:  # noqa: BLE001 - the same refusal either way
        return type(error).__name__


@pytest.mark.parametrize("region", REGIONS)
def test_a_client_sends_where_and_as_botocores_own_client(region: str) -> None:
    plain = get_session()
    for service in sorted(NARROWED_SERVICES):
        for fips in (False, True):
            config = Config(region_name=region, use_fips_endpoint=fips)
            try:
                expected = _sent(plain.create_client(service, config=config), service)
            except Exception as error:  # noqa: BLE001 - then ours refuses it too
                with pytest.raises(type(error)):
                    _sent(aws.client(service, config), service)
                continue
            assert _sent(aws.client(service, config), service) == expected


def test_a_client_outside_the_narrowed_services_reads_the_whole_file() -> None:
    client = aws.client("lambda", Config(region_name="eu-west-1"))
    assert client.meta.endpoint_url == "https://lambda.eu-west-1.amazonaws.com"
    assert sorted(aws._sessions) == [False]
    resolver = aws._sessions[False]._get_internal_component("endpoint_resolver")
    assert "eu-west-1" in resolver.get_available_endpoints("lambda")
    narrowed = EndpointResolver(json.loads(NARROWED_ENDPOINTS_FILE.read_text(encoding="utf-8")))
    assert narrowed.get_available_endpoints("lambda") == []


def test_an_unknown_service_is_still_refused() -> None:
    with pytest.raises(UnknownServiceError):
        aws.client("no-such-service", Config(region_name="us-east-1"))


def test_loading_a_model_lists_only_its_own_service(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's scan of every service is what the loader saves on a model's load; asked
    otherwise (the session's get_available_services), the loader answers as botocore does."""
    scans: list[str] = []
    scan = Loader.list_available_services

    def counted(loader: Loader, type_name: str) -> list[str]:
        scans.append(type_name)
        listed: list[str] = scan(loader, type_name)
        return listed

    monkeypatch.setattr(Loader, "list_available_services", counted)
    loader = ClientDataLoader(None, narrow_endpoints=True)
    model = loader.load_service_model("dynamodb", "service-2")
    assert model["metadata"]["serviceId"] == "DynamoDB"
    assert loader.load_service_model("dynamodb", "endpoint-rule-set-1")["rules"]
    with pytest.raises(UnknownServiceError):
        loader.load_service_model("no-such-service", "service-2")
    assert scans == []
    every = loader.list_available_services("service-2")
    assert scans == ["service-2"]
    assert {"dynamodb", "lambda", "sqs"} <= set(every)


def test_credentials_that_need_botocores_own_clients_still_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A role assumed from a profile (as an operator's CLI runs): botocore makes an STS client
    from the same session, for a service no client of ours is of."""
    config = tmp_path / "config"
    config.write_text(
        "[profile operator]\nrole_arn = arn:aws:iam::123456789012:role/operator\n"
        "source_profile = base\nregion = eu-west-1\n",
        encoding="utf-8",
    )
    credentials = tmp_path / "credentials"
    credentials.write_text(
        "[base]\naws_access_key_id = AKIDEXAMPLE\naws_secret_access_key = secret\n",
        encoding="utf-8",
    )
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_PROFILE", "operator")
    client = aws.client("dynamodb", Config(region_name="eu-west-1"))
    aws._sessions[True].register("before-send", _stop_before_sending)
    with pytest.raises(SentError) as sent:
        client.get_item(**REQUESTS["dynamodb"][1])
    assert sent.value.url == "https://sts.eu-west-1.amazonaws.com/"  # the role's, first


def test_an_endpoint_file_on_the_data_path_is_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AWS_DATA_PATH (or ~/.aws/models) before botocore's own data: botocore reads that file,
    and so do we, with what botocore then does (its legacy endpoint makes the URL)."""
    data = json.loads(NARROWED_ENDPOINTS_FILE.read_text(encoding="utf-8"))
    aws_partition = next(p for p in data["partitions"] if p["partition"] == "aws")
    aws_partition["services"]["dynamodb"]["endpoints"]["eu-west-1"] = {
        "hostname": "dynamodb.elsewhere.example"
    }
    (tmp_path / "endpoints.json").write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))
    client = aws.client("dynamodb", Config(region_name="eu-west-1"))
    assert client.meta.endpoint_url == "https://dynamodb.elsewhere.example"


def test_the_file_is_small_beside_botocores() -> None:
    """The point of it: a client reads 36 KB, not 1.2 MB."""
    whole = Path(Loader.BUILTIN_DATA_PATH) / "endpoints.json"
    assert NARROWED_ENDPOINTS_FILE.stat().st_size * 20 < whole.stat().st_size
