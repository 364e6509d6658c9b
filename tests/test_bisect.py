"""``perfgate bisect``: the halving on simulated verdicts, bad input on a real repository, the
culprit on the tracking issue of a loopback forge, and one search measured for real."""

from __future__ import annotations

import json
import math
import os
import subprocess
import textwrap
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from fake_forge import FakeForge
from helpers import perfgate

from perfgate.app import bisect as bisect_app
from perfgate.app import deliver
from perfgate.app.bisect import (
    BAD,
    BUDGET,
    FOUND,
    GOOD,
    INCONCLUSIVE,
    SKIP,
    SKIPPED,
    UNDECIDED,
    Commit,
    Step,
    halve,
)
from perfgate.config import Config, load_config
from perfgate.errors import UsageError
from perfgate.models import ChangePoint, DetectedChange, Direction
from perfgate.reporters.markdown import escape

# --- the halving, on simulated verdicts ------------------------------------------------------


def chain(n: int) -> list[Commit]:
    """A good commit and ``n`` after it (the last one bad)."""
    return [Commit(f"{i:040x}", f"commit {i}", "A U Thor <a@example.com>") for i in range(n + 1)]


def simulated(
    commits: list[Commit],
    culprit: int,
    *,
    broken: frozenset[int] = frozenset(),
    unsure: dict[int, int] | None = None,
    clock: list[float] | None = None,
    seconds_each: float = 0.0,
) -> tuple[Callable[[str, str, float], Step], list[tuple[int, int, float]]]:
    """A measure seam: a commit at or after ``culprit`` is bad, ``broken`` ones do not run,
    ``unsure`` ones are inconclusive that many times first; each call advances ``clock``."""
    index = {c.sha: i for i, c in enumerate(commits)}
    calls: list[tuple[int, int, float]] = []
    left = dict(unsure or {})

    def measure(sha: str, against: str, seconds: float) -> Step:
        i = index[sha]
        calls.append((i, index[against], seconds))
        if clock is not None:
            clock[0] += seconds_each
        assert index[against] < i
        if i in broken:
            return Step(sha, "", SKIP, against, note="ImportError: no module named fast")
        if left.get(i, 0) > 0:
            left[i] -= 1
            return Step(sha, "", INCONCLUSIVE, against, pairs=8)
        bad = i >= culprit
        return Step(sha, "", BAD if bad else GOOD, against, change_pct=100.0 if bad else 0.5)

    return measure, calls


@pytest.mark.parametrize("n", range(1, 17))
def test_the_culprit_is_found_in_at_most_log2_n_rounds(n: int) -> None:
    for culprit in range(1, n + 1):
        commits = chain(n)
        measure, calls = simulated(commits, culprit)
        out = halve(commits, measure, seconds_left=lambda: 600.0)
        assert out.why == FOUND and out.culprit == commits[culprit]
        assert out.rounds == len(calls) <= math.ceil(math.log2(n))
        # each midpoint is measured against the last commit known good
        lo = 0
        for i, against, _ in calls:
            assert against == lo
            lo = i if i < culprit else lo


def test_eight_commits_need_three_rounds_and_each_gets_its_share_of_the_budget() -> None:
    commits = chain(7)  # the good commit and 7 after it
    measure, calls = simulated(commits, culprit=5)
    out = halve(commits, measure, seconds_left=lambda: 1200.0)
    assert out.culprit == commits[5] and out.rounds == 3
    assert [i for i, _, _ in calls] == [3, 5, 4]
    assert calls[0][2] == pytest.approx(1200.0 / 3)  # the time left over the rounds left
    assert [s.verdict for s in out.steps] == [GOOD, BAD, GOOD]
    assert out.culprit_step is out.steps[1]


def test_a_commit_that_does_not_run_is_skipped_and_said() -> None:
    commits = chain(8)
    measure, calls = simulated(commits, culprit=6, broken=frozenset({4}))
    out = halve(commits, measure, seconds_left=lambda: 600.0)
    assert out.why == FOUND and out.culprit == commits[6]
    skipped = [s for s in out.steps if s.verdict == SKIP]
    assert [s.sha for s in skipped] == [commits[4].sha]
    assert "ImportError" in skipped[0].note
    assert calls[1][0] in (3, 5)  # the nearest commit to the middle that runs
    assert out.rounds == len(out.steps) - 1  # a skip is no round


def test_when_every_commit_left_is_skipped_the_range_is_said() -> None:
    commits = chain(6)
    measure, _ = simulated(commits, culprit=3, broken=frozenset({1, 2}))
    out = halve(commits, measure, seconds_left=lambda: 600.0)
    assert out.why == SKIPPED and out.culprit is None
    assert out.good == commits[0] and out.bad == commits[3]
    assert [c.sha for c in out.candidates] == [c.sha for c in commits[1:4]]
    assert "does not build or run" in bisect_app.why_text(out)


