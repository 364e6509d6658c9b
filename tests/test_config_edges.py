"""The suite reader (``perfgate/config.py``) and ``perfgate/schemas/suite.schema.json`` draw
the same line: each suite one refuses, the other refuses too (the reader with one line that
names the file and the key, exit 2), and what one accepts near a limit, the other accepts.
Also: a benchmark name that would become a path, an advisor share given as a percentage, a
negative limit on a metric that is never negative, and an empty ``--project``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import perfgate
from jsonschema import Draft202012Validator

from perfgate.config import load_config, read_config_file
from perfgate.errors import ConfigError
from perfgate.metrics import CATALOGUE
from perfgate.models import TABLE_THRESHOLDS, TREATMENT_PARAMS, threshold_names

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SCHEMA = Path(__file__).parent.parent / "perfgate" / "schemas" / "suite.schema.json"
TRACE = Path(__file__).parent / "data" / "torch_trace" / "mlp_cpu.pt.trace.json.gz"
BENCH = "[[benchmarks]]\nworkload = 'mlp'\n"


def schema_errors(document: dict[str, Any]) -> list[str]:
    validator = Draft202012Validator(json.loads(SCHEMA.read_text("utf-8")))
    return [e.message for e in validator.iter_errors(document)]


def reader_error(path: Path) -> str | None:
    """The reader's error on the suite file ``path`` (asserted one line), None if it loads."""
    try:
        load_config(path, env={})
    except ConfigError as exc:
        message = str(exc)
        assert "\n" not in message, message
        return message
    return None


def write(path: Path, body: str) -> Path:
    path.write_text(body, encoding="utf-8")
    return path


BAD = [
    ("host_label", "host_label = 5", "host_label: expected a string"),
    (
        "entry_no_function",
        BENCH.replace("workload = 'mlp'", "entry = 'a:'") + "name = 'a'",
        "entry",
    ),
    ("entry_two_colons", "[[benchmarks]]\nname = 'a'\nentry = 'a:b:c'", "benchmarks[0].entry"),
    ("entry_no_module", "[[benchmarks]]\nname = 'a'\nentry = ':build'", "benchmarks[0].entry"),
    ("entry_a_path", "[[benchmarks]]\nname = 'a'\nentry = 'bench/b.py:build'", "[0].entry"),
    ("fail_on_twice", "fail_on = ['regression', 'regression']", "fail_on: 'regression' is listed"),
    ("min_effect_1500", "[metrics.step_time_ms]\nmin_effect_pct = 1500", "min_effect_pct"),
    ("min_effect_1000", "[metrics.step_time_ms]\nmin_effect_pct = 1000", "min_effect_pct"),
    ("empty_name", BENCH + "name = ''", "benchmarks[0].name: expected a non-empty string"),
    ("blank_name", BENCH + "name = '  '", "benchmarks[0].name"),
    ("empty_project", "project = ''", "project: expected a non-empty string"),
    ("empty_base_branch", "base_branch = ''", "base_branch"),
    ("empty_database_url", "database_url = ''", "database_url"),
    ("empty_workload", "[[benchmarks]]\nname = 'a'\nworkload = ''", "benchmarks[0].workload"),
    ("empty_treatment", BENCH + "name = 'a'\ntreatment_params = ['']", "treatment_params"),
    ("empty_reference", "[budgets]\nreference = ''", "budgets.reference"),
    ("relative_no_ref", "[budgets]\nstep_time_ms = '>= 95% of reference'", "budgets.step_time_ms"),
    (
        "relative_no_ref_one",
        "[budgets.a]\nthroughput_samples_per_s = '>= 95% of the reference'",
        "budgets.a.throughput_samples_per_s: a budget relative to the reference needs",
    ),
    ("name_newline", BENCH + 'name = "a\\nb"', "benchmarks[0].name: expected no '/'"),
    ("name_trailing_newline", BENCH + 'name = "a\\n"', "benchmarks[0].name"),
    ("name_slash", BENCH + "name = 'a/b'", "benchmarks[0].name"),
    ("name_dotdot", BENCH + "name = '..'", "benchmarks[0].name"),
    ("name_dot_first", BENCH + "name = '.hidden'", "benchmarks[0].name"),
    ("name_dash_first", BENCH + "name = '-x'", "benchmarks[0].name"),
    ("name_backslash", BENCH + "name = 'a\\\\b'", "benchmarks[0].name"),
    ("name_blank_first", BENCH + "name = ' a'", "benchmarks[0].name"),
    ("name_blank_last", BENCH + "name = 'a '", "benchmarks[0].name"),
    (
        "idle_share_50",
        "[advisor]\nidle_share_warning = 50",
        "advisor.idle_share_warning: expected a",
    ),
    ("memory_95", "[advisor]\nmemory_capacity_critical = 95", "advisor.memory_capacity_critical"),
    ("time_below_0", "[budgets]\nstep_time_ms = '<= -5'", "step_time_ms is never negative"),
    ("memory_below_0", "[budgets.a]\npeak_memory_bytes = '<= -5'", "budgets.a.peak_memory_bytes"),
    ("rank_below_0", "[budgets.a]\n'step_time_ms.rank1' = '< -0.5 ms'", "step_time_ms.rank1"),
    ("rate_below_0", "[budgets]\nthroughput_samples_per_s = '>= -1'", "never negative"),
    ("time_in_parsecs", "[budgets]\nstep_time_ms = '<= 100 parsecs'", "the metric's unit is 'ms'"),
    ("rate_in_ms", "[budgets.a]\nthroughput_samples_per_s = '>= 5 ms'", "unit is '1/s'"),
    ("unit_of_unknown", "[budgets]\nmy_score = '>= 5 ms'", "budgets.my_score: expected a budget"),
    (
        "none_of_reference",
        "[budgets]\nreference = 'r.json'\nstep_time_ms = '<= 0% of reference'",
        "a share of the reference must be more than 0%",
    ),
]


