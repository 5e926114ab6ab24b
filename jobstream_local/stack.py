"""Starting and stopping the whole system: moto (in a process of its own), resources, HTTP API,
queue pollers, the table stream's poller and schedules, all read from template.yaml."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from botocore.exceptions import BotoCoreError, ClientError

from jobstream.config.settings import ConfigurationError
from jobstream_cli.errors import CliError
from jobstream_local.gateway import LocalHttpApi, load_handler, make_server
from jobstream_local.local_env import (
    DIRECTORY_VARIABLE,
    HeldFile,
    LocalEnvInUseError,
    file_for,
    hold,
)
from jobstream_local.moto_server import READY
from jobstream_local.resources import (
    create_buckets,
    create_queues,
    create_secrets,
    create_tables,
)
from jobstream_local.settings import LocalSettings
from jobstream_local.stack_token import StackToken, stack_token
from jobstream_local.streams import StreamPoller
from jobstream_local.template import Template
from jobstream_local.workers import QueuePoller, Schedule

# What `make run` uses when the environment says nothing: the embedded default.
LOCAL_DEFAULTS = {
    # A registry secret chosen locally (JOBSTREAM_TENANTS_SECRET) is read again every second.
    "JOBSTREAM_TENANTS_MAX_AGE_S": "1",
    # moto updates an index within the write: the feed needs no margin for a lagging index here,
    # and its long-polls read again often (no read is billed).
    "JOBSTREAM_FEED_SETTLE_MS": "50",
    "JOBSTREAM_FEED_POLL_MS": "50",
}
# The stack talks to its own moto only, which accepts any credentials: these replace every AWS_*
# variable of the developer's environment, so real credentials (and a profile, a region or an
# endpoint meant for AWS) never reach moto, the functions, the moto process or the local-env file.
LOCAL_AWS = {
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_DEFAULT_REGION": "us-east-1",
}


# The consumer registry when none is chosen (no JOBSTREAM_TENANTS_SECRET, JOBSTREAM_TENANTS or
# JOBSTREAM_API_TOKENS): one tenant, `local`, whose receivers may listen on this machine.
LOCAL_TENANT = {
    "JOBSTREAM_API_TOKENS": "local=local-dev-token",
    "JOBSTREAM_CALLBACK_ORIGINS": "http://127.0.0.1:*,http://localhost:*",
}
REGISTRY_SOURCES = ("JOBSTREAM_TENANTS_SECRET", "JOBSTREAM_TENANTS", "JOBSTREAM_API_TOKENS")
# The shorthand's settings the operator commands need to load the same registry (its callback
# token and signing secret stay out of the local-env file).
LOCAL_REGISTRY_SETTINGS = ("JOBSTREAM_API_TOKENS", "JOBSTREAM_CALLBACK_ORIGINS")


@dataclass
class LocalStack:
    moto: Any
    http: ThreadingHTTPServer
    thread: threading.Thread
    resources: dict[str, dict[str, str]]
    # The token `jobstream --local` uses, and the file that tells it where this stack is.
    token: StackToken
    local_env: HeldFile
    stopping: threading.Event = field(default_factory=threading.Event)
    workers: list[threading.Thread] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return _base_url(self.http)

    def stop(self) -> None:
        # First, so that no CLI finds a stack that is going away.
        self.local_env.release()
        self.stopping.set()
        self.http.shutdown()
        self.http.server_close()
        self.thread.join(timeout=5)
        # Workers finish the call they are in; they are daemons, so a busy one cannot hold us.
        deadline = time.monotonic() + 2
        for worker in self.workers:
            worker.join(timeout=max(0.0, deadline - time.monotonic()))
        _withdraw(self.token)  # before moto stops: a registry secret lives there
        self.moto.stop()


def _base_url(server: ThreadingHTTPServer) -> str:
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}"


def _withdraw(token: StackToken) -> None:
    try:
        token.withdraw()
    except (CliError, OSError, BotoCoreError, ClientError) as error:
        # Stopping goes on: the registry keeps one token that no running stack hands out.
        print(f"jobstream: could not withdraw the stack's token from the registry: {error}")


def _check_listen(host: str, port: int, names: str) -> None:
    """ConfigurationError naming the variables unless (host, port) can be listened on.

    Checked before a server is made: werkzeug (moto's server) answers a failure to bind by
    printing it and exiting its thread, which would leave start-up waiting for ever."""
    try:
        family, kind, _, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do
            probe.bind(address)
    except OSError as error:
        raise ConfigurationError(
            f"{names}: cannot listen on {host}:{port} ({error.strerror or error})"
        ) from None


class _MotoProcess:
    """moto in a process of its own (jobstream_local/moto_server.py), so that it and the
    functions each have a core; it stops when this process closes its standard input, or dies."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> tuple[str, int]:
        env = dict(os.environ)
        # The child imports what this process imported (the layer for the size rules, and us).
        env["PYTHONPATH"] = os.pathsep.join(
            [*(p for p in sys.path if p), *filter(None, [env.get("PYTHONPATH")])]
        )
        self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "jobstream_local.moto_server", self.host, str(self.port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        assert self.process.stdout is not None  # noqa: S101 - piped just above
        line = self.process.stdout.readline()
        if not line.startswith(READY):
            self.stop()
            raise ConfigurationError(
                "JOBSTREAM_MOTO_HOST / JOBSTREAM_MOTO_PORT: the local AWS endpoint did not start"
            )
        url = urlsplit(line[len(READY) :].strip())
        return str(url.hostname), int(url.port or 0)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def start(
    settings: LocalSettings,
    host: str = "127.0.0.1",
    environ: MutableMapping[str, str] | None = None,
) -> LocalStack:
    """Start moto, create the template's resources, serve its routes, poll its queues.

    A port or host it cannot listen on is a ConfigurationError naming the variable."""
    env = os.environ if environ is None else environ
    # moto's server logs every request it serves; the local stack logs its own routes instead.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    for name in [name for name in env if name.startswith("AWS_")]:
        del env[name]
    env.update(LOCAL_AWS)
    for name, value in LOCAL_DEFAULTS.items():
        env.setdefault(name, value)
    if not any((env.get(name) or "").strip() for name in REGISTRY_SOURCES):
        for name, value in LOCAL_TENANT.items():
            if not (env.get(name) or "").strip():
                env[name] = value
    _check_listen(host, settings.port, "JOBSTREAM_PORT")
    # A fixed port lets `sam local` reach the same endpoint (see docs/deploy.md); 0: a free one.
    _check_listen(
        settings.moto_host, settings.moto_port, "JOBSTREAM_MOTO_HOST / JOBSTREAM_MOTO_PORT"
    )
    moto = _MotoProcess(settings.moto_host, settings.moto_port)
    moto_host, moto_port = moto.start()
    env["AWS_ENDPOINT_URL"] = f"http://{moto_host}:{moto_port}"
    print(f"local AWS endpoint at {env['AWS_ENDPOINT_URL']}", flush=True)
    try:
        stack = _start_services(Template.load(), env, moto, host, settings)
    except BaseException:
        moto.stop()
        raise
    return stack


def _local_env_values(env: Mapping[str, str], url: str, token: str | None) -> dict[str, str]:
    """What the CLI's --local needs of this stack: its URL and token, its AWS endpoint and the
    functions' settings (for the operator commands), nothing else of the environment: no
    developer credential, no callback credential (the CLI sends no callback)."""
    from jobstream.config.settings import ENVIRONMENT

    names = [*LOCAL_AWS, "AWS_ENDPOINT_URL", *ENVIRONMENT.values(), *LOCAL_REGISTRY_SETTINGS]
    values = {name: env[name] for name in names if env.get(name)}
    values["JOBSTREAM_URL"] = url
    if token is not None:
        values["JOBSTREAM_TOKEN"] = token
    return values


def _start_services(
    template: Template,
    env: MutableMapping[str, str],
    moto: Any,
    host: str,
    settings: LocalSettings,
) -> LocalStack:
    import boto3

    from jobstream.config.settings import load_settings

    endpoint = env["AWS_ENDPOINT_URL"]
    sqs = boto3.client("sqs", endpoint_url=endpoint)
    resources = create_queues(template, sqs)
    resources.update(create_tables(template, boto3.client("dynamodb", endpoint_url=endpoint)))
    resources.update(
        create_secrets(template, boto3.client("secretsmanager", endpoint_url=endpoint))
    )
    resources.update(create_buckets(template, boto3.client("s3", endpoint_url=endpoint)))
    chosen_secret = (env.get("JOBSTREAM_TENANTS_SECRET") or "").strip()
    env.update(template.function_environment(dict(env), resources))
    if not chosen_secret:
        # The template's (empty) registry secret exists locally, for `sam local`; the stack's
        # own functions read the registry the environment chose.
        env.pop("JOBSTREAM_TENANTS_SECRET", None)
    # Configuration is checked before anything serves: invalid values stop start-up here.
    load_settings(env)
    try:
        server = make_server(LocalHttpApi(template.http_routes()), host, settings.port)
    except OSError as error:
        raise ConfigurationError(
            f"JOBSTREAM_PORT: cannot listen on {host}:{settings.port} ({error.strerror or error})"
        ) from None
    try:
        token, held = _publish(env, settings, _base_url(server))
    except BaseException:
        server.server_close()
        raise
    thread = threading.Thread(target=server.serve_forever, name="local-http-api", daemon=True)
    stack = LocalStack(
        moto=moto, http=server, thread=thread, resources=resources, token=token, local_env=held
    )
    for source in template.queue_sources():
        queue = resources[source.queue]
        handler = load_handler(source.function)
        stack.workers.extend(
            QueuePoller(
                sqs=sqs,
                queue_url=queue["Ref"],
                queue_arn=queue["Arn"],
                function_name=source.function.name,
                handler=handler,
                batch_size=source.batch_size,
                stopping=stack.stopping,
            )
            # Like Lambda scaling out: several concurrent invocations per queue.
            for _ in range(settings.concurrency)
        )
    # The dispatcher on the table's stream (moto's stream has one shard: one reader).
    streams = boto3.client("dynamodbstreams", endpoint_url=endpoint)
    stack.workers.extend(
        StreamPoller(
            streams=streams,
            stream_arn=resources[source.table]["StreamArn"],
            function_name=source.function.name,
            handler=load_handler(source.function),
            batch_size=source.batch_size,
            filters=source.filters,
            stopping=stack.stopping,
            starting_position=source.starting_position,
            max_retries=source.max_retries,
        )
        for source in template.stream_sources()
    )
    stack.workers.extend(
        Schedule(
            function_name=function.name,
            handler=load_handler(function),
            interval_s=settings.sweep_interval_s,
            stopping=stack.stopping,
        )
        for function in template.scheduled_functions()
    )
    thread.start()
    for worker in stack.workers:
        worker.start()
    return stack


def _publish(
    env: Mapping[str, str], settings: LocalSettings, url: str
) -> tuple[StackToken, HeldFile]:
    """The stack's token for the CLI, and its local-env file (once the port is bound: the file
    is named after it and carries the URL)."""
    origins = LOCAL_TENANT["JOBSTREAM_CALLBACK_ORIGINS"].split(",")
    token = stack_token(env, origins, env["AWS_ENDPOINT_URL"])
    port = int(url.rsplit(":", 1)[1])
    path = file_for(settings.local_env_dir, port)
    try:
        return token, hold(path, _local_env_values(env, url, token.token))
    except LocalEnvInUseError as error:
        _withdraw(token)
        raise ConfigurationError(f"{DIRECTORY_VARIABLE}: {error}") from None
    except BaseException:
        _withdraw(token)
        raise
