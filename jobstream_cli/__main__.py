"""Operator commands against a deployment (environment as the functions see it) or `--local`.

python -m jobstream_cli [--local] dead-letters list
python -m jobstream_cli [--local] dead-letters redrive [--job JOB_ID]
python -m jobstream_cli [--local] sweep
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

LOCAL_ENV = Path(__file__).resolve().parent.parent / ".jobstream" / "local-env.json"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jobstream", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--local",
        action="store_true",
        help="use the running local stack (`make run`) instead of the environment",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    dead = commands.add_parser("dead-letters", help="dead-lettered callbacks")
    dead_commands = dead.add_subparsers(dest="action", required=True)
    dead_commands.add_parser("list", help="list them: job, event, target, attempts, last error")
    redrive = dead_commands.add_parser("redrive", help="reset their budget and send them again")
    redrive.add_argument("--job", help="only this job's dead letters")
    commands.add_parser("sweep", help="run the reconcile sweep once and print its counts")
    return parser


def _print(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.local:
        if not LOCAL_ENV.exists():
            print("no local stack is running (start it with `make run`)", file=sys.stderr)
            return 2
        os.environ.update(json.loads(LOCAL_ENV.read_text(encoding="utf-8")))
    from jobstream.config.settings import ConfigurationError
    from jobstream.service import dead_letters
    from jobstream.service.runtime import runtime
    from jobstream.service.sweep import sweep

    try:
        rt = runtime()
    except ConfigurationError as error:
        print(f"jobstream: {error}", file=sys.stderr)
        return 2
    if args.command == "sweep":
        _print(sweep(rt).counts())
    elif args.action == "list":
        _print(dead_letters.list_dead(rt))
    else:
        report = dead_letters.redrive(rt, job_id=args.job)
        _print(
            {"revived": report.revived, "messages_moved": report.messages_moved, "how": report.how}
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