@pytest.mark.parametrize(("body", "message"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_the_reader_and_the_schema_refuse_the_same_suites(
    tmp_path: Path, body: str, message: str
) -> None:
    path = write(tmp_path / "perfgate.toml", body)
    error = reader_error(path)
    assert error is not None and error.startswith(f"{path}: "), error
    assert message in error
    assert schema_errors(tomllib.loads(body)), body


def test_a_repeated_benchmark_name_is_refused_by_the_reader(tmp_path: Path) -> None:
    # A JSON Schema cannot say "each name once" of an array of tables: the schema's
    # description says it, the reader checks it.
    path = write(tmp_path / "perfgate.toml", f"{BENCH}name = 'a'\n{BENCH}name = 'a'\n")
    assert "benchmarks: benchmark name 'a' is repeated" in str(reader_error(path))


def test_check_jsonschema_refuses_the_same_suites(tmp_path: Path) -> None:
    """The way a user checks a suite (check-jsonschema reads TOML, with ECMAScript regexes,
    where ``$`` does not match before a trailing newline as Python's does)."""
    files = [write(tmp_path / f"{name}.toml", body) for name, body, _ in BAD]
    tool = shutil.which("check-jsonschema") or str(Path(sys.executable).parent / "check-jsonschema")
    done = subprocess.run(
        [tool, "--schemafile", str(SCHEMA), *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    refused = set(re.findall(r"(\S+)\.toml::", done.stdout))
    assert {Path(f).stem for f in files} - {Path(r).name for r in refused} == set(), done.stdout


GOOD = [
    ("host_label_empty", "host_label = ''"),
    ("names", BENCH + "name = 'llama-7b_v1.2'\n" + BENCH + "name = '_x'\n" + BENCH + "name = '7b'"),
    ("names_of_any_script", BENCH + "name = 'resnet 50 (bs 8)'\n" + BENCH + "name = '推理'"),
    ("entries", "[[benchmarks]]\nname = 'a'\nentry = 'pkg.sub_1:build'\n"),
    ("entry_underscores", "[[benchmarks]]\nname = 'a'\nentry = '_m:_f'\n"),
    ("fail_on_two", "fail_on = ['regression', 'inconclusive']"),
    ("min_effect_999", "[metrics.step_time_ms]\nmin_effect_pct = 999.5"),
    ("shares_at_limits", "[advisor]\nidle_share_warning = 1\nidle_share_critical = 0"),
    ("overhead_not_a_share", "[advisor]\nprofiler_overhead = 2.5\nstraggler_spread_pct = 50"),
    ("loss_below_0", "[budgets]\nloss = '<= -0.5'"),
    ("unknown_metric_below_0", "[budgets.a]\nmy_score = '>= -3'"),
    ("time_at_0", "[budgets]\nstep_time_ms = '>= 0'\nrank_spread_pct = '<= +5'"),
    (
        "relative",
        "[budgets]\nreference = 'ref.json'\n[budgets.a]\nstep_time_ms = '<= 95% of reference'",
    ),
]


@pytest.mark.parametrize("body", [c[1] for c in GOOD], ids=[c[0] for c in GOOD])
def test_the_reader_and_the_schema_accept_the_same_suites(tmp_path: Path, body: str) -> None:
    assert reader_error(write(tmp_path / "perfgate.toml", body)) is None
    assert schema_errors(tomllib.loads(body)) == [], body


@pytest.mark.parametrize("metric", sorted(CATALOGUE))
def test_a_negative_limit_is_refused_alike_for_every_metric(tmp_path: Path, metric: str) -> None:
    """Every catalogue metric but the loss is a time, rate, size, count or share: never < 0."""
    never_negative = metric != "loss"
    for body in (
        f"[budgets]\n{metric} = '<= -5'",
        f"[budgets.a]\n'{metric}.rank1' = '>= -1e-3'",
    ):
        refused = reader_error(write(tmp_path / "perfgate.toml", body)) is not None
        assert refused == never_negative, body
        assert bool(schema_errors(tomllib.loads(body))) == never_negative, body


@pytest.mark.parametrize("metric", sorted(CATALOGUE))
def test_a_budget_s_unit_is_the_metric_s_alike(tmp_path: Path, metric: str) -> None:
    """A limit may name the metric's own unit (``<= 100 ms``) and no other, in the reader and
    in the schema (an editor's check of the suite said nothing of ``<= 100 parsecs``)."""
    unit = CATALOGUE[metric].unit
    reference = "[budgets]\nreference = 'r.json'\n"
    for limit, ok in (
        ("<= 5", True),
        (f"<= 5 {unit}".strip(), True),
        (f"<= 5{unit}" if not unit[:1].isdigit() else "<= 5", True),  # not "<= 51/s"
        ("<= 5 parsecs", False),
        ("<= 50% of reference", True),
        ("<= 0.0% of reference", False),
    ):
        body = f"{reference}'{metric}' = '{limit}'"
        refused = reader_error(write(tmp_path / "perfgate.toml", body))
        assert (refused is None) == ok, (body, refused)
        assert (schema_errors(tomllib.loads(body)) == []) == ok, body


@pytest.mark.parametrize("key", sorted(set(threshold_names()) - TABLE_THRESHOLDS))
def test_an_advisor_threshold_is_bounded_alike(tmp_path: Path, key: str) -> None:
    """A share is 0 to 1 in both (50 refused); any other threshold takes 50 in both."""
    one = f"[advisor]\n{key} = 1"
    assert reader_error(write(tmp_path / "perfgate.toml", one)) is None
    assert schema_errors(tomllib.loads(one)) == []
    fifty = f"[advisor]\n{key} = 50"
    refused = reader_error(write(tmp_path / "perfgate.toml", fifty)) is not None
    assert refused == bool(schema_errors(tomllib.loads(fifty))), fifty


@pytest.mark.parametrize(
    ("body", "key"),
    [
        (BENCH + 'name = "a\\n::error::x"', "benchmarks[0].name"),
        (BENCH + "name = '../../etc'", "benchmarks[0].name"),
        ("[advisor]\nidle_share_warning = 50", "advisor.idle_share_warning"),
        ("[budgets]\nstep_time_ms = '<= -5'", "budgets.step_time_ms"),
    ],
    ids=["name_newline", "name_path", "idle_share_50", "time_below_0"],
)
def test_a_bad_suite_is_one_line_and_exit_2(tmp_path: Path, body: str, key: str) -> None:
    suite = write(tmp_path / "perfgate.toml", body)
    db = tmp_path / "s.db"
    done = perfgate(
        tmp_path, "run", "--suite", str(suite), "--branch", "main", db=f"sqlite:///{db}"
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"perfgate: error: {suite}: {key}: "), lines
    assert not db.exists() and not (tmp_path / ".perfgate").exists()


FLAG_EMPTY = "--project: an empty project name; give one or leave the flag out"
ENV_EMPTY = "PERFGATE_PROJECT is set but empty: give a project name or unset it"


@pytest.mark.parametrize(
    ("flags", "env", "message"),
    [
        (("--project", ""), {}, FLAG_EMPTY),
        (("--project", " "), {}, FLAG_EMPTY),
        ((), {"PERFGATE_PROJECT": ""}, ENV_EMPTY),
        ((), {"PERFGATE_PROJECT": " "}, ENV_EMPTY),
    ],
    ids=["flag_empty", "flag_blank", "env_empty", "env_blank"],
)
def test_an_empty_project_is_refused_and_nothing_is_stored(
    tmp_path: Path, flags: tuple[str, ...], env: dict[str, str], message: str
) -> None:
    # --project "" stored the run under the project "" (and PERFGATE_PROJECT="" under
    # "default"), where no later command with a project looks for it
    db = tmp_path / "s.db"
    done = perfgate(
        tmp_path,
        "ingest",
        str(TRACE),
        "--benchmark",
        "mlp-trace",
        "--branch",
        "main",
        *flags,
        db=f"sqlite:///{db}",
        env=env,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [f"perfgate: error: {message}"]
    assert not db.exists()


def test_treatment_params_name_others_beside_slowdown(tmp_path: Path) -> None:
    # naming one knob dropped slowdown from the treatments: a run with it became a run of
    # another fingerprint, compared with nothing
    path = write(tmp_path / "perfgate.toml", BENCH + "name = 'a'\ntreatment_params = ['lr']")
    (spec,) = read_config_file(path).benchmarks
    assert spec.treatment_params == frozenset(TREATMENT_PARAMS) | {"lr"}
