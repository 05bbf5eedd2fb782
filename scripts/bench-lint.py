#!/usr/bin/env python3
"""Times `quiver lint --strict` over the skill corpus against the reference validator
(skills-ref 0.1.1, `agentskills validate`) over the same skills, in one run, and prints
the ratio.

    .venv-test/bin/python scripts/bench-lint.py [--quiver target/release/quiver] [--corpus DIR]

Two reference figures: the `agentskills validate` command once per skill (how the reference
CLI is used; it takes one folder), and `skills_ref.validator.validate` called in one Python
process for every skill (the reference's pure validation cost, without start-up).
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def skill_dirs(corpus: Path) -> list[Path]:
    return sorted(p.parent for p in corpus.rglob("SKILL.md"))


def timed(fn, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quiver", default=str(REPO / "target/release/quiver"))
    parser.add_argument("--corpus", default=str(REPO.parent / "shared/corpus/skills"))
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    corpus = Path(args.corpus)
    dirs = skill_dirs(corpus)
    agentskills = Path(sys.executable).parent / "agentskills"

    def quiver_lint():
        subprocess.run([args.quiver, "lint", "--strict", "--json", str(corpus)], capture_output=True, check=False)

    def reference_cli():
        for d in dirs:
            subprocess.run([str(agentskills), "validate", str(d)], capture_output=True, check=False)

    from skills_ref.validator import validate

    def reference_in_process():
        for d in dirs:
            validate(d)

    quiver_s = timed(quiver_lint, args.repeat)
    cli_s = timed(reference_cli, 1)
    inproc_s = timed(reference_in_process, args.repeat)
    print(f"skills                                  {len(dirs)}")
    print(f"quiver lint --strict (one process)      {quiver_s * 1e3:8.1f} ms")
    print(f"agentskills validate (one per skill)    {cli_s * 1e3:8.1f} ms   ratio {cli_s / quiver_s:6.1f}x")
    print(f"skills_ref validate() in one process    {inproc_s * 1e3:8.1f} ms   ratio {inproc_s / quiver_s:6.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