def test_when_the_budget_runs_out_the_narrowed_range_is_reported() -> None:
    commits = chain(16)
    now = [0.0]
    measure, calls = simulated(commits, culprit=11, clock=now, seconds_each=250.0)
    out = halve(commits, measure, seconds_left=lambda: 600.0 - now[0])
    assert out.why == BUDGET and out.culprit is None
    assert len(calls) == 3  # 0, 250, 500 s spent before each: the fourth does not start
    assert out.good == commits[10] and out.bad == commits[12]
    assert [c.sha for c in out.candidates] == [commits[11].sha, commits[12].sha]
    assert bisect_app.why_text(out) == "the budget ran out"
    data = out.to_dict()
    assert data["culprit"] is None and data["range"] == [commits[10].sha, commits[12].sha]
    assert [s["verdict"] for s in data["steps"]] == [GOOD, BAD, GOOD]


def test_an_inconclusive_midpoint_is_measured_again_then_said() -> None:
    commits = chain(4)
    measure, calls = simulated(commits, culprit=3, unsure={2: 1})
    out = halve(commits, measure, seconds_left=lambda: 600.0)
    assert out.why == FOUND and out.culprit == commits[3]
    assert [i for i, _, _ in calls][:2] == [2, 2]  # measured again, with fresh pairs

    measure, calls = simulated(commits, culprit=3, unsure={2: 5})
    out = halve(commits, measure, seconds_left=lambda: 600.0)
    assert out.why == UNDECIDED and out.culprit is None
    assert len(calls) == bisect_app.MAX_TRIES
    assert "stayed inconclusive" in bisect_app.why_text(out)

    now = [0.0]  # no time left for a second try: said as the budget
    measure, calls = simulated(commits, culprit=3, unsure={2: 5}, clock=now, seconds_each=700)
    out = halve(commits, measure, seconds_left=lambda: 600.0 - now[0])
    assert out.why == BUDGET and len(calls) == 1


# --- a real repository: bad input, and the measured search -----------------------------------

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
warmup = 2
measured = 10
profiled = 0

[[benchmarks]]
name = "loop"
entry = "bench_step:build"
"""


def sh(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CI_", "GITLAB"))}
    env.pop("CI", None)
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)


def git(cwd: Path, *args: str) -> str:
    out = sh(cwd, "git", "-c", "user.email=a@example.com", "-c", "user.name=A U Thor", *args)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def make_repo(root: Path, works: list[int]) -> list[str]:
    """One commit per entry of ``works`` (the step's work), oldest first; their ids."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    (root / "perfgate.toml").write_text(textwrap.dedent(SUITE))
    shas = []
    for i, work in enumerate(works):
        (root / "bench_step.py").write_text(STEP.format(work=work) + f"# revision {i}\n")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", f"revision {i}")
        shas.append(git(root, "rev-parse", "HEAD"))
    return shas


@pytest.fixture(scope="module")
def small_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("bisect") / "repo"
    return root, make_repo(root, [20, 20, 20, 40, 40])


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--good", "no-such-ref", "--bad", "HEAD"], "--good no-such-ref: no such commit"),
        (["--good", "HEAD", "--bad", "HEAD~2"], "--good HEAD is not an ancestor of --bad HEAD~2"),
        (["--good", "HEAD", "--bad", "HEAD"], "are the same commit"),
        (["--good", "HEAD~1"], "give --bad"),
        (["--budget", "4", "--good", "HEAD~1", "--bad", "HEAD"], "bisect's budget is a time"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    small_repo: tuple[Path, list[str]], args: list[str], said: str
) -> None:
    root, _ = small_repo
    out = perfgate(root, "bisect", "--benchmark", "loop", *args, spawn=True)
    assert out.returncode == 2, out.stderr
    assert said in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (None, "cannot read it (No such file or directory)"),
        ("{", "not JSON"),
        ("{}", "no change_points list; expected the JSON of 'perfgate history analyze --json'"),
        ("[1]", "no change_points list"),
        (
            '{"change_points": [{"verdict": "regression", "change_pct": "big"}]}',
            "change_points[0].change_pct: not a number",
        ),
    ],
)
def test_a_changes_file_that_is_not_the_analysis_says_what_is_wrong(
    tmp_path: Path, text: str | None, said: str
) -> None:
    # the messages were Python's own ("('change_points')", "list indices must be integers")
    path = tmp_path / "changes.json"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError) as caught:
        bisect_app.suspects(path, root=tmp_path, benchmarks=["loop"])
    assert said in str(caught.value)
    assert str(caught.value).startswith(f"--changes {path}: ")


