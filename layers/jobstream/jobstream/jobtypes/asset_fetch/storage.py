"""The asset bucket: one object per fetched asset, handed out as a presigned, expiring URL.

Objects live under `jobs/<job_id>/`, the prefix the bucket's lifecycle rule expires, so the
bucket never grows without bound; a re-run of the same job overwrites its own objects (a put
repeated after a lost answer writes the same bytes: retrying it is safe).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Final, Protocol, cast
from urllib.parse import quote

from jobstream.aws import client as aws_client
from jobstream.retries import RetryingClient

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client

PREFIX: Final = "jobs/"


class AssetStore(Protocol):
    def put(self, key: str, body: bytes, mime: str, sha256_hex: str) -> None: ...

    def url(self, key: str, ttl_s: int) -> str: ...


def object_key(job_id: str, index: int, asset_id: str) -> str:
    """The job's prefix (lifecycle expiry), then position and the asset id made key-safe."""
    return f"{PREFIX}{job_id}/{index:02d}-{quote(asset_id, safe='')}"


@cache
def _s3_client() -> S3Client:
    from botocore.config import Config  # noqa: PLC0415 - deferred (cold start)

    # Standard retries (throttling, 5xx, connection errors); an upload needs a longer read
    # timeout than the table's small requests.
    config = Config(
        retries={"mode": "standard", "total_max_attempts": 3},
        connect_timeout=2,
        read_timeout=30,
        signature_version="s3v4",
    )
    client = aws_client("s3", config)
    # S3 answers a burst with 503 SlowDown for longer than botocore's three quick attempts:
    # retried around them, with backoff, like every other client of ours (retries.py).
    return cast("S3Client", RetryingClient(client, "s3"))


@dataclass(frozen=True, slots=True)
class S3AssetStore:
    bucket: str
    client: S3Client | None = None

    def _client(self) -> S3Client:
        return self.client if self.client is not None else _s3_client()

    def put(self, key: str, body: bytes, mime: str, sha256_hex: str) -> None:
        self._client().put_object(
            Bucket=self.bucket,
            Key=key,
            Body=body,
            ContentType=mime,
            Metadata={"sha256": sha256_hex},
        )

    def url(self, key: str, ttl_s: int) -> str:
        url: str = self._client().generate_presigned_url(
            ClientMethod="get_object", Params={"Bucket": self.bucket, "Key": key}, ExpiresIn=ttl_s
        )
        return url
