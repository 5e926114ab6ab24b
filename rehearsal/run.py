"""One rehearsal: build, deploy to the emulator, apply the shims, drive it end to end."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobstream_conformance.callbacks import receiver
from jobstream_local.template import Template
from rehearsal import deploy, emulator_main, guided, plugins, tenants
from rehearsal.api import ApiClient
from rehearsal.emulator import Emulator, free_port, receiver_host
from rehearsal.gateway import serve_api
from rehearsal.journey import Journey
from rehearsal.logs import FunctionLogs
from rehearsal.plan import (
    Credentials,
    for_architecture,
    for_runtime,
    host_architecture,
    parameter_overrides,
    python_version,
    registry_secret,
)
from rehearsal.stack import Stack
from rehearsal.toolchain import REPOSITORY, WORK_DIR, RehearsalError, lambda_runtime_version

STACK_NAME = "jobstream-rehearsal"
SCHEDULE_TYPES = ("AWS::Scheduler::Schedule", "AWS::Events::Rule")
# rate(1 minute) fires a minute after the schedule exists; the emulator checks every 10 s.
SWEEP_TIMEOUT_S = 120.0


@dataclass
class Options:
    template: Path = REPOSITORY / "template.yaml"
    # An existing build for this machine's architecture: skips `sam build` and the parity check.
    built: Path | None = None
    parity: bool = True
    suites: bool = True
    # docs/deploy.md's guided answers up to the change set, then `make teardown` of the stack.
    guide: bool = True
    sweep_timeout_s: float = SWEEP_TIMEOUT_S
    work_dir: Path = WORK_DIR
    say: Callable[[str], None] = print
    # Changes the deployed stack before the journey (the mutation tests break it this way).
    after_deploy: Callable[[Stack], None] | None = None


@dataclass
class Report:
    shims: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def lap(self, name: str, since: float) -> float:
        self.timings[name] = round(time.monotonic() - since, 1)
        return self.timings[name]


def emulator_shims() -> list[str]:
    """The shims the emulator always runs with: the first line of each one's description."""
    return [
        f"emulator: {(shim.__doc__ or shim.__name__).strip().splitlines()[0]}"
        for shim in emulator_main.SHIMS
    ]


def scheduled_functions(processed: dict[str, Any]) -> list[str]:
    """Logical ids of the functions a schedule or a scheduled rule targets."""
    found = []
    for resource in processed["Resources"].values():
        if resource["Type"] not in SCHEDULE_TYPES:
            continue
        properties = resource.get("Properties", {})
        if resource["Type"] == "AWS::Events::Rule" and "ScheduleExpression" not in properties:
            continue
        targets = [properties.get("Target"), *(properties.get("Targets") or [])]
        for target in filter(None, targets):
            arn = target.get("Arn")
            if isinstance(arn, dict) and "Fn::GetAtt" in arn:
                found.append(arn["Fn::GetAtt"][0])
    return sorted(set(found))


def _build(options: Options, document: dict[str, Any], report: Report) -> Path:
    """The build the emulator runs: for this machine's architecture, checked against the
    template's own-architecture build (same distributions in every layer)."""
    if options.built is not None:
        return options.built
    started = time.monotonic()
    architecture = host_architecture()
    host_template, changes = for_architecture(document, architecture)
    if changes:
        report.shims.append(f"architecture: built for this machine ({architecture}): {changes}")
    version = lambda_runtime_version()
    host_template, runtime_changes = for_runtime(host_template, version)
    if runtime_changes:
        report.shims.append(
            f"runtime: this machine has no python{python_version(document)}; the functions run "
            f"on the rehearsal's python{version} and are built for it: {runtime_changes}"
        )
    changes += runtime_changes
    built = deploy.build(host_template, options.work_dir, "host")
    if options.parity and changes:
        problems = deploy.build_parity(built, deploy.build(document, options.work_dir, "target"))
        if problems:
            raise RehearsalError("build parity", "\n".join(problems))
        options.say("ok   the template's own-architecture build holds the same distributions")
    options.say(f"ok   sam build ({report.lap('build', started)} s)")
    return built


def _deploy(options: Options, built: Path, emulator: Emulator, overrides: dict[str, str],
            report: Report) -> Stack:  # fmt: skip
    started = time.monotonic()
    deploy.deploy(
        built / "template.yaml", STACK_NAME, overrides, emulator.endpoint,
        options.work_dir / "sam-deploy.log",
    )  # fmt: skip
    options.say(f"ok   sam deploy, stack {STACK_NAME} complete ({report.lap('deploy', started)} s)")
    stack = Stack(STACK_NAME, emulator.endpoint)
    created = stack.ensure_routes()
    if created:
        report.shims.append(
            "HTTP API routes: the emulator's CloudFormation left the API without the routes of "
            f"SAM's OpenAPI body; created them from it ({len(created)}): {created}"
        )
        options.say(f"shim created {len(created)} HTTP API routes from the processed template")
    report.shims.append(
        "HTTP API address: served on its own port through a proxy that keeps the client's Host "
        "and adds X-Forwarded-Proto/-For as API Gateway does (rehearsal/gateway.py)"
    )
    if options.after_deploy is not None:
        options.after_deploy(stack)
    return stack


