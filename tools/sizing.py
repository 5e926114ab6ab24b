"""`python -m tools.sizing LAYER_SITE [FUNCTION...]`: what a function's first invocation costs
before its first AWS call, for choosing its MemorySize (docs/deploy.md, sizing).

Each function runs in a fresh interpreter (this one: run it with the runtime's Python, e.g. the
rehearsal's .venv-rehearsal/lambda-runtime/bin/python, whose botocore is the runtime's) with only
the built layer (LAYER_SITE: a `sam build`'s JobstreamLayer/python) and its code folder on the
path, bytecode writing off (Lambda's /opt is read-only): it imports the handler, then does the
set-up every first invocation does (settings, the consumer registry, the targets file, the logger,
the DynamoDB, SQS and Secrets Manager clients, made as the functions make them: an upper bound for
the functions that make fewer). It prints the CPU seconds of each part (process time: what a
busy machine cannot inflate) and the peak resident memory. Lambda gives a function CPU in
proportion to its memory (one vCPU at 1,769 MB): a cold start takes about CPU seconds x 1769 /
MemorySize.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
FUNCTIONS = ("admission", "jobs", "events", "ack", "callbacks", "dispatcher", "reconcile", "worker")
_PROBE = """
import importlib.util, resource, sys, time
started = time.process_time()
spec = importlib.util.spec_from_file_location("app", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
imported = time.process_time()
from jobstream import observability
observability.end_import()  # what the first invocation does first (observability.instrument)
from jobstream import runtime
from jobstream.aws import retrying_client
rt = runtime.runtime()
rt.tenants()
rt.targets()
observability.logger()
for service in ("dynamodb", "sqs", "secretsmanager"):
    retrying_client(service)
done = time.process_time()
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{imported - started:.3f} {done - imported:.3f} {peak_mb:.0f}")
"""
# What the import and the set-up read: the function's name (set by Lambda), a table name and the
# one-tenant shorthand (no AWS call is made).
_ENVIRONMENT = {
    "AWS_LAMBDA_FUNCTION_NAME": "sizing",
    "JOBSTREAM_TABLE": "sizing",
    "JOBSTREAM_API_TOKENS": "sizing=sizing-token",
    "AWS_DEFAULT_REGION": "us-east-1",
    "PYTHONDONTWRITEBYTECODE": "1",
}


def measure(site: Path, function: str) -> tuple[float, float, float]:
    code = REPOSITORY / "functions" / function
    env = {"PATH": os.environ.get("PATH", ""), **_ENVIRONMENT,
           "PYTHONPATH": os.pathsep.join([str(site), str(code)])}  # fmt: skip
    output = subprocess.run(  # noqa: S603 - this interpreter, our probe
        [sys.executable, "-c", _PROBE, str(code / "app.py")],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    imported, setup, peak = (float(value) for value in output[-3:])
    return imported, setup, peak


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    site, functions = Path(argv[0]).resolve(), argv[1:] or list(FUNCTIONS)
    print(f"python {sys.version.split()[0]}; CPU seconds; cold start at 512 / 1024 MB")
    for function in functions:
        imported, setup, peak = measure(site, function)
        total = imported + setup
        print(
            f"{function:<11} import {imported:.2f} + set-up {setup:.2f} = {total:.2f} s, "
            f"peak {peak:.0f} MB; ~{total * 1769 / 512:.1f} s / ~{total * 1769 / 1024:.1f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
