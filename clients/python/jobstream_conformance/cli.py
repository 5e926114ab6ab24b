"""`jobstream-conformance`: the kit as a command of its own (also `python -m
jobstream_conformance`); `jobstream conformance` in the repository's CLI runs the same suite.

Exit status: 0 when every item observable in the run passed, 1 when one failed, 2 when the
producer cannot be reached or the options are wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from jobstream_conformance.report import as_json, failed, table
from jobstream_conformance.runner import UnreachableError, run
from jobstream_conformance.session import Config


def json_object(text: str) -> dict[str, Any]:
    """A JSON object given on the command line (Task params); ValueError says what is wrong."""
    try:
        value = json.loads(text)
    except ValueError as error:
        raise ValueError(f"not JSON: {error}") from None
    if isinstance(value, dict):
        return value
    raise ValueError("must be a JSON object")


def params(text: str) -> dict[str, Any]:
    try:
        return json_object(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(
        prog="jobstream-conformance",
        description="Black-box Workflow Protocol v1 conformance of any producer, over HTTP.",
    )
    parse.add_argument("--url", required=True, help="the producer's base URL")
    parse.add_argument(
        "--token",
        default=os.environ.get("JOBSTREAM_TOKEN"),
        help="consumer A's bearer token [env JOBSTREAM_TOKEN]",
    )
    parse.add_argument(
        "--token-b",
        default=os.environ.get("JOBSTREAM_TOKEN_B"),
        help="another consumer's token, for the tenancy items [env JOBSTREAM_TOKEN_B]",
    )
    parse.add_argument("--params", type=params, default={}, help="params of a Task that succeeds")
    parse.add_argument(
        "--cancel-params", type=params, help="params of a Task that runs long enough to cancel"
    )
    parse.add_argument("--fail-params", type=params, help="params of a Task that finds nothing")
    parse.add_argument("--job-type", help="the job type to submit (default: the first declared)")
    parse.add_argument(
        "--timeout", type=float, default=120.0, help="seconds a job may take (default 120)"
    )
    parse.add_argument(
        "--callback-receiver",
        metavar="HOST:PORT",
        help="listen here for callbacks (the push items); the producer must reach it",
    )
    parse.add_argument(
        "--callback-url", help="the URL the producer should POST to (default: the listener's)"
    )
    parse.add_argument(
        "--callback-secret",
        action="append",
        default=[],
        help="whsec_ secret to verify callback signatures with (repeat while rotating)",
    )
    parse.add_argument("--callback-token", help="the bearer token callbacks must carry")
    parse.add_argument("--json", action="store_true", help="the verdicts as JSON")
    return parse


def config_from(arguments: argparse.Namespace) -> Config:
    return Config(
        url=arguments.url,
        token=arguments.token,
        token_b=arguments.token_b,
        params=arguments.params,
        cancel_params=arguments.cancel_params,
        fail_params=arguments.fail_params,
        job_type=arguments.job_type,
        timeout_s=arguments.timeout,
        receiver=arguments.callback_receiver,
        receiver_url=arguments.callback_url,
        callback_secrets=tuple(arguments.callback_secret),
        callback_token=arguments.callback_token,
    )


def main(argv: list[str] | None = None) -> int:
    parse = parser()
    arguments = parse.parse_args(argv)
    if not arguments.token:
        parse.error("--token (or JOBSTREAM_TOKEN) is required")
    try:
        verdicts = run(config_from(arguments))
    except (UnreachableError, ValueError) as error:
        print(f"jobstream-conformance: {error}", file=sys.stderr)
        return 2
    if arguments.json:
        print(json.dumps(as_json(verdicts, arguments.url), ensure_ascii=False, indent=2))
    else:
        print(table(verdicts, arguments.url))
    return 1 if failed(verdicts) else 0