def _add_tenants(options: Options, stack: Stack, emulator: Emulator, registry: str,
                 origins: list[str]) -> Credentials:  # fmt: skip
    """The two tenants, written into the deployed registry secret as an operator writes them
    (`jobstream tenants --secret <the stack output> add …`)."""
    started = time.monotonic()
    secret_arn = stack.physical_ids()[registry]
    outputs = [name for name, value in stack.outputs().items() if value == secret_arn]
    if not outputs:
        raise RehearsalError(
            "tenants", f"no stack output names the registry secret {registry} ({secret_arn})"
        )
    roles = stack.operator_roles()
    role_outputs = [name for name, value in stack.outputs().items() if value in roles]
    if len(roles) != 1 or not role_outputs:
        raise RehearsalError(
            "tenants", f"expected one operator role named by a stack output, found {roles}"
        )
    credentials = tenants.register(
        tenants.Registry(secret_arn, tenants.assumed(emulator.endpoint, roles[0])), origins
    )
    options.say(
        f"ok   as <{role_outputs[0]}>: jobstream tenants --secret <{outputs[0]}> add "
        f"{credentials.tenant_a} "
        f"(callback token, origins {', '.join(origins)}) and {credentials.tenant_b} "
        f"({round(time.monotonic() - started, 1)} s)"
    )
    return credentials


def _origin(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}"


def _drive(options: Options, stack: Stack, emulator: Emulator, registry: str,
           report: Report) -> None:  # fmt: skip
    deployed_at = time.monotonic()
    logs = FunctionLogs(stack.client("logs"), stack.log_groups())
    # The conformance kit's own callback listener: a second origin of tenant A.
    # Both listen on a private address of this machine: the functions run as on AWS, where no
    # callback reaches loopback (outbound/origins.py).
    host = receiver_host()
    kit_receiver = f"{host}:{free_port(host)}"
    with receiver(f"{host}:0", None) as callbacks:
        origins = [_origin(callbacks.url), f"http://{kit_receiver}"]
        credentials = _add_tenants(options, stack, emulator, registry, origins)
        with serve_api(emulator.endpoint, stack.api_id()) as base_url:
            Journey(
                api=ApiClient(base_url, credentials.token_a),
                stack=stack,
                credentials=credentials,
                receiver=callbacks,
                logs=logs,
                scheduled=scheduled_functions(stack.processed_template()),
                refusals=emulator.shim_lines,
                deployed_at=deployed_at,
                sweep_timeout_s=options.sweep_timeout_s,
                say=options.say,
            ).run()
            report.lap("journey", deployed_at)
            if options.suites:
                started = time.monotonic()
                for outcome in plugins.run_suites(
                    base_url, credentials, kit_receiver, options.work_dir
                ):
                    options.say(f"ok   {outcome}")
                report.lap("suites", started)
    failures = [f.short() for f in logs.failures()] + emulator.shim_lines()
    if failures:
        raise RehearsalError("logs", "errors during the rehearsal:\n" + "\n".join(failures))
    options.say("ok   no function logged an error; the emulator refused no invocation")


def _guide(options: Options, built: Path, stack: Stack, document: dict[str, Any],
           report: Report) -> None:  # fmt: skip
    """The guide's own commands: `sam deploy --guided` as answered there, `make teardown`."""
    started = time.monotonic()
    answers = guided.guided_answers(document)
    change_set = guided.guided_to_change_set(
        built, answers, stack.endpoint, options.work_dir / "sam-deploy-guided.log"
    )
    options.say(
        f"ok   sam deploy --guided ({answers.parameters} parameters at their defaults, "
        f"{answers.unauthenticated_events} routes without authentication answered y) reached "
        f"change set {change_set} ({report.lap('guided', started)} s)"
    )
    started = time.monotonic()
    kept = guided.teardown(stack, options.work_dir / "teardown.log")
    left = guided.leftovers(stack, kept)
    if left:
        raise RehearsalError("make teardown", f"left behind, unnamed: {left}")
    options.say(
        f"ok   make teardown: bucket emptied, stack deleted, nothing left but the {len(kept)} "
        f"it names ({report.lap('teardown', started)} s)"
    )


def rehearse(options: Options) -> Report:
    report = Report(shims=emulator_shims())
    started = time.monotonic()
    options.work_dir.mkdir(parents=True, exist_ok=True)
    document = Template.load(options.template).document
    overrides = parameter_overrides(document)
    registry = registry_secret(document)
    built = _build(options, document, report)
    emulator = Emulator(options.work_dir / "emulator.log", lambda_runtime_version())
    try:
        step = time.monotonic()
        emulator.start()
        seconds = report.lap("emulator", step)
        options.say(f"ok   ministack on {emulator.endpoint}, IAM enforced ({seconds} s)")
        stack = _deploy(options, built, emulator, overrides, report)
        _drive(options, stack, emulator, registry, report)
        if options.guide:
            _guide(options, built, stack, document, report)
    finally:
        emulator.stop()
    report.lap("total", started)
    return report
