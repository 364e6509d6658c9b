"""Operator counts explain; they never fail a gate alone (issue 3.1, item 5).

Real torch training steps on the CPU, profiled with torch.profiler and parsed as ``perfgate
run`` does: a step that returns ``loss.detach()`` instead of ``loss`` (one more operator
call) and a step that clones a 4-element tensor each change ``op_calls_per_step``. Their
times are the base step's (the same seeded noise around the same level), so only the count
moved: the gate passes and every report names the operator ("work changed: +1 aten::clone
per step"). A suite that names ``[metrics.op_calls_per_step]`` opts in, and its gate fails
on the count; ``decides = false`` there keeps it explaining.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers import perfgate, record
from jsonschema import Draft202012Validator

from perfgate.advisor.work import work_change
from perfgate.app.gate import compare_records, gate_failed
from perfgate.app.measure import profile_measurements
from perfgate.config import Config, config_from_mapping, load_config
from perfgate.errors import ConfigError
from perfgate.models import OpStat, ProfileSummary, RunRecord, Verdict, WorkChange
from perfgate.reporters.render import work_text
from perfgate.store import open_store

SCHEMA = Path(__file__).parent.parent / "perfgate" / "schemas" / "gate.schema.json"
MAIN_RUNS = 6


@pytest.fixture(scope="module")
def profiles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[ProfileSummary]]:
    """Profiles of one small training step (linear, MSE, backward, SGD) as written, and of
    the same step returning ``loss.detach()``, and cloning a 4-element tensor."""
    torch = pytest.importorskip("torch")
    from perfgate.parsers.torch_trace import parse_torch_trace
    from perfgate.runner.backends import CpuBackend, torch_profile

    torch.set_num_threads(1)
    torch.manual_seed(0)
    tmp = tmp_path_factory.mktemp("work")
    model = torch.nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 16), torch.randn(32, 4)
    small = torch.ones(4)

    def train() -> Any:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def detached() -> Any:
        return train().detach()

    def cloning() -> Any:
        small.clone()
        return train()

    steps: dict[str, Callable[[], Any]] = {"base": train, "detach": detached, "clone": cloning}
    out: dict[str, list[ProfileSummary]] = {}
    for name, step in steps.items():
        out[name] = []
        for i in range(2 if name == "base" else 1):
            path = tmp / f"{name}{i}.pt.trace.json"
            torch_profile(CpuBackend(), step, 3, str(path))
            out[name].append(parse_torch_trace(path))
    return out


def profiled(r: RunRecord, profile: ProfileSummary) -> RunRecord:
    """``r`` with ``profile`` and what it adds (``op_calls_per_step``), as ``run`` records."""
    return replace(
        r, profile=profile, measurements=(*r.measurements, *profile_measurements(profile))
    )


def history(
    tmp_path: Path, base: list[ProfileSummary], head: ProfileSummary, branch: str = "feat"
) -> str:
    """A store: main's runs with the base step's profiles, then one run on ``branch`` with
    ``head``'s; every run's step time the same seeded noise around 10 ms."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = open_store(url)
    try:
        for i in range(MAIN_RUNS):
            store.save_run(profiled(record(i, 10.0), base[i % len(base)]))
        store.save_run(profiled(record(20, 10.0, branch=branch), head))
    finally:
        store.close()
    return url


def gate(url: str, *args: str) -> tuple[int, str]:
    done = perfgate(None, "gate", "--db", url, "--branch", "feat", "--against", "main", *args)
    return done.returncode, done.stdout  # out of CI: no step summary, no annotations


def calls(document: dict[str, Any]) -> dict[str, Any]:
    (c,) = [c for c in document["comparisons"] if c["metric"] == "op_calls_per_step"]
    found: dict[str, Any] = c
    return found


