"""Nothing a bad file or flag can do changes a verdict (issue 2.6): an empty fail-on list, a
mistyped base branch, a wrong run or alert id, a suite file that is not UTF-8 or whose tables
are not tables, a mistyped store path, a bad ``slowdown``: each is one line on stderr and
exit 2, never a silent pass, an infrastructure error (3) or an internal one (4), and nothing
is created or written in the store."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from helpers import fill, perfgate, record

from perfgate.store import open_store


def invoke(*args: str) -> tuple[int, str, str]:
    done = perfgate(None, *args)
    return done.returncode, done.stdout, done.stderr


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("perfgate: error: "), stderr
    return lines[0]


def regressed_store(tmp_path: Path) -> str:
    """``mlp`` on main at 10 ms, its latest run on feat 20% slower: a clear regression."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    fill(url, [record(i, 10.0) for i in range(8)] + [record(20, 12.0, branch="feat")])
    return url


def write_suite(tmp_path: Path, body: str, name: str = "perfgate.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


# -- 1. an empty fail-on list would switch the gate off ----------------------------------------


def test_the_regression_fails_the_gate(tmp_path: Path) -> None:
    url = regressed_store(tmp_path)
    code, out, _ = invoke("gate", "--db", url, "--branch", "feat", "--against", "main")
    assert code == 1
    assert "REGRESSION" in out.upper()
    code, _, _ = invoke(
        *("gate", "--db", url, "--branch", "feat", "--against", "main"),
        *("--fail-on", "regression"),
    )
    assert code == 1


@pytest.mark.parametrize("flag", ["", " , ", ","])
def test_an_empty_fail_on_flag_is_a_usage_error(tmp_path: Path, flag: str) -> None:
    url = regressed_store(tmp_path)
    code, out, err = invoke(
        "gate", "--db", url, "--branch", "feat", "--against", "main", "--fail-on", flag
    )
    assert code == 2
    assert "perfgate: error: --fail-on: empty" in one_line(err)
    assert out == ""


def test_an_empty_fail_on_in_the_suite_is_a_config_error(tmp_path: Path) -> None:
    url = regressed_store(tmp_path)
    suite = write_suite(tmp_path, "fail_on = []\n")
    code, _, err = invoke(
        "gate", "--suite", str(suite), "--db", url, "--branch", "feat", "--against", "main"
    )
    assert code == 2
    assert f"{suite}: fail_on: empty" in one_line(err)


def test_a_fail_on_that_is_not_a_list_is_a_config_error(tmp_path: Path) -> None:
    url = regressed_store(tmp_path)
    suite = write_suite(tmp_path, 'fail_on = "regression"\n')
    code, _, err = invoke(
        "gate", "--suite", str(suite), "--db", url, "--branch", "feat", "--against", "main"
    )
    assert code == 2
    assert f"{suite}: fail_on: expected a list of verdicts" in one_line(err)


# -- 2. a base branch with no runs at all is a typo, not a first baseline ----------------------


def test_a_base_branch_without_any_run_is_a_usage_error_naming_the_branches(
    tmp_path: Path,
) -> None:
    url = regressed_store(tmp_path)
    for command in ("gate", "compare"):
        code, out, err = invoke(command, "--db", url, "--branch", "feat", "--against", "nosuch")
        assert code == 2, (command, out, err)
        assert one_line(err) == (
            "perfgate: error: no runs on base branch 'nosuch' in project 'default'; "
            "branches with runs: feat, main"
        )


def test_a_base_branch_with_runs_of_other_benchmarks_is_still_no_baseline(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    fill(
        url,
        [record(i, 10.0, benchmark="cnn") for i in range(5)]
        + [record(20, 12.0, benchmark="mlp", branch="feat")],
    )
    code, out, err = invoke("gate", "--db", url, "--branch", "feat", "--against", "main", "--json")
    assert code == 0, err
    assert '"no_baseline"' in out


def test_the_same_branch_and_noise_still_compare_with_the_runs_before(tmp_path: Path) -> None:
    url = regressed_store(tmp_path)
    code, _, err = invoke("compare", "--db", url, "--branch", "main", "--against", "main")
    assert code == 0, err
    code, _, err = invoke("compare", "--db", url, "--branch", "feat", "--against", "feat")
    assert code == 0, err  # one run on feat: no baseline, not an error
    code, _, err = invoke("noise", "--db", url, "--branch", "main")
    assert code == 0, err


def test_the_python_api_refuses_a_base_branch_without_runs(tmp_path: Path) -> None:
    from perfgate.app import compare_records
    from perfgate.config import Config
    from perfgate.errors import UsageError

    url = regressed_store(tmp_path)
    store = open_store(url)
    try:
        head = record(30, 12.0, branch="feat")
        with pytest.raises(UsageError, match="branches with runs: feat, main"):
            compare_records(Config(), store, [head], branch="feat", against="mian")
        # the run itself need not be stored; against its own branch it is judged as ever
        result = compare_records(Config(), store, [head], branch="feat", against="main")
        assert result.comparisons
    finally:
        store.close()


def test_a_paired_run_needs_no_history_on_the_base_branch(tmp_path: Path) -> None:
    from dataclasses import replace

    from perfgate.app import compare_records
    from perfgate.config import Config

    url = f"sqlite:///{tmp_path / 'store.db'}"
    base = record(1, 10.0, branch="feat:base")
    head = replace(record(2, 12.0, branch="feat"), paired_with=base.id)
    fill(url, [base, head])
    store = open_store(url)
    try:
        result = compare_records(Config(), store, [head], branch="feat", against="main")
    finally:
        store.close()
    assert {c.method for c in result.comparisons} == {"history", "paired"}


# -- 3. a wrong id is the caller's mistake ------------------------------------------------------


def test_a_wrong_run_or_alert_id_is_a_usage_error(tmp_path: Path) -> None:
    url = regressed_store(tmp_path)
    before = (tmp_path / "store.db").read_bytes()
    cases = [
        (("advise", "nosuchid", "--db", url), "no run 'nosuchid'"),
        (("runs", "exclude", "nosuch", "--reason", "x", "--db", url), "no run 'nosuch'"),
        (("alerts", "ack", "999", "--reason", "x", "--db", url), "no alert 999"),
        (
            ("alerts", "ignore", "999", "--as", "wontfix", "--reason", "x", "--db", url),
            "no alert 999",
        ),
        (
            ("baseline", "reset", "mlp", "--at", "feedfacecafe", "--reason", "x", "--db", url),
            "no run of mlp at commit 'feedfacecafe'",
        ),
    ]
    for args, message in cases:
        code, _, err = invoke(*args)
        assert code == 2, (args, err)
        assert message in one_line(err), args
    assert (tmp_path / "store.db").read_bytes() == before


def test_a_blank_reason_for_a_triage_action_is_refused(tmp_path: Path) -> None:
    """``alerts ack 1 --reason ""`` and ``runs exclude ID --reason "  "`` were recorded with
    no why (the trail read ``ack alert #1 -> acknowledged:``), where ``baseline reset``
    refuses one; nothing is written."""
    url = regressed_store(tmp_path)
    before = (tmp_path / "store.db").read_bytes()
    for args in (
        ("alerts", "ack", "1", "--reason", ""),
        ("runs", "exclude", "mlp", "--reason", "  "),
    ):
        code, _, err = invoke(*args, "--db", url)
        assert code == 2, (args, err)
        assert "needs a --reason" in one_line(err), args
    assert (tmp_path / "store.db").read_bytes() == before


def test_history_analyze_of_a_misspelt_branch_or_benchmark_is_refused(tmp_path: Path) -> None:
    """It said "no change points", exit 0: a nightly ``--branch mian --alert`` passed every
    night, where gate, report and export refuse the same names."""
    url = regressed_store(tmp_path)
    for args, said in (
        (("--branch", "mian"), "no runs on branch 'mian'"),
        (("--benchmark", "nosuch"), "no runs of nosuch"),
    ):
        code, _, err = invoke("history", "analyze", *args, "--db", url)
        assert code == 2, (args, err)
        assert said in one_line(err), args


def test_a_history_of_a_metric_no_run_has_names_the_ones_they_have(tmp_path: Path) -> None:
    """It printed "no runs", exit 0, beside runs that hold other metrics."""
    url = regressed_store(tmp_path)
    code, _, err = invoke("history", "--metric", "epoch_time", "--db", url)
    assert code == 2
    line = one_line(err)
    assert "no run has epoch_time; their metrics: " in line and "step_time_ms" in line, line
    code, out, _ = invoke("history", "--benchmark", "mlp", "--branch", "nosuch", "--db", url)
    assert (code, out) == (0, "no runs\n")  # nothing stored there: an empty listing
    code, out, _ = invoke("history", "--benchmark", "mlp", "--branch", "feat", "--db", url)
    assert code == 0 and "feat" in out


def test_advice_on_a_run_without_a_profile_speaks_of_no_profile(tmp_path: Path) -> None:
    """It said "nothing in this profile crosses a rule's threshold" right below "the run has
    no profile"."""
    code, out, err = invoke("advise", "mlp-feat-020", "--db", regressed_store(tmp_path))
    assert code == 0, err
    assert "the run has no profile" in out and "no findings stored with the run" in out
    assert "this profile" not in out


def test_a_gate_whose_every_run_is_excluded_judges_nothing_and_says_so(tmp_path: Path) -> None:
    """The branch's only run excluded: the gate printed "nothing compared", exit 0 (a pass)."""
    url = regressed_store(tmp_path)
    code, _, err = invoke("runs", "exclude", "mlp-feat-020", "--reason", "flaky", "--db", url)
    assert code == 0, err
    for args in ((), ("--benchmark", "mlp")):
        code, _, err = invoke("gate", "--db", url, "--branch", "feat", "--against", "main", *args)
        assert code == 2
        assert "every run of mlp on branch 'feat' is excluded" in one_line(err)


def test_an_ambiguous_run_id_prefix_is_a_usage_error(tmp_path: Path) -> None:
    url = regressed_store(tmp_path)
    code, _, err = invoke("runs", "exclude", "mlp-main-00", "--reason", "x", "--db", url)
    assert code == 2
    assert "run id prefix 'mlp-main-00' is ambiguous" in one_line(err)


# -- 4. suite files that are not what they look like --------------------------------------------


def test_a_suite_file_that_is_not_utf8(tmp_path: Path) -> None:
    suite = tmp_path / "perfgate.toml"
    suite.write_bytes(b'project = "caf\xe9"\n')
    code, _, err = invoke("history", "--suite", str(suite), "--db", regressed_store(tmp_path))
    assert code == 2
    assert f"{suite}: not UTF-8 text" in one_line(err)


def test_a_pyproject_whose_perfgate_table_is_not_a_table(tmp_path: Path) -> None:
    suite = write_suite(tmp_path, "[tool]\nperfgate = 5\n", name="pyproject.toml")
    code, _, err = invoke("history", "--suite", str(suite), "--db", regressed_store(tmp_path))
    assert code == 2
    assert f"{suite}: tool.perfgate: expected a table, got 5" in one_line(err)


def test_a_pyproject_whose_tool_is_not_a_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = regressed_store(tmp_path)
    work = tmp_path / "checkout"
    work.mkdir()
    write_suite(work, "tool = 5\n", name="pyproject.toml")
    monkeypatch.chdir(work)
    code, _, err = invoke("history", "--db", url)
    assert code == 2
    assert "pyproject.toml: tool: expected a table, got 5" in one_line(err)
    code, _, err = invoke("history", "--suite", str(work / "pyproject.toml"), "--db", url)
    assert code == 2
    assert "pyproject.toml: tool: expected a table, got 5" in one_line(err)


def test_a_perfgate_toml_in_the_working_directory_that_is_not_utf8(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = regressed_store(tmp_path)
    work = tmp_path / "checkout"
    work.mkdir()
    (work / "perfgate.toml").write_bytes(b"\xff\xfe\x00")
    monkeypatch.chdir(work)
    code, _, err = invoke("history", "--db", url)
    assert code == 2
    assert "perfgate.toml: not UTF-8 text" in one_line(err)


# -- 5. a command that fails leaves no store behind at a mistyped path -------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["runs", "exclude", "abcdef12", "--reason", "x"],
        ["alerts", "ack", "1", "--reason", "x"],
        ["alerts", "ignore", "1", "--as", "invalid", "--reason", "x"],
        ["alerts", "fixed", "1", "--reason", "x"],
        ["baseline", "reset", "mlp", "--at", "abcdef1", "--reason", "x"],
        ["db", "prune", "--keep-runs", "5"],
    ],
)
def test_a_write_to_existing_data_on_a_missing_store_creates_nothing(
    tmp_path: Path, command: list[str]
) -> None:
    typo = tmp_path / "no-such-dir" / "stroe.db"
    code, _, err = invoke(*command, "--db", f"sqlite:///{typo}")
    assert code == 2, err
    assert f"no perfgate store at {typo}" in one_line(err)
    assert not typo.exists() and not typo.parent.exists()


def test_an_ingest_of_a_path_that_is_not_there_creates_no_store(tmp_path: Path) -> None:
    typo = tmp_path / "no-such-dir" / "stroe.db"
    code, _, err = invoke(
        *("ingest", str(tmp_path / "no-such-profile"), "--benchmark", "llm"),
        *("--branch", "main", "--commit", "a" * 40, "--db", f"sqlite:///{typo}"),
    )
    assert code == 2, err
    one_line(err)
    assert not typo.exists() and not typo.parent.exists()


def test_an_ingest_of_a_file_that_is_not_a_profile_creates_no_store(tmp_path: Path) -> None:
    junk = tmp_path / "trace.json"
    junk.write_text("not json at all", encoding="utf-8")
    db = tmp_path / "store.db"
    code, _, err = invoke(
        *("ingest", str(junk), "--benchmark", "llm", "--branch", "main"),
        *("--commit", "a" * 40, "--db", f"sqlite:///{db}"),
    )
    assert code == 2, err
    one_line(err)
    assert not db.exists()


# -- 6. slowdown is a number >= 0 ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "shown"), [("abc", "'abc'"), ("-1", "-1"), ("true", "True"), ("inf", "inf")]
)
def test_a_bad_slowdown_is_refused_before_anything_runs(
    tmp_path: Path, value: str, shown: str
) -> None:
    db = tmp_path / "store.db"
    code, _, err = invoke(
        *("run", "--workload", "mlp", "--param", f"slowdown={value}"),
        *("--db", f"sqlite:///{db}", "--branch", "main", "--commit", "a" * 40),
    )
    assert code == 2, err
    assert f"benchmark mlp: params.slowdown: expected a number >= 0, got {shown}" in one_line(err)
    assert not db.exists()


