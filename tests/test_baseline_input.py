"""Baselines as code given what it should refuse or keep apart: benchmark names that read
the same once made file names, an empty directory of files, negative amounts written into
a file, an export of a branch or benchmark with no runs, a gate asked for another base
branch than its files', and a reset at a commit of another branch or with no reason."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import fingerprint, perfgate, record

from perfgate.app.baselines import (
    baseline_file_name,
    export_baselines,
    gate_from_baseline_files,
    import_baselines,
    read_baseline,
    read_baselines,
)
from perfgate.config import Config
from perfgate.errors import ParseError
from perfgate.models import RunRecord, Verdict
from perfgate.store import open_store

NAMES = ("mlp", "a/b", "a_b", "推理", "训练")


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("perfgate: error: "), stderr
    return lines[0]


def save(url: str, runs: list[RunRecord]) -> None:
    with open_store(url) as s:
        s.save_runs(runs)


def history(name: str = "mlp", level: float = 20.0, branch: str = "main") -> list[RunRecord]:
    return [record(i, level, benchmark=name, branch=branch, noise=0.005, seed=3) for i in range(6)]


@pytest.fixture
def team(tmp_path: Path) -> str:
    """A store with six runs on main of each of :data:`NAMES`, each at its own level."""
    url = f"sqlite:///{tmp_path / 'team.db'}"
    save(url, [r for i, name in enumerate(NAMES) for r in history(name, 10.0 * (i + 1))])
    return url


def exported(url: str, out: Path) -> None:
    result = perfgate(None, "baseline", "export", "--db", url, "--out", str(out))
    assert result.returncode == 0, result.stderr


def test_names_that_sanitise_alike_get_a_file_each_and_read_back_as_themselves(
    team: str, tmp_path: Path
) -> None:
    out = tmp_path / "bl"
    exported(team, out)
    key = fingerprint().key()
    files = sorted(out.iterdir())
    assert len(files) == len(NAMES)
    # A plain name keeps its file name, so earlier exports stay byte-stable.
    assert baseline_file_name("mlp", key) == f"mlp.{key}.json"
    assert baseline_file_name("a_b", key) == f"a_b.{key}.json"
    assert baseline_file_name("a/b", key).startswith("a_b+")
    assert baseline_file_name("推理", key) != baseline_file_name("训练", key)
    by_name = {read_baseline(p).benchmark: p.name for p in files}
    assert by_name == {name: baseline_file_name(name, key) for name in NAMES}

    # Each benchmark is judged against its own window, not another's or none.
    config = Config()
    for i, name in enumerate(NAMES):
        slow = record(30, 10.0 * (i + 1) * 1.3, benchmark=name, branch="feat", seed=3)
        (c,) = gate_from_baseline_files(config, [slow], out).comparisons
        assert c.verdict is Verdict.REGRESSION, name
        assert len(c.baseline_run_ids) == 6
    # and import stores every one of them
    local = f"sqlite:///{tmp_path / 'local.db'}"
    with open_store(local, create=True) as s:
        assert import_baselines(s, out).added == 6 * len(NAMES)
        assert sorted(s.benchmarks(project="default", branch="main")) == sorted(NAMES)


def test_names_differing_only_in_case_are_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'team.db'}"
    save(url, history("MLP") + history("mlp"))
    out = tmp_path / "bl"
    result = perfgate(None, "baseline", "export", "--db", url, "--out", str(out))
    assert result.returncode == 2
    assert "'MLP' and 'mlp' would both be written" in one_line(result.stderr)
    assert not out.exists()


def test_two_files_of_one_benchmark_and_testbed_are_refused(team: str, tmp_path: Path) -> None:
    out = tmp_path / "bl"
    exported(team, out)
    key = fingerprint().key()
    (out / "stale.json").write_bytes((out / f"mlp.{key}.json").read_bytes())
    with pytest.raises(ParseError, match="both the baseline of 'mlp'"):
        read_baselines(out)


def gate_and_import_refuse(team: str, files: Path) -> list[str]:
    """The one stderr line of ``gate --baseline-file`` and of ``baseline import`` of
    ``files``, each asserted to exit 2."""
    lines = []
    for args in (
        ("gate", "--branch", "feat", "--baseline-file", str(files)),
        ("baseline", "import", str(files)),
    ):
        result = perfgate(None, *args, "--db", team)
        assert result.returncode == 2, (args, result.stdout)
        lines.append(one_line(result.stderr))
    return lines


def test_an_empty_directory_of_baseline_files_is_refused_by_gate_and_import(
    team: str, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "README.md").write_text("not a baseline\n")
    save(team, [record(30, 26.0, branch="feat", seed=3)])
    for line in gate_and_import_refuse(team, empty):
        assert f"no baseline files (*.json) in {empty}" in line


@pytest.mark.parametrize(
    ("field", "key"),
    [("centre", "centre"), ("repeat_centres", "repeat_centres[1]"), ("centre_se", "centre_se")],
)
def test_a_negative_time_in_a_baseline_file_is_refused_naming_file_and_key(
    team: str, tmp_path: Path, field: str, key: str
) -> None:
    out = tmp_path / "bl"
    exported(team, out)
    path = out / f"mlp.{fingerprint().key()}.json"
    doc = json.loads(path.read_text())
    step = doc["runs"][2]["metrics"]["step_time_ms"]
    if field == "repeat_centres":
        step[field][1] = -5.0
    else:
        step[field] = -5.0
    path.write_text(json.dumps(doc))
    save(team, [record(30, 26.0, branch="feat", seed=3)])
    for line in gate_and_import_refuse(team, out):
        assert f"{path}: runs[2].metrics.step_time_ms.{key} is -5.0" in line


def test_a_negative_value_of_a_unit_that_can_be_negative_is_read(team: str, tmp_path: Path) -> None:
    out = tmp_path / "bl"
    exported(team, out)
    path = out / f"mlp.{fingerprint().key()}.json"
    doc = json.loads(path.read_text())
    step = doc["runs"][0]["metrics"]["step_time_ms"]
    step["unit"], step["centre"] = "%", -5.0
    path.write_text(json.dumps(doc))
    assert read_baseline(path).points["step_time_ms"][0].centre == -5.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--branch", "nosuch"),
            "no runs on base branch 'nosuch' in project 'default'; branches with runs: main",
        ),
        (("--benchmark", "nosuch"), "no runs of nosuch on branch 'main'"),
    ],
)
def test_an_export_of_a_branch_or_benchmark_with_no_runs_is_refused_and_writes_nothing(
    team: str, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    out = tmp_path / "bl"
    result = perfgate(None, "baseline", "export", "--db", team, "--out", str(out), *args)
    assert result.returncode == 2, result.stdout
    assert message in one_line(result.stderr)
    assert not out.exists()


def test_an_export_with_no_window_to_write_creates_no_directory(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'team.db'}"
    save(url, history()[:1])
    # its one run excluded, the branch has runs but no window to export
    result = perfgate(None, "runs", "exclude", "mlp-main-000", "--reason", "x", "--db", url)
    assert result.returncode == 0, result.stderr
    with open_store(url) as s:
        assert export_baselines(Config(), s, tmp_path / "bl", branch="main") == []
    assert not (tmp_path / "bl").exists()


def test_a_gate_against_files_of_another_branch_than_asked_is_refused(
    team: str, tmp_path: Path
) -> None:
    # --against was ignored: "feat vs main" for --against nosuch, and "feat vs feat" with
    # every benchmark no_baseline (a pass) for files of feat judged --against main
    out = tmp_path / "bl"
    exported(team, out)
    local = f"sqlite:///{tmp_path / 'local.db'}"
    save(local, [record(30, 13.0, branch="feat", seed=3)])
    gate = ("gate", "--db", local, "--branch", "feat", "--baseline-file", str(out))
    result = perfgate(None, *gate, "--against", "nosuch")
    assert result.returncode == 2, result.stdout
    assert "--against 'nosuch', but the baseline files in" in one_line(result.stderr)
    assert "are of branch 'main'" in result.stderr
    asked, unasked = perfgate(None, *gate, "--against", "main"), perfgate(None, *gate)
    assert asked.returncode == unasked.returncode == 1, asked.stderr + unasked.stderr
    assert "feat vs main" in asked.stdout and "feat vs main" in unasked.stdout


def test_a_reset_at_a_commit_of_another_branch_or_with_no_reason_is_refused(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'team.db'}"
    feat = record(20, 26.0, branch="feat", seed=3)
    save(url, [*history(), replace(feat, git=replace(feat.git, commit="f" * 40))])
    reset = ("baseline", "reset", "mlp", "--db", url)
    result = perfgate(None, *reset, "--at", "f" * 12, "--reason", "accepted")
    assert result.returncode == 2, result.stdout
    assert "no run of mlp at commit 'ffffffffffff'" in one_line(result.stderr)
    assert "on branch 'main'" in result.stderr
    for reason in ("", "   "):
        result = perfgate(None, *reset, "--at", f"{3:040x}", "--reason", reason)
        assert result.returncode == 2, result.stdout
        assert "needs a --reason" in one_line(result.stderr)
    with open_store(url) as s:
        assert s.baseline_reset(project="default", benchmark="mlp") is None
    # Named explicitly, the branch of the commit is the one reset.
    result = perfgate(None, *reset, "--at", "f" * 12, "--branch", "feat", "--reason", "ok")
    assert result.returncode == 0, result.stderr
    result = perfgate(None, *reset, "--at", f"{3:040x}", "--reason", "accepted")
    assert result.returncode == 0, result.stderr
    assert "now starts at run mlp-main-003" in result.stdout
