"""Bad input: one clear line on stderr, exit 2 (usage/config) or 3 (infrastructure), and
nothing half-written in the store."""

from __future__ import annotations

import sqlite3
import textwrap
from pathlib import Path

import pytest
from helpers import perfgate

from perfgate.cli import cli
from perfgate.cli.base import parse_param
from perfgate.errors import ConfigError
from perfgate.store import open_store


def invoke(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    done = perfgate(None, *args)
    return done.returncode, done.stdout, done.stderr


def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


def run_count(url: str) -> int:
    store = open_store(url)
    try:
        return len(store.benchmarks(project="default"))
    finally:
        store.close()


def one_line(stderr: str) -> str:
    """The one error line; progress lines of the repeats that finished before it (``perfgate:
    [MM:SS] ...``) may come first."""
    lines = [x for x in stderr.strip().splitlines() if not x.startswith("perfgate: [")]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("perfgate: error: ")
    return lines[0]


def write_suite(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "perfgate.toml"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def test_suite_with_unknown_key_is_a_config_error(tmp_path: Path) -> None:
    suite = write_suite(
        tmp_path,
        """
        [[benchmarks]]
        name = "mlp"
        workload = "mlp"
        warmpu = 3
        """,
    )
    code, _, err = invoke(
        tmp_path, "run", "--suite", str(suite), "--db", db_url(tmp_path), "--branch", "main"
    )
    assert code == 2
    line = one_line(err)
    assert "perfgate.toml: benchmarks[0].warmpu: unknown key" in line
    assert not (tmp_path / "store.db").exists()


def test_a_key_with_a_line_break_is_named_on_one_line(tmp_path: Path) -> None:
    """A quoted TOML key may hold any character: the error still says it on one line (a
    newline in it would split the message, and a terminal escape would act on the screen)."""
    suite = write_suite(
        tmp_path,
        """
        [[benchmarks]]
        name = "mlp"
        workload = "mlp"
        "warm\\nup\\u001b[2J" = 3
        """,
    )
    code, _, err = invoke(
        tmp_path, "run", "--suite", str(suite), "--db", db_url(tmp_path), "--branch", "main"
    )
    assert code == 2
    line = one_line(err)
    assert not (tmp_path / "store.db").exists()
    assert "benchmarks[0].warm\\nup\\x1b[2J: unknown key" in line
    assert "\x1b" not in err


@pytest.mark.parametrize(
    ("defaults", "message"),
    [
        ('repeats = "three"', "defaults.repeats: expected an integer >= 1, got 'three'"),
        ("warmup = -5", "defaults.warmup: expected an integer >= 0, got -5"),
        ('device = "tpu"', "defaults.device: expected one of cpu, cuda, npu, got 'tpu'"),
    ],
)
def test_invalid_defaults_are_refused_on_the_workload_path_as_on_the_suite_path(
    tmp_path: Path, defaults: str, message: str
) -> None:
    with_benchmark = write_suite(
        tmp_path,
        f"""
        [defaults]
        {defaults}

        [[benchmarks]]
        name = "mlp"
        workload = "mlp"
        """,
    )
    url = db_url(tmp_path)
    suite_code, _, suite_err = invoke(
        tmp_path, "run", "--suite", str(with_benchmark), "--db", url, "--branch", "main"
    )
    workload_code, _, workload_err = invoke(
        tmp_path,
        *("run", "--suite", str(with_benchmark), "--workload", "mlp"),
        *("--db", url, "--branch", "main"),
    )
    assert suite_code == workload_code == 2
    assert one_line(suite_err) == one_line(workload_err)
    assert f"perfgate.toml: {message}" in one_line(workload_err)
    assert not (tmp_path / "store.db").exists()


def test_suite_that_is_not_toml(tmp_path: Path) -> None:
    suite = write_suite(tmp_path, "[[benchmarks]\nname=")
    code, _, err = invoke(tmp_path, "gate", "--suite", str(suite), "--branch", "main")
    assert code == 2
    assert "not valid TOML" in one_line(err)


def test_unknown_workload_and_bad_param(tmp_path: Path) -> None:
    code, _, err = invoke(
        tmp_path, "run", "--workload", "resnet9000", "--db", db_url(tmp_path), "--branch", "m"
    )
    assert code == 2
    assert "unknown (built-in: mlp, cnn, transformer, ddp_mlp, ddp_cnn, mlp_infer)" in one_line(err)
    with pytest.raises(ConfigError):
        parse_param("slowdown")
    assert parse_param("slowdown=0.3") == ("slowdown", 0.3)
    assert parse_param("batch_size=64") == ("batch_size", 64)
    assert parse_param("fused=true") == ("fused", True)
    assert parse_param("dtype=bf16") == ("dtype", "bf16")


@pytest.mark.slow
def test_entry_that_cannot_be_imported_records_nothing(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    suite = write_suite(
        tmp_path,
        """
        [[benchmarks]]
        name = "mine"
        entry = "no_such_module_here:build"
        repeats = 1
        """,
    )
    url = db_url(tmp_path)
    code, _, err = invoke(tmp_path, "run", "--suite", str(suite), "--db", url, "--branch", "main")
    assert code == 2
    line = one_line(err)
    assert "benchmark mine, repeat 1/1" in line
    assert "cannot import module 'no_such_module_here'" in line
    assert run_count(url) == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("workload", "param", "said"),
    [
        ("mlp", "batch_size=abc", "parameter batch_size: 'abc' is not an int"),
        ("mlp", "hidden=1.5", "parameter hidden: 1.5 is not an int"),
        ("mlp", "batch_size=0", "batch_size must be >= 1, got 0"),
        ("transformer", "d_model=30", "d_model (30) must be a multiple of heads (4)"),
        ("mlp_infer", "tail_every=-1", "tail_every must be >= 0, got -1"),
    ],
)
def test_a_bad_parameter_is_one_line_naming_it_and_records_nothing(
    tmp_path: Path, workload: str, param: str, said: str
) -> None:
    # batch_size=abc reached torch.randn, whose error lists its overloads over many lines;
    # batch_size=0 recorded a run at 0 samples/s; the others were exit 3, "the step raised"
    pytest.importorskip("torch")
    url = db_url(tmp_path)
    code, _, err = invoke(
        *(tmp_path, "run", "--workload", workload, "--param", param, "--repeats", "1"),
        *("--profiled", "0", "--db", url, "--branch", "main"),
    )
    assert code == 2
    assert said in one_line(err)
    assert run_count(url) == 0


@pytest.mark.parametrize("batch_size", ["-4", "0", "2.9"])
def test_an_entry_s_batch_size_that_is_no_count_of_samples_records_nothing(
    tmp_path: Path, batch_size: str
) -> None:
    """-4 was recorded as a throughput of -41,771 samples/s (and gated: a faster step read
    34% lower), 0 as 0/s, 2.9 cut to 2."""
    (tmp_path / "odd_bench.py").write_text(
        f"def build(device='cpu'):\n    return {{'step': lambda: sum(range(99)), "
        f"'batch_size': {batch_size}}}\n",
        encoding="utf-8",
    )
    suite = write_suite(
        tmp_path, '[[benchmarks]]\nname = "odd"\nentry = "odd_bench:build"\nrepeats = 1\n'
    )
    url = db_url(tmp_path)
    code, _, err = invoke(
        *(tmp_path, "run", "--suite", str(suite), "--profiled", "0", "--db", url),
        *("--branch", "main"),
    )
    assert code == 2, err
    assert f"batch_size {batch_size} is not a whole number >= 1" in one_line(err)
    assert run_count(url) == 0


@pytest.mark.slow
def test_step_that_raises_records_nothing(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    (tmp_path / "flaky_bench.py").write_text(
        textwrap.dedent(
            """
            import torch

            def build(device="cpu", fail_after=3):
                calls = [0]
                def step():
                    calls[0] += 1
                    if calls[0] > fail_after:
                        raise ValueError("loss became NaN at step %d" % calls[0])
                    return torch.ones(4).sum()
                return {"step": step, "batch_size": 4}
            """
        ),
        encoding="utf-8",
    )
    suite = write_suite(
        tmp_path,
        """
        [[benchmarks]]
        name = "ok"
        workload = "mlp"
        repeats = 1
        measured = 3
        warmup = 1
        profiled = 0

        [[benchmarks]]
        name = "flaky"
        entry = "flaky_bench:build"
        repeats = 1
        warmup = 1
        measured = 5
        """,
    )
    url = db_url(tmp_path)
    traces = tmp_path / "traces"
    code, _, err = invoke(
        tmp_path,
        *("run", "--suite", str(suite), "--db", url, "--branch", "main"),
        *("--trace-dir", str(traces)),
    )
    assert code == 3
    line = one_line(err)
    assert "benchmark flaky, repeat 1/1: the step raised ValueError: loss became NaN" in line
    # the failed benchmark leaves no trace directory behind (the one that finished has none:
    # it profiles no steps)
    assert not traces.exists() or list(traces.iterdir()) == []
    store = open_store(url)
    try:
        # the benchmark that finished is recorded whole; nothing of the failed one is
        assert store.benchmarks(project="default") == ["ok"]
    finally:
        store.close()


def test_corrupt_database_file_is_an_infrastructure_error(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    path.write_bytes(b"this is not a database at all" * 100)
    before = path.read_bytes()
    code, _, err = invoke(tmp_path, "history", "--db", f"sqlite:///{path}")
    assert code == 3
    assert str(path) in one_line(err)
    assert path.read_bytes() == before


def test_database_of_another_application_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with sqlite3.connect(path) as conn:
        conn.execute("create table invoices (id integer primary key, total real)")
    code, _, err = invoke(tmp_path, "gate", "--db", f"sqlite:///{path}", "--branch", "main")
    assert code == 3
    assert "not a perfgate store" in one_line(err)
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}
    assert tables == {"invoices"}


def test_database_with_a_newer_schema_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    open_store(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as conn:
        conn.execute("update alembic_version set version_num = '9999_from_the_future'")
    before = path.read_bytes()
    code, _, err = invoke(tmp_path, "history", "--db", f"sqlite:///{path}")
    assert code == 3
    line = one_line(err)
    assert "newer" in line and "9999_from_the_future" in line
    assert path.read_bytes() == before


def test_help_works_and_every_command_has_help() -> None:
    result = perfgate(None, "--help")
    assert result.returncode == 0
    for name, command in cli.commands.items():
        assert command.help, f"{name} has no help"
        assert name in result.stdout


@pytest.mark.parametrize("command", [["gate", "--branch", "feat"], ["history"], ["noise"]])
def test_reading_a_store_that_does_not_exist_is_one_line_and_creates_nothing(
    tmp_path: Path, command: list[str]
) -> None:
    typo = tmp_path / "no-such-dir" / "stroe.db"
    code, _, err = invoke(tmp_path, *command, "--db", f"sqlite:///{typo}")
    assert code == 2
    line = one_line(err)
    assert f"no perfgate store at {typo}" in line
    assert not typo.exists() and not typo.parent.exists()
