"""Check a multi-GPU launch plan and print the commands that start it.

    python scripts/launch.py h100x8
    python scripts/launch.py a100x2 ablation=no_read run_dir=runs/no_read

The plan (configs/launch/NAME.yaml) is validated first, on any machine: the accelerate
config, the GPU split, the step batch against the number of processes, and the training
config with the given overrides. Nothing is started; run the printed commands on the node.
"""

from __future__ import annotations

import os

from grasp.startup import process_environment

# Before any other import: bm25s (through grasp.corpus) would start JAX on the GPU, which then
# preallocates 75% of it (grasp/startup.py).
os.environ.update(process_environment())

import argparse
import sys

from grasp.launch import launch_commands, load_plan, validate_plan
from grasp.paths import REPO_ROOT


def main(argv: list[str] | None = None) -> int:
    plans = sorted(p.stem for p in (REPO_ROOT / "configs" / "launch").glob("*.yaml"))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("plan", help=f"one of {plans}")
    parser.add_argument("overrides", nargs="*", help="extra scripts/train.py overrides")
    args = parser.parse_args(argv)
    if args.plan not in plans:
        parser.error(f"unknown plan {args.plan!r}; choose one of {plans}")
    plan = load_plan(REPO_ROOT / "configs" / "launch" / f"{args.plan}.yaml")
    checked = validate_plan(plan, args.overrides)
    print(f"# {plan.description or plan.name}: {len(plan.train_gpus)} training processes,")
    print(f"# {checked.per_device_batch} sequences per process per micro-batch")
    print("\n".join(launch_commands(checked)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
