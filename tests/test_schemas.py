"""The JSON Schemas shipped in ``perfgate/schemas/`` hold for what perfgate really writes:
``gate``, ``compare`` and ``check --json`` (a real check run of a small torch step),
``history --json``, ``ingest --json`` of real Ascend and torch.profiler fixtures and
``advise --json``; ``suite.schema.json`` accepts the suites of the README and docs/,
rejects what perfgate rejects, and names exactly the keys perfgate's loader knows.
Validated the two ways a user would: the ``check-jsonschema`` command and the
``jsonschema`` library."""

from __future__ import annotations

import importlib.resources
import json
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import Done, fill, perfgate, record
from jsonschema import Draft202012Validator

from perfgate import config as suite_config

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).parent.parent
SCHEMAS = ROOT / "perfgate" / "schemas"
DATA = Path(__file__).parent / "data"
ASCEND_RANK0 = DATA / "ascend" / "msinsight_pt_text_level1_2rank" / "rank0_ascend_pt"
TORCH_TRACE = DATA / "torch_trace" / "mlp_cpu.pt.trace.json.gz"


def schema(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SCHEMAS / f"{name}.schema.json").read_text("utf-8"))
    return data


def validator(name: str) -> Draft202012Validator:
    """A validator of ``name`` (each schema stands alone: no references between files)."""
    return Draft202012Validator(schema(name), format_checker=Draft202012Validator.FORMAT_CHECKER)


def errors(name: str, document: Any) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator(name).iter_errors(document)
    ]


