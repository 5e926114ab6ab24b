"""Starting and stopping the whole system in one process: moto server, resources, HTTP API,
queue pollers, the table stream's poller and schedules, all read from template.yaml."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from jobstream_local.gateway import LocalHttpApi, load_handler, make_server
from jobstream_local.moto_patches import patch_moto
from jobstream_local.resources import create_queues, create_secrets, create_tables
from jobstream_local.streams import StreamPoller
from jobstream_local.template import REPOSITORY, Template
from jobstream_local.workers import QueuePoller, Schedule

# What `make run` uses when the environment says nothing: the embedded default.
LOCAL_DEFAULTS = {
    "JOBSTREAM_SWEEP_INTERVAL_S": "5",
    # A registry secret chosen locally (JOBSTREAM_TENANTS_SECRET) is read again every second.
    "JOBSTREAM_TENANTS_MAX_AGE_S": "1",
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",  # moto accepts any credentials
    "AWS_DEFAULT_REGION": "us-east-1",
}


# The consumer registry when none is chosen (no JOBSTREAM_TENANTS_SECRET, JOBSTREAM_TENANTS or
# JOBSTREAM_API_TOKENS): one tenant, `local`, whose receivers may listen on this machine.
LOCAL_TENANT = {
    "JOBSTREAM_API_TOKENS": "local=local-dev-token",
    "JOBSTREAM_CALLBACK_ORIGINS": "http://127.0.0.1:*,http://localhost:*",
}
REGISTRY_SOURCES = ("JOBSTREAM_TENANTS_SECRET", "JOBSTREAM_TENANTS", "JOBSTREAM_API_TOKENS")


@dataclass
class LocalStack:
    moto: Any
    http: ThreadingHTTPServer
    thread: threading.Thread
    resources: dict[str, dict[str, str]]
    stopping: threading.Event = field(default_factory=threading.Event)
    workers: list[threading.Thread] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        host, port = self.http.server_address[:2]
        return f"http://{host!s}:{port}"

    def stop(self) -> None:
        self.stopping.set()
        self.http.shutdown()
        self.http.server_close()
        self.thread.join(timeout=5)
        # Workers finish the call they are in; they are daemons, so a busy one cannot hold us.
        deadline = time.monotonic() + 2
        for worker in self.workers:
            worker.join(timeout=max(0.0, deadline - time.monotonic()))
        self.moto.stop()
        LOCAL_ENV.unlink(missing_ok=True)


def start(
    port: int = 3000, host: str = "127.0.0.1", environ: MutableMapping[str, str] | None = None
) -> LocalStack:
    """Start moto, create the template's resources, serve its routes, poll its queues."""
    from moto.server import ThreadedMotoServer

    env = os.environ if environ is None else environ
    # moto's server logs every request it serves; the local stack logs its own routes instead.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    for name, value in LOCAL_DEFAULTS.items():
        env.setdefault(name, value)
    if not any((env.get(name) or "").strip() for name in REGISTRY_SOURCES):
        for name, value in LOCAL_TENANT.items():
            if not (env.get(name) or "").strip():
                env[name] = value
    patch_moto()
    # A fixed port lets `sam local` reach the same endpoint (see README); 0 picks a free one.
    moto = ThreadedMotoServer(
        ip_address=env.get("JOBSTREAM_MOTO_HOST", "127.0.0.1"),
        port=int(env.get("JOBSTREAM_MOTO_PORT") or 0),
        verbose=False,
    )
    moto.start()
    moto_host, moto_port = moto.get_host_and_port()
    env["AWS_ENDPOINT_URL"] = f"http://{moto_host}:{moto_port}"
    print(f"local AWS endpoint at {env['AWS_ENDPOINT_URL']}", flush=True)
    try:
        stack = _start_services(Template.load(), env, moto, host, port)
    except BaseException:
        moto.stop()
        raise
    return stack


LOCAL_ENV = REPOSITORY / ".jobstream" / "local-env.json"


def _write_local_env(env: Mapping[str, str]) -> None:
    """What the operator CLI's --local needs to reach this stack (removed on stop)."""
    names = [name for name in env if name.startswith(("JOBSTREAM_", "AWS_"))]
    LOCAL_ENV.parent.mkdir(exist_ok=True)
    LOCAL_ENV.write_text(json.dumps({name: env[name] for name in names}), encoding="utf-8")


def _start_services(
    template: Template, env: MutableMapping[str, str], moto: Any, host: str, port: int
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
    chosen_secret = (env.get("JOBSTREAM_TENANTS_SECRET") or "").strip()
    env.update(template.function_environment(dict(env), resources))
    if not chosen_secret:
        # The template's (empty) registry secret exists locally, for `sam local`; the stack's
        # own functions read the registry the environment chose.
        env.pop("JOBSTREAM_TENANTS_SECRET", None)
    # Configuration is checked before anything serves: invalid values stop start-up here.
    load_settings(env)
    server = make_server(LocalHttpApi(template.http_routes()), host, port)
    thread = threading.Thread(target=server.serve_forever, name="local-http-api", daemon=True)
    stack = LocalStack(moto=moto, http=server, thread=thread, resources=resources)
    # Like Lambda scaling out: several concurrent invocations per queue.
    concurrency = int(env.get("JOBSTREAM_LOCAL_CONCURRENCY") or 4)
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
            for _ in range(concurrency)
        )
    # The dispatcher on the table's stream (one shard locally: one reader).
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
    interval = float(env.get("JOBSTREAM_SWEEP_INTERVAL_S") or 5)
    stack.workers.extend(
        Schedule(
            function_name=function.name,
            handler=load_handler(function),
            interval_s=interval,
            stopping=stack.stopping,
        )
        for function in template.scheduled_functions()
    )
    thread.start()
    for worker in stack.workers:
        worker.start()
    # Written once the port is bound: the CLI's --local reads the URL from it.
    _write_local_env({**env, "JOBSTREAM_URL": stack.base_url})
    return stack
