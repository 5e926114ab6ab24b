"""The local stack's own settings (ports, host, pollers, sweep interval), checked before it starts.

Like the functions' settings: an invalid value stops start-up with one line naming the variable.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from jobstream.config.settings import ConfigurationError
from jobstream_local.local_env import DEFAULT_DIRECTORY, DIRECTORY_VARIABLE

Port = Annotated[int, Field(ge=0, le=65535)]
# A DNS name (RFC 1123 labels), for hosts that are not IP addresses.
_HOST_NAME: Final = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)


class LocalSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # The HTTP API's port (0: any free one).
    port: Port = 3000
    # Where the local AWS endpoint (moto) listens; 0.0.0.0 and a fixed port for `sam local`.
    moto_host: str = "127.0.0.1"
    moto_port: Port = 0
    # Concurrent invocations per queue, as Lambda scales out: at least one, or nothing ever runs.
    concurrency: Annotated[int, Field(ge=1, le=64)] = 4
    # How often the scheduled functions run (the sweep runs every minute on AWS).
    sweep_interval_s: Annotated[float, Field(ge=0.5, le=3600, allow_inf_nan=False)] = 5.0
    # Where a running stack leaves what the CLI's --local needs: a file per stack (local_env.py).
    local_env_dir: Path = DEFAULT_DIRECTORY
    # Stop when standard input ends: a stack started by a test or a tool (jobstream_local/child.py)
    # dies with what started it, even when that is killed, instead of serving on unseen.
    stop_with_stdin: bool = False

    @field_validator("moto_host")
    @classmethod
    def _check_host(cls, value: str) -> str:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            if not _HOST_NAME.fullmatch(value):
                raise ValueError("must be an IP address or a host name") from None
        return value


# Settings field -> environment variable.
LOCAL_ENVIRONMENT: Final[dict[str, str]] = {
    "port": "JOBSTREAM_PORT",
    "moto_host": "JOBSTREAM_MOTO_HOST",
    "moto_port": "JOBSTREAM_MOTO_PORT",
    "concurrency": "JOBSTREAM_LOCAL_CONCURRENCY",
    "sweep_interval_s": "JOBSTREAM_SWEEP_INTERVAL_S",
    "local_env_dir": DIRECTORY_VARIABLE,
    "stop_with_stdin": "JOBSTREAM_LOCAL_STOP_WITH_STDIN",
}


def load_local_settings(environ: Mapping[str, str]) -> LocalSettings:
    """The local stack's settings from the environment; ConfigurationError names what is wrong."""
    raw = {
        field_name: environ[variable].strip()
        for field_name, variable in LOCAL_ENVIRONMENT.items()
        if environ.get(variable, "").strip()
    }
    try:
        return LocalSettings.model_validate(raw)
    except ValidationError as error:
        problems = [
            f"{LOCAL_ENVIRONMENT[str(item['loc'][0])]} {item['msg']} (got {item['input']!r})"
            for item in error.errors()
        ]
        raise ConfigurationError("invalid configuration: " + "; ".join(problems)) from None