def check_jsonschema(name: str, *documents: Path) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("check-jsonschema") or str(Path(sys.executable).parent / "check-jsonschema")
    return subprocess.run(
        [tool, "--schemafile", str(SCHEMAS / f"{name}.schema.json"), *map(str, documents)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def invoke(*args: str) -> tuple[int, str, str]:
    result = perfgate(None, *args)  # out of CI: no step summary, no annotations
    return result.returncode, result.stdout, result.stderr


def test_every_schema_is_a_valid_draft_2020_12_schema() -> None:
    names = sorted(p.name for p in SCHEMAS.glob("*.schema.json"))
    assert names == [
        "advise.schema.json",
        "gate.schema.json",
        "history.schema.json",
        "ingest.schema.json",
        "suite.schema.json",
    ]
    for name in names:
        doc = json.loads((SCHEMAS / name).read_text("utf-8"))
        Draft202012Validator.check_schema(doc)
        assert doc["$id"].endswith("/" + name)
    # where an installed perfgate has them
    shipped = importlib.resources.files("perfgate") / "schemas" / "gate.schema.json"
    assert json.loads(shipped.read_text("utf-8")) == schema("gate")


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real --json outputs of gate (with a budget breached), compare, history, ingest and
    advise, each in a file."""
    tmp = tmp_path_factory.mktemp("json")
    url = f"sqlite:///{tmp / 's.db'}"
    runs = [record(i, 20.0) for i in range(6)] + [record(i, 7.0, benchmark="cnn") for i in range(6)]
    runs += [record(20, 26.0, branch="feat"), record(20, 7.0, benchmark="cnn", branch="feat")]
    runs += [record(20, 5.0, benchmark="fresh", branch="feat")]
    fill(url, runs)
    suite = tmp / "perfgate.toml"
    suite.write_text('[budgets]\nstep_time_ms = "<= 22"\n')
    produced: dict[str, Path] = {}
    for name, args, codes in (
        ("gate", ["gate", "--suite", str(suite), "--branch", "feat", "--against", "main"], (1,)),
        ("compare", ["compare", "--branch", "feat", "--against", "main"], (0,)),
        ("history", ["history", "--benchmark", "mlp"], (0,)),
        ("ingest_ascend", ["ingest", str(ASCEND_RANK0), "--benchmark", "alexnet"], (0,)),
        ("ingest_trace", ["ingest", str(TORCH_TRACE), "--benchmark", "mlp-trace"], (0,)),
        ("advise", ["advise", str(ASCEND_RANK0), "--no-advisor"], (0,)),
        ("advise_run", ["advise", "mlp-feat-020"], (0,)),
    ):
        code, out, err = invoke(*args, "--db", url, "--json")
        assert code in codes, (name, code, err)
        produced[name] = tmp / f"{name}.json"
        produced[name].write_text(out, encoding="utf-8")
    return produced


@pytest.mark.parametrize(
    ("output", "name"),
    [
        ("gate", "gate"),
        ("compare", "gate"),
        ("history", "history"),
        ("ingest_ascend", "ingest"),
        ("ingest_trace", "ingest"),
        ("advise", "advise"),
        ("advise_run", "advise"),
    ],
)
def test_real_outputs_validate(outputs: dict[str, Path], output: str, name: str) -> None:
    document = json.loads(outputs[output].read_text("utf-8"))
    assert errors(name, document) == []
    if output == "gate":  # the output is the one the test means: all kinds of rows in it
        verdicts = {c["verdict"] for c in document["comparisons"]}
        assert {"regression", "over_budget", "no_baseline", "unchanged"} <= verdicts
        assert document["budgets"]["over_budget"] == 1


def test_check_jsonschema_accepts_the_real_outputs(outputs: dict[str, Path]) -> None:
    for name, files in (
        ("gate", [outputs["gate"], outputs["compare"]]),
        ("history", [outputs["history"]]),
        ("ingest", [outputs["ingest_ascend"], outputs["ingest_trace"]]),
        ("advise", [outputs["advise"], outputs["advise_run"]]),
    ):
        done = check_jsonschema(name, *files)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "ok -- validation done" in done.stdout


def test_the_gate_schema_catches_a_changed_output(outputs: dict[str, Path], tmp_path: Path) -> None:
    """A renamed field, a verdict perfgate does not have, a missing key: each is caught."""
    good = json.loads(outputs["gate"].read_text("utf-8"))
    broken = [
        {**good, "verdicts": good["verdict"]},
        {**good, "verdict": "regressed"},
        {k: v for k, v in good.items() if k != "failed"},
        {**good, "comparisons": [{**good["comparisons"][0], "p_value": 1.5}]},
    ]
    for doc in broken:
        assert errors("gate", doc), doc
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken[1]))
    done = check_jsonschema("gate", path)
    assert done.returncode == 1 and "regressed" in done.stdout


BENCH = """
import torch

def build(device="cpu", size=32):
    a = torch.randn(size, size)
    def step():
        return (a @ a).sum()
    return {"step": step, "batch_size": 1}
"""

SUITE = """
[defaults]
repeats = 2
warmup = 1
measured = 3
profiled = 0

[[benchmarks]]
name = "tiny"
entry = "bench_tiny:build"
"""


@pytest.mark.slow
def test_check_json_is_a_gate_document(tmp_path: Path, cli: Callable[..., Done]) -> None:
    """A real ``check``: main's run, then the feature branch's, in worker processes."""
    pytest.importorskip("torch")
    (tmp_path / "bench_tiny.py").write_text(textwrap.dedent(BENCH))
    (tmp_path / "perfgate.toml").write_text(textwrap.dedent(SUITE))
    assert cli("run", "--branch", "main", spawn=True).returncode == 0
    done = cli("check", "--branch", "feat", "--against", "main", "--json", spawn=True)
    assert done.returncode == 0, done.stderr
    path = tmp_path / "check.json"
    path.write_text(done.stdout)
    document = json.loads(done.stdout)
    assert errors("gate", document) == []
    assert document["summary"]["no_baseline"] >= 1  # one baseline run: nothing judged yet
    checked = check_jsonschema("gate", path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _readme_suites() -> list[dict[str, Any]]:
    """The suites the README and the docs site show (their ```toml blocks)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    text = "\n".join(page.read_text("utf-8") for page in pages)
    blocks = re.findall(r"^```toml\n(.*?)^```", text, flags=re.S | re.M)
    suites = []
    for block in blocks:
        doc = tomllib.loads(block)
        suites.append(doc.get("tool", {}).get("perfgate", doc))
    return suites


def test_the_readme_suites_validate_and_load() -> None:
    suites = _readme_suites()
    assert len(suites) >= 3
    for doc in suites:
        assert errors("suite", doc) == [], doc
        suite_config.config_from_mapping(doc, "README.md")  # and perfgate reads them


@pytest.mark.parametrize(
    ("doc", "key"),
    [
        ({"projetc": "x"}, "projetc"),
        ({"fail_on": []}, "fail_on"),
        ({"fail_on": ["regresion"]}, "fail_on"),
        ({"defaults": {"repeats": 0}}, "defaults.repeats"),
        ({"benchmarks": [{"name": "a"}]}, "benchmarks[0]"),
        ({"benchmarks": [{"name": "a", "workload": "mlp", "entry": "m:f"}]}, "benchmarks[0]"),
        ({"benchmarks": [{"name": "a", "workload": "mlp", "device": "tpu"}]}, "device"),
        ({"advisor": {"idle_share": 0.2}}, "idle_share"),
        ({"budgets": {"step_time_ms": "at most 100"}}, "step_time_ms"),
        ({"metrics": {"step_time_ms": {"min_effect": 5}}}, "min_effect"),
    ],
)
def test_the_suite_schema_rejects_what_perfgate_rejects(doc: dict[str, Any], key: str) -> None:
    assert errors("suite", doc), doc
    with pytest.raises(suite_config.ConfigError, match=re.escape(key.split(".")[0])):
        suite_config.config_from_mapping(doc, "perfgate.toml")


def test_the_suite_schema_names_the_keys_perfgate_knows() -> None:
    """One list of keys in the loader, the same in the schema: a key added to one and not
    the other fails here."""
    props = schema("suite")["properties"]
    assert set(props) == suite_config._TOP_KEYS
    assert set(props["defaults"]["properties"]) == suite_config._DEFAULT_KEYS
    bench = props["benchmarks"]["items"]["properties"]
    assert set(bench) == suite_config._BENCH_KEYS
    metric = props["metrics"]["additionalProperties"]["properties"]
    assert set(metric) == suite_config._METRIC_KEYS
    assert set(props["advisor"]["properties"]) == set(suite_config.threshold_names())


def test_check_jsonschema_reads_a_suite_file(tmp_path: Path) -> None:
    """A perfgate.toml checked as a user would in pre-commit (check-jsonschema reads TOML)."""
    good = tmp_path / "perfgate.toml"
    good.write_text('project = "p"\n[[benchmarks]]\nname = "mlp"\nworkload = "mlp"\n')
    done = check_jsonschema("suite", good)
    assert done.returncode == 0, done.stdout + done.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text('[[benchmarks]]\nname = "mlp"\nworkload = "mlp"\nrepeat = 3\n')
    done = check_jsonschema("suite", bad)
    assert done.returncode == 1 and "repeat" in done.stdout
