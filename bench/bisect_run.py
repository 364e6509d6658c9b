"""``perfgate bisect`` on a real git repository: 8 commits, one of them slowing a user's step.

Builds a repository in a temporary directory: a suite with one benchmark whose step is a
pure-Python CPU loop, and 8 commits (the first one ``--good``, the last ``--bad``); one
commit multiplies the loop's work (the same operations, more of them) by ``--factor``, the
others touch a comment. Then runs ``perfgate bisect --json`` on it with half the change as
the minimum effect (what the nightly passes) and prints the rounds, the culprit (and
whether it is the right one) and the minutes.

    python bench/bisect_run.py                       # 2x at commit 5, then +20% at commit 3
    python bench/bisect_run.py --factor 1.2 --at 3 --budget 20m

Each pair runs two fresh worker processes: on a busy 2-core machine most of a round is
their start-up (the interpreter and torch), not the step.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

STEP = """
WORK = {work}


def build(device="cpu"):
    def step():
        s = 0
        for _ in range(WORK):
            for i in range(1000):
                s += i * i
        return None

    return {{"step": step, "batch_size": 1}}
"""

SUITE = """
[defaults]
repeats = 1
warmup = 3
measured = 20
profiled = 0

[[benchmarks]]
name = "loop"
entry = "bench_step:build"
"""

BASE_WORK = 50
"""Inner loops of 1000 per step before the slow commit (about 2 ms of CPU)."""


def _git(root: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-c", "user.email=dev@example.com", "-c", "user.name=A Developer", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def build_repo(root: Path, *, commits: int, at: int, factor: float) -> list[str]:
    """The repository: ``commits`` commits, the one at index ``at`` multiplying the work."""
    _git(root, "init", "-q", "-b", "main")
    (root / "perfgate.toml").write_text(textwrap.dedent(SUITE))
    shas = []
    for i in range(commits):
        work = round(BASE_WORK * factor) if i >= at else BASE_WORK
        (root / "bench_step.py").write_text(STEP.format(work=work) + f"# revision {i}\n")
        _git(root, "add", "-A")
        subject = f"revision {i}" + (" (the slow one)" if i == at else "")
        _git(root, "commit", "-q", "-m", subject)
        shas.append(_git(root, "rev-parse", "HEAD"))
    return shas


def run_case(*, commits: int, at: int, factor: float, budget: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="perfgate-bisect-bench-") as tmp:
        root = Path(tmp)
        shas = build_repo(root, commits=commits, at=at, factor=factor)
        min_effect = max(abs(factor - 1.0) * 100.0 / 2.0, 1.0)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CI_"))}
        env.pop("CI", None)
        began = time.monotonic()
        done = subprocess.run(
            [
                sys.executable, "-m", "perfgate", "bisect", "--suite", "perfgate.toml",
                "--benchmark", "loop", "--good", shas[0], "--bad", shas[-1],
                "--budget", budget, "--min-effect", f"{min_effect:g}", "--json",
            ],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )  # fmt: skip
        minutes = (time.monotonic() - began) / 60.0
        try:
            data = json.loads(done.stdout)
        except ValueError:
            data = {}
        return {
            "factor": factor,
            "commits": commits,
            "slow_commit": at,
            "exit": done.returncode,
            "culprit_right": data.get("culprit") == shas[at],
            "culprit_index": shas.index(data["culprit"]) if data.get("culprit") in shas else None,
            "rounds": data.get("rounds"),
            "why": data.get("why"),
            "change_pct": data.get("change_pct"),
            "minutes": round(minutes, 1),
            "steps": [
                (s["verdict"], s["change_pct"], s["pairs"], s["seconds"])
                for s in data.get("steps", [])
            ],
            "stderr_tail": done.stderr.strip().splitlines()[-2:],
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=8)
    parser.add_argument("--factor", type=float, action="append")
    parser.add_argument("--at", type=int, action="append")
    parser.add_argument("--budget", default="20m")
    args = parser.parse_args()
    factors = args.factor or [2.0, 1.2]
    ats = args.at or [5, 3]
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    for factor, at in zip(factors, ats, strict=False):
        result = run_case(commits=args.commits, at=at, factor=factor, budget=args.budget)
        print(json.dumps(result), flush=True)
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)


if __name__ == "__main__":
    main()
