"""`python -m rehearsal`: the deployment rehearsal (`make rehearse` sets up its tools first)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rehearsal.run import SWEEP_TIMEOUT_S, Options, rehearse
from rehearsal.toolchain import REPOSITORY, RehearsalError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rehearsal", description=__doc__)
    parser.add_argument("--template", type=Path, default=REPOSITORY / "template.yaml")
    parser.add_argument(
        "--built", type=Path, help="use this sam build (for this machine) instead of building"
    )
    parser.add_argument("--no-parity", action="store_true", help="skip the second-arch build")
    parser.add_argument("--no-suites", action="store_true", help="skip jobstream smoke/conformance")
    parser.add_argument("--no-guide", action="store_true", help="skip --guided and teardown")
    parser.add_argument("--sweep-timeout", type=float, default=SWEEP_TIMEOUT_S)
    args = parser.parse_args(argv)
    options = Options(
        template=args.template.resolve(),
        built=args.built.resolve() if args.built else None,
        parity=not args.no_parity,
        suites=not args.no_suites,
        guide=not args.no_guide,
        sweep_timeout_s=args.sweep_timeout,
    )
    try:
        report = rehearse(options)
    except RehearsalError as failure:
        print(f"\nREHEARSAL FAILED at {failure.step}: {failure.message}", file=sys.stderr)
        print(f"(logs in {options.work_dir.relative_to(REPOSITORY)})", file=sys.stderr)
        return 1
    print("\nshims applied:")
    for shim in report.shims:
        print(f"  - {shim}")
    timings = ", ".join(f"{name} {seconds} s" for name, seconds in report.timings.items())
    print(f"REHEARSAL PASSED ({timings})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