def test_a_cloned_small_tensor_passes_the_gate_and_is_named(
    profiles: dict[str, list[ProfileSummary]], tmp_path: Path
) -> None:
    url = history(tmp_path, profiles["base"], profiles["clone"][0])
    code, out = gate(url, "--json")
    document = json.loads(out)
    assert code == 0, out
    assert document["failed"] is False
    count = calls(document)
    assert count["verdict"] == "regression" and count["decides"] is False  # shown, explains
    assert document["verdict"] != "regression"
    (work,) = document["work_changed"]
    assert work["benchmark"] == "mlp" and work["baseline_run_id"] == "mlp-main-005"
    clone = next(o for o in work["ops"] if o["name"] == "aten::clone")
    assert clone["delta_calls_per_step"] == 1.0 and clone["status"] == "new"
    # the changed ops are listed by time per step: the clone's own copy_ and empty_strided
    # calls change too, and which of them took longer is the machine's doing
    assert work["text"].startswith("work changed: ")
    assert "+1 aten::clone (new)" in work["text"]
    assert work["text"].endswith(" per step") or "more op" in work["text"]
    assert list(Draft202012Validator(json.loads(SCHEMA.read_text())).iter_errors(document)) == []

    # The same words in the terminal and in the PR comment, beside the verdict.
    code, text = gate(url)
    assert code == 0
    assert f"\n  {work['text']}\n" in text  # under the benchmark's line
    assert "op_calls_per_step (shown, not deciding)" in text
    report = tmp_path / "report"
    code, _ = gate(url, "--report-dir", str(report))
    assert code == 0
    comment = (report / "report.md").read_text(encoding="utf-8")
    assert "work changed: " in comment and "+1 aten::clone (new)" in comment


def test_loss_detach_is_one_more_call_and_passes(
    profiles: dict[str, list[ProfileSummary]], tmp_path: Path
) -> None:
    url = history(tmp_path, profiles["base"], profiles["detach"][0])
    code, out = gate(url, "--json")
    document = json.loads(out)
    assert code == 0, out
    assert calls(document)["decides"] is False
    (work,) = document["work_changed"]
    detach = next(o for o in work["ops"] if o["name"] == "aten::detach")
    assert detach["delta_calls_per_step"] == 1.0
    assert "+1 aten::detach" in work["text"]


def test_a_suite_that_names_the_count_fails_on_it(
    profiles: dict[str, list[ProfileSummary]], tmp_path: Path
) -> None:
    url = history(tmp_path, profiles["base"], profiles["clone"][0])
    suite = tmp_path / "perfgate.toml"
    suite.write_text("[metrics.op_calls_per_step]\n")
    code, out = gate(url, "--suite", str(suite), "--json")
    document = json.loads(out)
    assert code == 1, out
    assert document["failed"] is True and document["verdict"] == "regression"
    count = calls(document)
    assert count["verdict"] == "regression" and count["decides"] is True
    assert "+1 aten::clone (new)" in document["work_changed"][0]["text"]  # still named

    # decides = false keeps it explaining, with the suite's own tolerance
    suite.write_text("[metrics.op_calls_per_step]\nmin_effect_pct = 0.1\ndecides = false\n")
    code, out = gate(url, "--suite", str(suite), "--json")
    assert code == 0, out
    assert calls(json.loads(out))["decides"] is False


def test_the_html_report_names_the_work_beside_the_latest_verdict(
    profiles: dict[str, list[ProfileSummary]], tmp_path: Path
) -> None:
    pytest.importorskip("plotly")
    from perfgate.app.site import gather_site
    from perfgate.reporters.html import esc, render_benchmark

    url = history(tmp_path, profiles["base"], profiles["clone"][0], branch="main")
    store = open_store(url)
    try:
        site = gather_site(Config(), store)
    finally:
        store.close()
    (view,) = site.benchmarks
    assert view.work is not None and view.verdict is not Verdict.REGRESSION
    words = work_text(view.work)
    assert words.startswith("work changed: ") and "+1 aten::clone (new)" in words
    assert esc(words) in render_benchmark(view, site)


