"""``perfgate advise``: golden JSON on the committed fixtures, stored runs, the suite's
``[advisor]`` table.

Goldens live in tests/data/advise/. Volatile fields (perfgate's version, the target path)
are normalised and floats rounded to 6 significant digits. Regenerate them after an
intended change with ``PERFGATE_UPDATE_GOLDENS=1 python -m pytest tests/test_advise_cli.py``.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest
from helpers import perfgate

from perfgate.advisor.rules import Thresholds
from perfgate.config import load_config
from perfgate.errors import ConfigError

DATA = Path(__file__).parent / "data"
GOLDEN = DATA / "advise"
ASCEND_RANK0 = DATA / "ascend" / "msinsight_pt_text_level1_2rank" / "rank0_ascend_pt"
CPU_TRACE = DATA / "torch_trace" / "mlp_cpu.pt.trace.json.gz"


def normalise(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


def advise_json(*args: str) -> dict[str, Any]:
    result = perfgate(None, "advise", *args, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    data["perfgate_version"] = "<version>"
    data["target"] = Path(data["target"]).name
    return normalise(data)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("golden", "target", "flags"),
    [
        ("ascend_level1_rank0.json", ASCEND_RANK0, ["--no-advisor"]),
        ("mlp_cpu.json", CPU_TRACE, []),
    ],
)
def test_golden_json(
    golden: str, target: Path, flags: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no perfgate.toml around: default thresholds
    got = advise_json(str(target), *flags)
    path = GOLDEN / golden
    if os.environ.get("PERFGATE_UPDATE_GOLDENS"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    assert got == json.loads(path.read_text(encoding="utf-8"))


def test_ascend_golden_says_what_the_issue_asks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    data = advise_json(str(ASCEND_RANK0), "--no-advisor")
    rules = {f["rule"]: f for f in data["findings"]}
    assert data["findings"][0]["rule"] == "comm_not_overlapped"
    assert rules["comm_not_overlapped"]["severity"] == "critical"
    assert rules["format_conversion"]["location"] == "rank 0 / op type TransData"
    assert all(f["source"] == "perfgate" for f in data["findings"])
    assert data["advisor"] == {
        "tool": "msprof-analyze",
        "ran": False,
        "version": None,
        "problem": None,
    }


def test_text_report_and_a_stored_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 's.db'}"
    text = perfgate(None, "advise", str(CPU_TRACE))
    assert text.returncode == 0, text.stdout + text.stderr
    assert "[warning] perfgate: host_bound @ free" in text.stdout
    ingest = perfgate(
        None,
        "ingest",
        str(CPU_TRACE),
        "--db",
        url,
        "--benchmark",
        "mlp",
        "--branch",
        "feat",
        "--json",
    )
    assert ingest.returncode == 0, ingest.stdout + ingest.stderr
    run_id = json.loads(ingest.stdout)["run"]["id"]
    data = advise_json(run_id[:8], "--db", url)
    assert data["kind"] == "run" and data["run"]["id"] == run_id
    assert {f["rule"] for f in data["findings"]} == {"host_bound", "host_sync"}
    missing = perfgate(None, "advise", "nosuchrun", "--db", url)
    assert missing.returncode == 2
    assert "no run 'nosuchrun'" in missing.stdout + missing.stderr


def test_suite_advisor_table_sets_thresholds_and_rejects_unknown_keys(tmp_path: Path) -> None:
    suite = tmp_path / "perfgate.toml"
    suite.write_text(
        textwrap.dedent(
            """\
            [advisor]
            idle_share_warning = 0.6
            min_profiled_steps = 2
            """
        ),
        encoding="utf-8",
    )
    config = load_config(suite, env={})
    assert config.advisor == Thresholds(idle_share_warning=0.6, min_profiled_steps=2)
    assert load_config(env={}, cwd=tmp_path / "nowhere").advisor == Thresholds()
    quiet = perfgate(None, "advise", str(CPU_TRACE), "--suite", str(suite), "--json")
    assert "host_bound" not in {f["rule"] for f in json.loads(quiet.stdout)["findings"]}

    suite.write_text("[advisor]\nidle_share = 0.5\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"perfgate\.toml: advisor\.idle_share: unknown key"):
        load_config(suite, env={})
    bad = perfgate(None, "advise", str(CPU_TRACE), "--suite", str(suite))
    assert bad.returncode == 2
    assert "advisor.idle_share: unknown key" in bad.stdout + bad.stderr

    suite.write_text("[advisor]\nmin_profiled_steps = 2.5\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="advisor.min_profiled_steps: expected an integer"):
        load_config(suite, env={})
    suite.write_text("[advisor]\ncomm_share_warning = -1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="advisor.comm_share_warning: expected a number >= 0"):
        load_config(suite, env={})


def _copy_trace(src: Path, dest: Path, rank: int | None) -> None:
    """``src`` (a gzipped torch trace) written to ``dest`` with ``distributedInfo`` naming
    ``rank``, or without it for None."""
    import gzip

    doc = json.loads(gzip.decompress(src.read_bytes()))
    doc.pop("distributedInfo", None)
    if rank is not None:
        doc["distributedInfo"] = {"backend": "gloo", "rank": rank, "world_size": 2}
    dest.write_text(json.dumps(doc), encoding="utf-8")


@pytest.mark.parametrize(
    ("ranks", "said"),
    [
        ((None, None), "name no rank (distributedInfo): traces of one process"),
        ((0, None), "b.pt.trace.json names no rank"),
        ((0, 0), "a.pt.trace.json and b.pt.trace.json are both rank 0"),
    ],
)
def test_traces_that_are_not_one_job_s_ranks_are_refused(
    tmp_path: Path, ranks: tuple[int | None, int | None], said: str
) -> None:
    # a schedule with repeat=2 writes two traces of one process: read as two ranks, they
    # made a critical slow_rank finding and a step time taken per step across both
    job = tmp_path / "job"
    job.mkdir()
    for name, rank in zip(("a", "b"), ranks, strict=True):
        _copy_trace(CPU_TRACE, job / f"{name}.pt.trace.json", rank)
    for command in (("advise", str(job)), ("ingest", str(job), "--benchmark", "x")):
        db = tmp_path / "store.db"
        result = perfgate(None, *command, "--db", f"sqlite:///{db}")
        assert result.returncode == 2, result.stdout + result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert said in line
        assert not db.exists()
    _copy_trace(CPU_TRACE, job / "b.pt.trace.json", 1)
    if ranks[0] == 0:  # two ranks that say so are read as a job's two ranks
        assert perfgate(None, "advise", str(job), "--json").returncode == 0


def test_two_sessions_of_one_ascend_rank_are_refused(tmp_path: Path) -> None:
    import shutil

    job = tmp_path / "job"
    shutil.copytree(ASCEND_RANK0, job / "rank0_ascend_pt")
    shutil.copytree(ASCEND_RANK0, job / "again_ascend_pt")
    result = perfgate(None, "advise", str(job), "--no-advisor")
    assert result.returncode == 2, result.stdout
    assert "are both rank 0: two sessions of one rank" in result.stderr