def test_no_suite_file_is_said_as_such(tmp_path: Path) -> None:
    # it said "--benchmark mlp: not in the suite (it has: none)"
    root = tmp_path / "repo"
    make_repo(root, [20, 20])
    (root / "perfgate.toml").unlink()
    out = perfgate(
        root, "bisect", "--benchmark", "mlp", "--good", "HEAD~1", "--bad", "HEAD", spawn=True
    )
    assert out.returncode == 2
    assert "bisect: no suite file" in out.stderr and "pass --suite FILE" in out.stderr


def test_an_unknown_benchmark_is_exit_2(small_repo: tuple[Path, list[str]]) -> None:
    root, _ = small_repo
    out = perfgate(
        root, "bisect", "--benchmark", "nope", "--good", "HEAD~1", "--bad", "HEAD", spawn=True
    )
    assert out.returncode == 2
    assert "--benchmark nope: not in the suite (it has: loop)" in out.stderr


def test_the_use_case_bisects_the_real_range_with_a_measure_seam(
    small_repo: tuple[Path, list[str]],
) -> None:
    """Real git (the ancestry path, subjects, author lines), simulated measuring."""
    root, shas = small_repo
    config = load_config(root / "perfgate.toml")
    commits = [Commit(s) for s in shas]
    measure, calls = simulated(commits, culprit=3)
    out = bisect_app.bisect(
        config,
        config.benchmarks[0],
        suite=root / "perfgate.toml",
        good=shas[0],
        bad="HEAD",
        seconds=600.0,
        measure=measure,
    )
    assert out.culprit is not None and out.culprit.sha == shas[3]
    assert out.culprit.subject == "revision 3"
    assert out.culprit.author == "A U Thor <a@example.com>"
    assert out.rounds == len(calls) == 2


# --- the nightly: the tracking issue names the culprit ---------------------------------------


def github_env(forge: FakeForge) -> dict[str, str]:
    return {
        "GITHUB_ACTIONS": "true",
        "GITHUB_API_URL": forge.url,
        "GITHUB_REPOSITORY": "o/r",
        "GITHUB_TOKEN": "good-token-123",
        "PERFGATE_HTTP_BACKOFF_S": "0.01",
        "PERFGATE_HTTP_TIMEOUT_S": "2",
        "PERFGATE_HTTP_BUDGET_S": "6",
    }


def detected(before: str, after: str) -> DetectedChange:
    return DetectedChange(
        benchmark="loop",
        metric="step_cpu_ms",
        unit="ms",
        direction=Direction.LOWER_IS_BETTER,
        branch="main",
        fingerprint_key="fp",
        point=ChangePoint(5, 2.0, 4.0, 100.0, 1e-6, 0.999),
        last_run_before="run-4",
        first_run_after="run-5",
        commit_before=before,
        commit_after=after,
        runs_in_series=12,
    )


