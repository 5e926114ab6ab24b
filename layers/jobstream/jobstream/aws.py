"""The AWS clients, created on first use so that importing a handler stays cheap.

They come from botocore directly, from one session per process: boto3 adds nothing a client of
ours uses (its additions are resources and S3's transfer methods), and importing it costs about
0.02 s more on every cold start. The session's loaders are shared, so a second client reads only
its own service's model. Its data loader (botocore_data.py) looks up only the service whose model
it loads and reads only our services' endpoint data: about 45 ms less on a first client.

botocore honours AWS_ENDPOINT_URL, which the local stack sets. `sam local` only passes variables
the template declares, so JOBSTREAM_AWS_ENDPOINT_URL (empty on AWS) points functions there instead.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Final

from jobstream.config.environment import variable
from jobstream.retries import RetryingClient, client_config

if TYPE_CHECKING:
    from botocore.config import Config
    from botocore.session import Session

ENDPOINT_VARIABLE: Final = "JOBSTREAM_AWS_ENDPOINT_URL"

_lock = threading.Lock()  # a botocore session may not create two clients at once
# By whether its endpoint data is narrowed (botocore_data.py): a client of a service outside
# NARROWED_SERVICES comes from a session reading botocore's whole endpoint data.
_sessions: dict[bool, Session] = {}


def endpoint_url() -> str | None:
    return variable(ENDPOINT_VARIABLE) or None


def client(service: str, config: Config) -> Any:
    """A plain client of `service` (typed by each caller: the stubs type one per service)."""
    # Deferred with the first client (cold start): importing them imports botocore.
    from jobstream.botocore_data import NARROWED_SERVICES, ClientDataLoader  # noqa: PLC0415

    narrowed = service in NARROWED_SERVICES
    with _lock:
        session = _sessions.get(narrowed)
        if session is None:
            from botocore.session import get_session  # noqa: PLC0415 - deferred (cold start)

            session = _sessions[narrowed] = get_session()
            loader = ClientDataLoader(
                session.get_config_variable("data_path"), narrow_endpoints=narrowed
            )
            session.register_component("data_loader", loader)
        return session.create_client(service, endpoint_url=endpoint_url(), config=config)


def retrying_client(service: str) -> Any:
    """A client of `service` whose every call is retried on transient failures (retries.py)."""
    return RetryingClient(client(service, client_config()), service)
