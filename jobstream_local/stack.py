"""Starting and stopping the whole system in one process: moto server, resources, HTTP API."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import MutableMapping
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any

from jobstream_local.gateway import LocalHttpApi, make_server
from jobstream_local.moto_atomic import make_dynamodb_atomic
from jobstream_local.resources import create_tables
from jobstream_local.template import Template

# What `make run` uses when the environment says nothing: the embedded default.
LOCAL_DEFAULTS = {
    "JOBSTREAM_API_TOKENS": "local=local-dev-token",
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@dataclass
class LocalStack:
    moto: Any
    http: ThreadingHTTPServer
    thread: threading.Thread

    @property
    def base_url(self) -> str:
        host, port = self.http.server_address[:2]
        return f"http://{host!s}:{port}"

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()
        self.thread.join(timeout=5)
        self.moto.stop()


def start(
    port: int = 3000, host: str = "127.0.0.1", environ: MutableMapping[str, str] | None = None
) -> LocalStack:
    """Start moto, create the template's resources, and serve its HTTP API routes."""
    from moto.server import ThreadedMotoServer

    env = os.environ if environ is None else environ
    # moto's server logs every request it serves; the local stack logs its own routes instead.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    for name, value in LOCAL_DEFAULTS.items():
        env.setdefault(name, value)
    make_dynamodb_atomic()
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
        template = Template.load()
        env.update(template.function_environment(dict(env)))

        # Configuration is checked before anything serves: invalid values stop start-up here.
        from jobstream.config.settings import load_settings

        load_settings(env)
        import boto3

        create_tables(template, boto3.client("dynamodb", endpoint_url=env["AWS_ENDPOINT_URL"]))
        api = LocalHttpApi(template.http_routes())
        server = make_server(api, host, port)
    except BaseException:
        moto.stop()
        raise
    thread = threading.Thread(target=server.serve_forever, name="local-http-api", daemon=True)
    thread.start()
    return LocalStack(moto=moto, http=server, thread=thread)