def test_a_b_pairs_name_the_work_against_the_base_run_and_decide_only_when_asked(
    profiles: dict[str, list[ProfileSummary]], tmp_path: Path
) -> None:
    """``run --ab``: the head against the base run measured beside it."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    base = profiled(record(1, 10.0, branch="feat:base"), profiles["base"][0])
    head = replace(
        profiled(record(2, 10.0, branch="feat"), profiles["clone"][0]), paired_with=base.id
    )
    store = open_store(url)
    try:
        store.save_run(base)
        for opted_in in (False, True):
            config = config_from_mapping({"metrics": {"op_calls_per_step": {}}} if opted_in else {})
            result = compare_records(config, store, [head], branch="feat", against="main")
            (count,) = [
                c
                for c in result.comparisons
                if c.metric == "op_calls_per_step" and c.method == "paired"
            ]
            assert count.decides is opted_in
            assert gate_failed(config, result) is opted_in
            (work,) = result.work_changes
            assert work.baseline_run_id == base.id
            words = work_text(work)
            assert words.startswith("work changed: ") and "+1 aten::clone (new)" in words
    finally:
        store.close()


def test_the_same_step_changes_no_work(
    profiles: dict[str, list[ProfileSummary]], tmp_path: Path
) -> None:
    base = profiles["base"]
    url = history(tmp_path, base[:1], base[1])
    code, out = gate(url, "--json")
    assert code == 0, out
    document = json.loads(out)
    assert document["work_changed"] == []
    assert calls(document)["verdict"] == "unchanged"


def op(name: str, calls: float, total_ms: float) -> OpStat:
    return OpStat(name, "cpu", calls, total_ms / 2, total_ms)


def prof(*ops: OpStat) -> ProfileSummary:
    return ProfileSummary("test", 3, ops)


def test_work_change_orders_by_time_and_keeps_within_the_baselines_range() -> None:
    before = [
        ("r1", prof(op("aten::mm", 2, 5.0), op("aten::add", 3, 1.0), op("loader", 4, 0.5))),
        ("r2", prof(op("aten::mm", 2, 5.0), op("aten::add", 3, 1.0), op("loader", 6, 0.5))),
    ]
    now = prof(
        op("aten::mm", 3, 7.5),  # one more matmul
        op("loader", 5, 0.5),  # within the baseline's own range: not named
        op("aten::clone", 1, 0.01),  # new
    )  # aten::add gone
    got = work_change("mlp", now, before)
    assert got is not None and got.baseline_run_id == "r2"
    assert [(o.name, o.delta_calls, o.status) for o in got.ops] == [
        ("aten::mm", 1.0, "changed"),
        ("aten::add", -3.0, "vanished"),
        ("aten::clone", 1.0, "new"),
    ]
    assert work_text(got) == (
        "work changed: +1 aten::mm, -3 aten::add (gone), +1 aten::clone (new) per step"
    )
    assert work_text(replace(got, more=2)).endswith("per step; 2 more ops changed")
    assert work_change("mlp", before[0][1], before) is None  # nothing moved
    assert work_change("mlp", now, []) is None  # no baseline profile
    assert work_change("mlp", prof(), before) is None  # no op table now
    listed = work_change("mlp", now, before, max_ops=1)
    assert listed is not None
    assert listed == WorkChange("mlp", listed.ops, "r2", more=2) and len(listed.ops) == 1


def test_the_count_decides_only_where_the_suite_names_it(tmp_path: Path) -> None:
    assert load_config(env={}, cwd=tmp_path).policy("op_calls_per_step").decides is False
    assert load_config(env={}, cwd=tmp_path).policy("step_time_ms").decides is True
    suite = tmp_path / "perfgate.toml"
    suite.write_text("[metrics.op_calls_per_step]\nmin_effect_pct = 1\n")
    assert load_config(suite, env={}).policy("op_calls_per_step").decides is True
    suite.write_text("[metrics.peak_memory_bytes]\ndecides = false\n")
    assert load_config(suite, env={}).policy("peak_memory_bytes").decides is False
    suite.write_text('[metrics.op_calls_per_step]\ndecides = "yes"\n')
    with pytest.raises(ConfigError, match=r"metrics\.op_calls_per_step\.decides"):
        load_config(suite, env={})