def test_a_bad_slowdown_in_the_suite_is_refused(tmp_path: Path) -> None:
    suite = write_suite(
        tmp_path,
        """
        [[benchmarks]]
        name = "slow"
        workload = "mlp"
        params = { slowdown = -0.5 }
        """,
    )
    db = tmp_path / "store.db"
    code, _, err = invoke(
        *("run", "--suite", str(suite), "--db", f"sqlite:///{db}"),
        *("--branch", "main", "--commit", "a" * 40),
    )
    assert code == 2, err
    assert "benchmark slow: params.slowdown: expected a number >= 0, got -0.5" in one_line(err)
    assert not db.exists()


# -- an empty path ("$UNSET") would write into the working directory ----------------------------


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("gate", "--branch", "feat", "--against", "main", "--junit", ""), "'--junit'"),
        (("gate", "--branch", "feat", "--against", "main", "--report-dir", " "), "'--report-dir'"),
        (("report", "--html", ""), "'--html'"),
        (("export", "tensorboard", ""), "'LOGDIR'"),
    ],
)
def test_an_empty_path_is_a_usage_error_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], option: str
) -> None:
    # --junit '' was an internal error (exit 4); --report-dir '' and report --html '' wrote
    # into the working directory and passed
    url = regressed_store(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    code, _, err = invoke(*args, "--db", url)
    assert code == 2, err
    assert f"Invalid value for {option}: an empty path" in err
    assert list(work.iterdir()) == []


def test_a_report_of_a_mistyped_branch_is_a_usage_error(tmp_path: Path) -> None:
    # it drew a page of "1 no run" and passed, where gate and export refuse the branch
    url = regressed_store(tmp_path)
    out = tmp_path / "site"
    code, _, err = invoke("report", "--db", url, "--html", str(out), "--branch", "mian")
    assert code == 2
    assert "no runs on base branch 'mian'" in one_line(err) and "branches with runs: " in err
    assert not out.exists()


# -- a JSON input nested past Python's recursion limit ------------------------------------------


@pytest.mark.parametrize(
    "command", ["baseline import", "comment --from", "bisect --changes", "run --suite"]
)
def test_json_nested_too_deeply_is_one_line_not_an_internal_error(
    tmp_path: Path, command: str
) -> None:
    """A JSON file of 5,000 nested brackets makes ``json.loads`` raise RecursionError (and a
    suite's TOML, tomllib); each file a command reads (a baseline, a fork's report target,
    ``history analyze``'s changes, a suite) must say so on one line and exit 2, as the
    profile and result readers do, not 4."""
    deep = "[" * 5000 + "]" * 5000
    db = tmp_path / "store.db"
    if command == "baseline import":
        (tmp_path / "b.json").write_text(deep, encoding="utf-8")
        args: tuple[str, ...] = ("baseline", "import", str(tmp_path / "b.json"))
        args += ("--db", f"sqlite:///{db}")
    elif command == "comment --from":
        (tmp_path / "report.md").write_text("<!-- perfgate:report -->\n", encoding="utf-8")
        (tmp_path / "target.json").write_text(deep, encoding="utf-8")
        args = ("comment", "--from", str(tmp_path), "--conclusion", "failure")
    elif command == "run --suite":  # TOML: an array nested in an array, 3,000 deep
        suite = write_suite(tmp_path, "a = " + "[" * 3000 + "]" * 3000 + "\n")
        args = ("run", "--suite", str(suite), "--db", f"sqlite:///{db}", "--branch", "main")
    else:
        (tmp_path / "changes.json").write_text(deep, encoding="utf-8")
        args = ("bisect", "--changes", str(tmp_path / "changes.json"))
    code, _, err = invoke(*args)
    assert code == 2, err
    assert "nested too deeply" in one_line(err)
    assert not db.exists()
