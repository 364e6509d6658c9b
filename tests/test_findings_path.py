"""One findings path: for the same stored run, ``ingest --json``, ``advise --json``, the
gate's JSON and the HTML run page list the same findings, perfgate's own rules and
msprof-analyze's together (:func:`perfgate.app.advise.findings_for`), with those the base
branch's latest run also had marked ``known``.

Real inputs: the two-rank torch_npu profile in tests/data/ascend, a real SQLite store,
msprof-analyze run for real on the PR run (the base branch's runs skip it).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import perfgate

from perfgate.reporters.html import run_path

DATA = Path(__file__).parent / "data"
LEVEL1 = DATA / "ascend" / "msinsight_pt_text_level1_2rank"
BENCHMARK = "alexnet-dp"

Key = tuple[str, str, str]


def invoke(*args: str) -> tuple[int, str, str]:
    done = perfgate(None, *args)
    return done.returncode, done.stdout, done.stderr


def keys(findings: list[dict[str, Any]], prefix: str = "") -> list[Key]:
    """(source, rule, location) of each finding in order, ``prefix`` taken off locations."""
    out = []
    for f in findings:
        where = f["location"]
        if prefix:
            assert where == prefix.rstrip(": ") or where.startswith(prefix), where
            where = where[len(prefix) :] if where.startswith(prefix) else ""
        out.append((f["source"], f["rule"], where))
    return out


def known(findings: list[dict[str, Any]], prefix: str = "") -> set[Key]:
    return {k for k, f in zip(keys(findings, prefix), findings, strict=True) if f["known"]}


def page_keys(page: str) -> list[Key]:
    """(source, rule, location) of each row of a run page's findings table."""
    table = re.search(r"<table id='findings'>.*?<tbody>(.*?)</tbody>", page, re.S)
    assert table is not None, "no findings table on the run page"
    rows = re.findall(r"<tr>(.*?)</tr>", table.group(1), re.S)
    cells = [[html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)] for r in rows]
    return [(c[1], c[2], c[3]) for c in cells]


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any], Path]:
    """Four base-branch runs of the profile (no msprof-analyze), then one PR run with it;
    the store's URL, the PR run's ``ingest --json`` and a directory to write into."""
    tmp = tmp_path_factory.mktemp("findings")
    url = f"sqlite:///{tmp / 's.db'}"
    times = tmp / "main.txt"
    for i in range(4):
        times.write_text("\n".join(f"{136.0 + 0.3 * ((i + k) % 3):.3f}" for k in range(5)))
        code, _, err = invoke(
            "ingest", str(LEVEL1), "--benchmark", BENCHMARK, "--db", url, "--branch", "main",
            "--commit", f"{i:040x}", "--step-times", str(times), "--no-advisor",
        )  # fmt: skip
        assert code == 0, err
    slow = tmp / "feat.txt"
    slow.write_text("\n".join(f"{190.0 + 0.3 * k:.3f}" for k in range(5)))
    code, out, err = invoke(
        "ingest", str(LEVEL1), "--benchmark", BENCHMARK, "--db", url, "--branch", "feat",
        "--commit", "f" * 40, "--step-times", str(slow), "--json",
    )  # fmt: skip
    assert code == 0, err
    return url, json.loads(out), tmp


def test_ingest_advise_gate_and_run_page_list_the_same_findings(
    stored: tuple[str, dict[str, Any], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, ingested, tmp = stored
    monkeypatch.chdir(tmp)  # no perfgate.toml around: default thresholds, base branch main
    run_id = ingested["run"]["id"]
    from_ingest = ingested["findings"]
    sources = {f["source"] for f in from_ingest}
    assert sources == {"perfgate", "msprof-analyze"}, "both advisors' findings, one list"
    rules = {f["rule"] for f in from_ingest}
    assert {"comm_not_overlapped", "Byte Alignment Analysis"} <= rules
    assert len(set(keys(from_ingest))) == len(from_ingest), "merged: one finding per key"

    code, out, err = invoke("advise", run_id, "--db", url, "--json")
    assert code == 0, err
    from_advise = json.loads(out)["findings"]

    code, out, err = invoke("gate", "--db", url, "--branch", "feat", "--against", "main", "--json")
    assert code == 1, err  # the PR run is slower: a regression, its findings listed
    from_gate = json.loads(out)["findings"]
    prefix = f"{BENCHMARK}: "

    site = tmp / "site"
    code, _, err = invoke("report", "--html", str(site), "--db", url, "--jobs", "1")
    assert code == 0, err
    page = (site / run_path(run_id)).read_text(encoding="utf-8")

    expected = keys(from_ingest)
    assert keys(from_advise) == expected
    assert keys(from_gate, prefix) == expected
    assert page_keys(page) == expected

    # perfgate's findings on the PR run are the base branch's too (same profile): known,
    # and the same ones known everywhere; msprof-analyze did not run on the base branch.
    marked = known(from_ingest)
    assert marked and all(source == "perfgate" for source, _, _ in marked)
    assert {k for k in expected if k[0] == "perfgate"} == marked
    assert known(from_advise) == marked
    assert known(from_gate, prefix) == marked


def test_advise_on_the_profile_path_finds_what_the_stored_run_shows(
    stored: tuple[str, dict[str, Any], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, ingested, tmp = stored
    monkeypatch.chdir(tmp)
    code, out, err = invoke("advise", str(LEVEL1), "--no-advisor", "--json")
    assert code == 0, err
    own = [k for k in keys(ingested["findings"]) if k[0] == "perfgate"]
    assert keys(json.loads(out)["findings"]) == own
