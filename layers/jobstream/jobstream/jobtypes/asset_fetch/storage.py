"""The asset bucket: one object per fetched asset, handed out as a presigned, expiring URL.

Objects live under `jobs/<job_id>/` (keys.py), the prefix the bucket's lifecycle rule expires, so
the bucket never grows without bound; a re-run of the same job overwrites its own objects (a put
repeated after a lost answer writes the same bytes: retrying it is safe).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Protocol, cast

from jobstream.aws import client as aws_client
from jobstream.retries import RetryingClient

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client


@dataclass(frozen=True, slots=True)
class SignedUrl:
    """A presigned URL and when it expires (epoch ms): never later than S3 stops honouring it."""

    url: str
    expires_at: int


class AssetStore(Protocol):
    def put(self, key: str, body: bytes, mime: str, sha256_hex: str) -> None: ...

    def url(self, key: str, ttl_s: int) -> SignedUrl: ...


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

    def url(self, key: str, ttl_s: int) -> SignedUrl:
        # SigV4 counts the TTL from the URL's X-Amz-Date: whole seconds of the wall clock (S3's
        # own), taken when signing, so at or after this second.
        signed_from_s = int(time.time())
        url: str = self._client().generate_presigned_url(
            ClientMethod="get_object", Params={"Bucket": self.bucket, "Key": key}, ExpiresIn=ttl_s
        )
        return SignedUrl(url, (signed_from_s + ttl_s) * 1000)
