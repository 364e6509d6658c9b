"""The README and the docs site say what runs: CI runs the README's test command, the README's
main job runs as written (then the getting-started page's look at what it recorded), every
Python block marked ``<!-- runnable -->`` runs, the README's links resolve, and the site
builds with ``mkdocs build --strict`` where mkdocs is installed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"

# What .ci/run must run, and what a newcomer types: the four lines of the README's "Tests".
TEST_COMMAND = (
    "python3 -m venv .venv && . .venv/bin/activate && "
    "pip install -q torch==2.13.0 -e '.[dev,torch,ascend]' && "
    "python -m pytest -q -n 2 --dist loadfile"
)
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", flags=re.S | re.M)


def section(text: str, heading: str) -> str:
    """The body of a ``## heading`` section, up to the next ``## `` heading."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M)
    assert match, f"no '## {heading}' section"
    return match.group(1)


def first_block(text: str, lang: str = "sh") -> list[str]:
    for found in FENCE.finditer(text):
        if found.group(1) == lang:
            return [line for line in found.group(2).splitlines() if line.strip()]
    raise AssertionError(f"no ```{lang} block")


def marked_blocks(marker: str, lang: str) -> list[tuple[str, str]]:
    """(where, code) of each ```lang block right after a ``<!-- marker -->`` line."""
    pattern = re.compile(rf"^<!-- {re.escape(marker)} -->\n```{lang}\n(.*?)^```", flags=re.S | re.M)
    found = []
    for path in [README, *sorted(DOCS.glob("*.md"))]:
        text = path.read_text("utf-8")
        for match in pattern.finditer(text):
            line = text.count("\n", 0, match.start()) + 2
            found.append((f"{path.relative_to(ROOT)}:{line}", match.group(1)))
    return found


def clean_env() -> dict[str, str]:
    """This environment without a CI, a forge or a store of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CI_", "GITLAB"))}
    for key in ("CI", "PERFGATE_DATABASE_URL"):
        env.pop(key, None)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_ci_runs_exactly_the_readmes_test_command() -> None:
    lines = first_block(section(README.read_text("utf-8"), "Tests"))
    assert " && ".join(lines) == TEST_COMMAND
    ci = (ROOT / ".ci" / "run").read_text("utf-8").splitlines()
    assert TEST_COMMAND in ci, ".ci/run must run the README's test command as one line"
    docs_build = [i for i, line in enumerate(ci) if line.startswith("mkdocs build --strict")]
    assert docs_build and docs_build[0] > ci.index(TEST_COMMAND), "the site builds after it"


def test_the_readme_stays_a_front_door() -> None:
    text = README.read_text("utf-8")
    assert len(text.splitlines()) <= 250
    assert "## Main job" in text and "## Tests" in text


def test_the_readmes_links_resolve() -> None:
    text = README.read_text("utf-8")
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if "://" in target:
            continue
        assert (ROOT / target).exists(), f"README links to {target}, which does not exist"


PYTHON_BLOCKS = marked_blocks("runnable", "python")


def test_there_are_runnable_examples() -> None:
    assert len(PYTHON_BLOCKS) >= 2


@pytest.mark.parametrize(("where", "code"), PYTHON_BLOCKS, ids=[w for w, _ in PYTHON_BLOCKS])
def test_a_runnable_python_example_runs(where: str, code: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=clean_env(),
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{where}:\n{done.stdout}\n{done.stderr}"


def run_shell(lines: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    script = "set -uo pipefail\n" + "\n".join(lines) + "\n"
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=clean_env(),
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_the_readmes_main_job_runs_as_written(tmp_path: Path) -> None:
    lines = first_block(section(README.read_text("utf-8"), "Main job"))
    # the first three lines make the environment this test already runs in
    assert lines[:3] == [
        "python3 -m venv .venv",
        ". .venv/bin/activate",
        "pip install -q torch==2.13.0 -e '.[torch]'",
    ]
    job = lines[3:]
    assert job[-1] == "perfgate gate --branch feat --against main"
    runs = run_shell(["set -e", *job[:-1]], tmp_path)
    assert runs.returncode == 0, runs.stdout + runs.stderr
    assert runs.stdout.count("recorded run") == 4
    gate = run_shell([job[-1]], tmp_path)
    # the gate exits 0 (unchanged, inconclusive) or 1 (a regression), never anything else
    assert gate.returncode in (0, 1), gate.stdout + gate.stderr
    assert "feat vs main" in gate.stdout and "step_cpu_ms" in gate.stdout, gate.stdout

    # the getting-started page's look at what was recorded, in the same directory
    (where, code), *_ = marked_blocks("runnable: after-main-job", "sh")
    looked = run_shell(["set -e", *code.splitlines()], tmp_path)
    assert looked.returncode == 0, f"{where}:\n{looked.stdout}\n{looked.stderr}"
    assert '"format_version"' in (tmp_path / "compare.json").read_text("utf-8")


def test_the_site_builds_strict(tmp_path: Path) -> None:
    if shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[dev]')")
    done = subprocess.run(
        [str(Path(sys.executable).parent / "mkdocs"), "build", "--strict", "-q",
         "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    model = (tmp_path / "site" / "model" / "index.html").read_text("utf-8")
    assert "The decision procedure" in model  # perfgate/stats' own docstring, inserted
