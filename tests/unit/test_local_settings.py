"""The local stack's own settings: every invalid value is one line naming its variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobstream.config.settings import ConfigurationError
from jobstream_local.local_env import DEFAULT_DIRECTORY
from jobstream_local.settings import LocalSettings, load_local_settings


def test_defaults() -> None:
    assert load_local_settings({}) == LocalSettings(
        port=3000,
        moto_host="127.0.0.1",
        moto_port=0,
        concurrency=4,
        sweep_interval_s=5.0,
        local_env_dir=DEFAULT_DIRECTORY,
    )


def test_values_are_read_and_blank_means_default() -> None:
    settings = load_local_settings(
        {
            "JOBSTREAM_PORT": " 0 ",
            "JOBSTREAM_MOTO_HOST": "192.0.2.1",
            "JOBSTREAM_MOTO_PORT": "4566",
            "JOBSTREAM_LOCAL_CONCURRENCY": "8",
            "JOBSTREAM_SWEEP_INTERVAL_S": "0.5",
            "JOBSTREAM_LOCAL_ENV_DIR": "stacks",
        }
    )
    assert (settings.port, settings.moto_host, settings.moto_port) == (0, "192.0.2.1", 4566)
    assert (settings.concurrency, settings.sweep_interval_s) == (8, 0.5)
    assert settings.local_env_dir == Path("stacks")
    assert load_local_settings({"JOBSTREAM_LOCAL_CONCURRENCY": "  "}).concurrency == 4


@pytest.mark.parametrize("host", ["localhost", "::1", "host.docker.internal", "10.0.0.7"])
def test_hosts_are_addresses_or_names(host: str) -> None:
    assert load_local_settings({"JOBSTREAM_MOTO_HOST": host}).moto_host == host


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("JOBSTREAM_LOCAL_CONCURRENCY", "four", "valid integer"),
        ("JOBSTREAM_LOCAL_CONCURRENCY", "0", "greater than or equal to 1"),
        ("JOBSTREAM_LOCAL_CONCURRENCY", "-1", "greater than or equal to 1"),
        ("JOBSTREAM_LOCAL_CONCURRENCY", "1000", "less than or equal to 64"),
        ("JOBSTREAM_LOCAL_CONCURRENCY", "2.5", "valid integer"),
        ("JOBSTREAM_SWEEP_INTERVAL_S", "soon", "valid number"),
        ("JOBSTREAM_SWEEP_INTERVAL_S", "0", "greater than or equal to 0.5"),
        ("JOBSTREAM_SWEEP_INTERVAL_S", "-1", "greater than or equal to 0.5"),
        ("JOBSTREAM_SWEEP_INTERVAL_S", "nan", "finite number"),
        ("JOBSTREAM_SWEEP_INTERVAL_S", "inf", "finite number"),
        ("JOBSTREAM_SWEEP_INTERVAL_S", "86400", "less than or equal to 3600"),
        ("JOBSTREAM_PORT", "http", "valid integer"),
        ("JOBSTREAM_PORT", "-1", "greater than or equal to 0"),
        ("JOBSTREAM_PORT", "65536", "less than or equal to 65535"),
        ("JOBSTREAM_MOTO_PORT", "4566x", "valid integer"),
        ("JOBSTREAM_MOTO_PORT", "70000", "less than or equal to 65535"),
        ("JOBSTREAM_MOTO_HOST", "bad host", "IP address or a host name"),
        ("JOBSTREAM_MOTO_HOST", "http://127.0.0.1", "IP address or a host name"),
        ("JOBSTREAM_MOTO_HOST", "-leading.example", "IP address or a host name"),
    ],
)
def test_an_invalid_value_names_its_variable(variable: str, value: str, says: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        load_local_settings({variable: value})
    message = str(raised.value)
    assert message.startswith(f"invalid configuration: {variable} ")
    assert says in message
    assert repr(value.strip()) in message
    assert "\n" not in message


def test_every_problem_is_named() -> None:
    with pytest.raises(ConfigurationError) as raised:
        load_local_settings({"JOBSTREAM_PORT": "x", "JOBSTREAM_LOCAL_CONCURRENCY": "0"})
    assert "JOBSTREAM_PORT" in str(raised.value)
    assert "JOBSTREAM_LOCAL_CONCURRENCY" in str(raised.value)