def test_the_nightly_names_the_culprit_on_the_tracking_issue(
    small_repo: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """``history analyze --alert`` reported a change between revisions 0 and 4; ``bisect
    --changes --alert`` names revision 3, its author line and the measured change on the
    tracking issue (a loopback GitHub), once."""
    from perfgate.reporters.render import changes_to_dict

    root, shas = small_repo
    config = Config(project="demo")
    change = detected(shas[0], shas[4])
    changes = tmp_path / "changes.json"
    changes.write_text(json.dumps(changes_to_dict([change])))
    spec = load_config(root / "perfgate.toml").benchmarks[0]
    with FakeForge() as forge:
        env = github_env(forge)
        reporter = deliver.make_reporter(
            deliver.resolve_target(env, deliver.TargetOverrides()), env
        )
        assert "opened" in deliver.alert_changes("demo", "main", [change], reporter)
        measure, calls = simulated([Commit(s) for s in shas], culprit=3)
        done = bisect_app.bisect_changes(
            config,
            {"loop": spec},
            changes=changes,
            suite=root / "perfgate.toml",
            seconds=600.0,
            branch="main",
            reporter=reporter,
            measure=measure,
        )
        assert done.outcome is not None and done.outcome.culprit is not None
        assert done.outcome.culprit.sha == shas[3]
        # half the detected change is the minimum effect a midpoint is judged by
        assert done.outcome.min_effect_pct == pytest.approx(50.0)
        (issue,) = forge.issues["o/r"]
        (comment,) = forge.comments[("o/r", issue["number"])]
        text = comment["body"]
        assert f"first bad commit **{shas[3][:12]}** revision 3" in text
        # the author line as the forge shows it (escaped: no mention, no HTML)
        assert f"author: {escape('A U Thor <a@example.com>')}" in text
        assert "measured change: +100.0%" in text
        assert f"tracking issue {issue['number']}: culprit named" in done.delivered

        # the next night: the same change is not searched again, even after the analysis
        # rewrote the issue's body with a new change point
        later = replace(detected(shas[1], shas[2]), first_run_after="run-9")
        assert "updated" in deliver.alert_changes("demo", "main", [change, later], reporter)
        again = bisect_app.bisect_changes(
            config,
            {"loop": spec},
            changes=changes,
            suite=root / "perfgate.toml",
            seconds=600.0,
            branch="main",
            reporter=reporter,
            measure=measure,
        )
        assert again.suspect is None and len(calls) == 2


def test_a_culprit_without_a_tracking_issue_opens_one_that_the_analysis_then_keeps() -> None:
    with FakeForge() as forge:
        env = github_env(forge)
        reporter = deliver.make_reporter(
            deliver.resolve_target(env, deliver.TargetOverrides()), env
        )
        key = bisect_app.bisected_key("k")
        said = deliver.alert_culprit("demo", "main", "**perfgate bisect**: x", key, reporter)
        assert "opened, culprit named in a comment" in said
        (issue,) = forge.issues["o/r"]
        assert [c["body"] for c in forge.comments[("o/r", issue["number"])]] == [
            "**perfgate bisect**: x"
        ]
        assert deliver.tracked_keys("demo", reporter) == [key]
        # the nightly's analysis updates that issue in place, and keeps the key
        assert "updated" in deliver.alert_changes("demo", "main", [detected("a", "b")], reporter)
        assert len(forge.issues["o/r"]) == 1
        assert key in deliver.tracked_keys("demo", reporter)


def test_a_change_of_one_commit_is_not_bisected(
    small_repo: tuple[Path, list[str]], tmp_path: Path
) -> None:
    root, shas = small_repo
    changes = tmp_path / "changes.json"
    from perfgate.reporters.render import changes_to_dict

    changes.write_text(json.dumps(changes_to_dict([detected(shas[2], shas[3])])))
    out = perfgate(root, "bisect", "--changes", str(changes), "--json", spawn=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["culprit"] is None
    assert "nothing to bisect" in out.stderr


def test_the_cli_renders_an_unfinished_search_and_exits_3(
    small_repo: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, shas = small_repo
    commits = [Commit(s) for s in shas]
    measure, _ = simulated(commits, culprit=3, broken=frozenset({1, 2, 3}))
    real = bisect_app.bisect

    def seamed(*args: object, **kw: object) -> object:
        return real(*args, **{**kw, "measure": measure})  # type: ignore[arg-type]

    monkeypatch.setattr(bisect_app, "bisect", seamed)
    monkeypatch.chdir(root)
    out = perfgate(
        None, "bisect", "--benchmark", "loop", "--good", shas[0], "--bad", shas[4], "--json"
    )
    assert out.returncode == 3, out.stdout + out.stderr
    data = json.loads(out.stdout)
    assert data["culprit"] is None and data["why"] == SKIPPED
    assert data["candidates"] == shas[1:]
    assert "bisect stopped: every commit left between them was skipped" in out.stderr


# --- measured for real -----------------------------------------------------------------------


@pytest.mark.slow
def test_a_doubled_step_is_named_by_measuring_it(tmp_path: Path) -> None:
    """A real search: worktrees, worker processes, the paired rule. Revision 1 doubles the
    step's work (the same operations): its CPU time is measured against revision 0 in one
    round of 8 pairs, a change far beyond any runner's CPU-time noise. (One round: on a
    busy 2-core machine a pair's two worker processes take 10-20 s to start.)"""
    root = tmp_path / "repo"
    shas = make_repo(root, [20, 40, 40])
    out = perfgate(
        root, "bisect", "--benchmark", "loop", "--good", shas[0], "--bad", shas[2],
        "--min-effect", "25", "--budget", "15m", "--json", spawn=True,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["culprit"] == shas[1], data
    assert data["author"] == "A U Thor <a@example.com>"
    (step,) = data["steps"]
    assert step["verdict"] == BAD and step["pairs"] >= 8
    assert step["change_pct"] > 50.0  # doubled: about +100%
    assert "bisect: " in out.stderr and "revision 1: bad" in out.stderr
    # the worktrees are gone again
    assert git(root, "worktree", "list").count("\n") == 0
