"""Characterisation of the models' dict shapes (the JSON Schemas' and the store's contract).

``tests/data/serial/golden.json`` holds, for representative objects (hand-built edge cases and
the profiles of the real fixtures), the exact JSON text of their ``to_dict()`` as the
hand-written methods wrote it before :mod:`perfgate.serial` replaced them, and what
``from_dict`` made of sparse documents written by older versions. The generic mechanism must
keep every byte. Regenerate (only on purpose, when a shape changes) with
``python tests/test_serial.py``.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from perfgate.advisor.attribution import attribute
from perfgate.advisor.cluster import cluster_view
from perfgate.advisor.rules import advise
from perfgate.advisor.work import work_change
from perfgate.models import (
    Alert,
    Attribution,
    BenchmarkSpec,
    CIContext,
    ClusterView,
    CommunicationSummary,
    Comparison,
    Direction,
    Finding,
    Fingerprint,
    GitContext,
    LinkBandwidth,
    OpCountChange,
    OpDelta,
    OpStat,
    ProfileSummary,
    RankPair,
    ReferenceRow,
    Severity,
    SpanKind,
    StepBreakdown,
    Summary,
    Timeline,
    TimelineLane,
    TimelineSpan,
    TriageEvent,
    Verdict,
    WorkChange,
)
from perfgate.parsers import read_profile

DATA = Path(__file__).parent / "data"
GOLDEN = DATA / "serial" / "golden.json"
T0 = datetime(2024, 3, 1, 12, 0, tzinfo=timezone.utc)


def _fingerprints() -> Iterator[tuple[str, Any]]:
    base = Fingerprint(
        device_kind="cpu",
        device_model="Test CPU",
        device_count=1,
        cpu_model="Test CPU @ 3.0GHz",
        cpu_cores=8,
        os="Linux-x86_64",
        python_version="3.11",
        torch_version="2.4.0",
        timing_method="wall-sync-v1",
        params={"lr": 0.01, "batch_size": 32, "dtype": "float32", "amp": False},
    )
    yield "fingerprint_defaults", base
    yield (
        "fingerprint_full",
        Fingerprint(
            device_kind="npu",
            device_model="Ascend910B2",
            device_count=8,
            cpu_model="HiSilicon Kunpeng-920",
            cpu_cores=192,
            os="Linux-aarch64",
            python_version="3.10",
            torch_version="2.1.0",
            timing_method="ascend-profile-v1",
            params={"zeta": "z", "alpha": 1},
            host_label="rack 3",
            torch_npu_version="2.1.0.post3",
            cuda_version="12.1",
            cann_version="8.0.RC1",
            driver_version="535",
            os_release="5.10.0",
            perfgate_version="0.9.0",
        ),
    )


def _specs() -> Iterator[tuple[str, Any]]:
    yield "spec_defaults", BenchmarkSpec(name="mlp", workload="mlp")
    yield (
        "spec_full",
        BenchmarkSpec(
            name="bert/infer",
            entry="pkg.mod:step",
            device="npu",
            params={"seq": 128, "batch_size": 8, "amp": True, "slowdown": 1.5},
            warmup=2,
            measured=50,
            profiled=0,
            repeats=5,
            treatment_params=frozenset({"slowdown", "b_knob", "a_knob"}),
            looks=2,
            kind="inference",
            nproc=4,
            nnodes=2,
            timeout_s=120.5,
        ),
    )


def _summaries() -> Iterator[tuple[str, Any]]:
    yield "summary_defaults", Summary(10, 1.5, 1.5, 1.625, 0.25, 1.0, 2.0, 2.5, 0.5, 3.0)
    yield (
        "summary_full",
        Summary(
            n=7,
            centre=10.25,
            median=10.0,
            mean=10.5,
            mad=0.375,
            p10=9.0,
            p90=12.0,
            p99=13.5,
            minimum=8.75,
            maximum=13.5,
            repeat_centres=(10.0, 10.25, 11.0),
            dropped=3,
            centre_se=0.125,
        ),
    )
    yield (
        "summary_non_finite",
        Summary(1, math.inf, math.nan, -math.inf, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, centre_se=math.nan),
    )


def _profile_parts() -> Iterator[tuple[str, Any]]:
    op = OpStat(
        "aten::addmm",
        "cpu",
        3.0,
        1.25,
        2.5,
        op_type="matmul",
        input_shapes=("32x64", "64x10"),
        core="AI_CORE",
        metrics={"aic_mac_ratio": 0.5, "aiv_vec_ratio": 0.25},
    )
    yield "opstat", op
    yield "opstat_defaults", OpStat("aten::relu", "cpu", 1.0, 0.125, 0.125)
    yield "breakdown_defaults", StepBreakdown(step_ms=10.0)
    yield "breakdown_full", StepBreakdown(10.0, 8.5, 0.5, 0.25, 1.5, 0.75, 0.125, 0.0625)
    link = LinkBandwidth("HCCS", 12.5, 0.5, 25.0)
    yield "link", link
    comm = CommunicationSummary(3.0, 4.5, 2.0, 1.5, 0.5, 0.25, 0.4, None, (link, link))
    yield "communication", comm
    yield "communication_defaults", CommunicationSummary(1.0, 2.0, 1.0, 0.5, 0.25, 0.0)
    pair = RankPair(0, 1, "HCCS", 64.0, 2.0, 32.0, wait_ms=1.25, ops=4)
    yield "rank_pair", pair
    yield "rank_pair_defaults", RankPair(1, 1, "LOCAL", 1.0, 0.5, 2.0)
    timeline = Timeline(
        step="ProfilerStep#5",
        duration_us=1234.5,
        lanes=(
            TimelineLane(
                "Stream 2",
                True,
                (
                    TimelineSpan(0.0, 10.5, "MatMul", SpanKind.COMPUTE),
                    TimelineSpan(11.0, 2.0, "hcom_allReduce", SpanKind.COMMUNICATION),
                ),
            ),
            TimelineLane("thread 1 (python)", False, ()),
        ),
        dropped_spans=7,
    )
    yield "timeline", timeline
    yield (
        "profile_full",
        ProfileSummary(
            source="torch.profiler",
            steps=3,
            ops=(op,),
            breakdown=StepBreakdown(step_ms=10.0, compute_ms=8.5, free_ms=1.5),
            peak_memory_bytes=123_456_789,
            memory_per_step_bytes=(1.0e6, 1.5e6),
            device_busy_fraction=0.85,
            op_calls_per_step=42.0,
            kernel_launches_per_step=None,
            rank=0,
            raw_files=("trace.json.gz",),
            notes=("kernel_launches_per_step: CPU run has no kernels",),
            op_types=(OpStat("MatMul", "npu", 2.0, 1.0, 1.0),),
            step_times_ms=(10.0, 10.5),
            communication=comm,
            peak_reserved_bytes=2_000_000_000,
            memory_growth_bytes=-5,
            collection={"profiler_level": "Level1", "aic_metrics": "PipeUtilization"},
            utilisation={"device_busy_pct": 85.0, "cube_util_pct": 40.5},
            device_memory_capacity_bytes=64 * 2**30,
            rank_pairs=(pair,),
            timeline=timeline,
        ),
    )
    yield "profile_defaults", ProfileSummary(source="ascend", steps=1)
    yield (
        "cluster",
        ClusterView(
            ranks=(0, 1),
            step_ms=(10.0, 12.5),
            slowest_rank=1,
            step_spread_pct=25.0,
            comm_wait_ms=(1.0, None),
            comm_wait_spread_pct=None,
            slow_links=("rank 1 HCCS 3.0 GB/s",),
        ),
    )
    yield "cluster_defaults", ClusterView((0,), (1.0,), 0, 0.0)


def _results() -> Iterator[tuple[str, Any]]:
    yield "git_defaults", GitContext()
    yield "git", GitContext("abc123", "feature", "main", 42)
    yield "ci_defaults", CIContext()
    yield "ci", CIContext("gitlab", "https://ci.example/1", "merge_request")
    yield (
        "comparison_minimal",
        Comparison(
            "mlp",
            "step_time_ms",
            "ms",
            Direction.LOWER_IS_BETTER,
            Verdict.NO_BASELINE,
            "no baseline",
            "run1",
            None,
        ),
    )
    yield (
        "comparison_full",
        Comparison(
            benchmark="mlp",
            metric="throughput_samples_per_s",
            unit="samples/s",
            direction=Direction.HIGHER_IS_BETTER,
            verdict=Verdict.REGRESSION,
            reason="4.0% lower",
            current_run_id="run9",
            current_centre=96.0,
            baseline_centre=100.0,
            baseline_run_ids=("run1", "run2"),
            baseline_commits=("c1", "c2"),
            change_pct=-4.0,
            ci_low_pct=-6.0,
            ci_high_pct=-2.0,
            ci_level=0.95,
            p_value=0.001,
            p_adjusted=0.004,
            p_rank=0.01,
            min_effect_pct=3.0,
            mde_pct=2.5,
            fingerprint_differences=("torch_version: '2.3' in baseline, '2.4' now",),
            method="paired",
            alpha=0.05,
            decides=False,
            kind="budget",
            limit=95.0,
            budget=">= 95",
        ),
    )
    yield (
        "finding_full",
        Finding(
            rule="host_sync",
            severity=Severity.CRITICAL,
            location="rank 0",
            message="3 syncs per step",
            suggestion="remove .item()",
            evidence={"calls": 3, "share": 0.25, "op": "aten::item"},
            source="perfgate",
            impact_ms=1.5,
            known=True,
        ),
    )
    yield "finding_defaults", Finding("r", Severity.INFO, "", "m", "s")
    delta = OpDelta(
        "aten::mm", "cpu", 1.0, 1.75, share=0.75, baseline_shapes=("2x2",), current_shapes=("4x4",)
    )
    yield "op_delta", delta
    yield "op_delta_defaults", OpDelta("aten::add", "cpu", 0.5, 0.0, status="vanished")
    yield "attribution", Attribution("mlp", "step_time_ms", 1.0, (delta,), 0.75, "note")
    yield "attribution_defaults", Attribution("mlp", "computing_ms", -0.5, ())
    change = OpCountChange("aten::clone", "cpu", 0.0, 1.0, 0.25)
    yield "op_count_new", change
    yield "op_count_changed", OpCountChange("aten::add", "cpu", 2.0, 3.0, 0.5)
    yield "op_count_vanished", OpCountChange("aten::sub", "cpu", 2.0, 0.0, 0.5)
    yield "work_change", WorkChange("mlp", (change,), "run3", more=2)
    yield "work_change_defaults", WorkChange("mlp", (), "run3")
    yield (
        "alert",
        Alert(
            id=7,
            project="demo",
            benchmark="mlp",
            metric="step_time_ms",
            run_id="r2",
            previous_run_id="r1",
            branch="main",
            fingerprint_key="0123456789abcdef",
            verdict=Verdict.REGRESSION,
            source="gate",
            change_pct=12.5,
            commit_before="c1",
            commit_after="c2",
            status="untriaged",
            created_at=T0,
            updated_at=T0 + timedelta(hours=1, microseconds=5),
        ),
    )
    yield "alert_nones", Alert(
        1, "p", "b", "m", "r", None, "main", "k", Verdict.IMPROVEMENT, "history", None, None,
        "c2", "fixed", datetime(2024, 1, 1), datetime(2024, 1, 2),
    )  # fmt: skip
    yield (
        "triage_event",
        TriageEvent(3, "demo", "ack", 7, "r2", "mlp", "acknowledged", "me", T0, "why"),
    )
    yield (
        "triage_event_nones",
        TriageEvent(4, "demo", "reset", None, None, None, None, "ci", T0, ""),
    )
    yield (
        "reference_better",
        ReferenceRow("step_time_ms", "ms", Direction.LOWER_IS_BETTER, 10.0, 9.0),
    )
    yield (
        "reference_unmeasured",
        ReferenceRow(
            "throughput_samples_per_s", "samples/s", Direction.HIGHER_IS_BETTER, 100.0, None
        ),
    )
    yield "reference_zero", ReferenceRow("loss", "1", Direction.LOWER_IS_BETTER, 0.0, 1.0)


def _fixtures() -> Iterator[tuple[str, Any]]:
    """Profiles, cluster views, findings, attributions and work changes of the real fixtures."""
    paths = {
        "ascend_text_l1": DATA / "ascend" / "msinsight_pt_text_level1_2rank",
        "ascend_text_l0": DATA / "ascend" / "msinsight_pt_text_level0_rank0",
        "ascend_db_l1": DATA / "ascend" / "msinsight_pt_db_level1_2rank",
        "torch_cpu": DATA / "torch_trace" / "mlp_cpu.pt.trace.json.gz",
        "torch_cuda": DATA / "torch_cuda" / "occupancy.pt.trace.json",
    }
    for name, path in paths.items():
        profiled = read_profile(path)
        for rank in profiled.ranks:
            yield f"{name}_rank{rank.rank}", rank
        cluster = cluster_view(profiled.ranks) if len(profiled.ranks) > 1 else None
        if cluster is not None:
            yield f"{name}_cluster", cluster
        slowest = profiled.slowest
        for i, finding in enumerate(advise(slowest, cluster=cluster, ranks=profiled.ranks)):
            yield f"{name}_finding{i}", finding
        if len(profiled.ranks) > 1:
            other = profiled.ranks[0]
            yield f"{name}_attribution", attribute("job", "step_time_ms", 0.5, slowest, [other])
            work = work_change("job", slowest, [("base", other)])
            if work is not None:
                yield f"{name}_work", work


def objects() -> Iterator[tuple[str, Any]]:
    for build in (_fingerprints, _specs, _summaries, _profile_parts, _results, _fixtures):
        yield from build()


SPARSE: tuple[tuple[str, type[Any], Mapping[str, Any]], ...] = (
    # Documents older versions wrote (fields added since are absent): read with defaults.
    (
        "fingerprint_v0",
        Fingerprint,
        {
            "device_kind": "cpu",
            "device_model": "x",
            "device_count": 1,
            "cpu_model": "y",
            "cpu_cores": 4,
            "os": "Linux",
            "python_version": "3.10",
            "torch_version": "2.0",
            "timing_method": "wall-sync-v1",
        },
    ),
    ("spec_v0", BenchmarkSpec, {"name": "mlp", "workload": "mlp"}),
    (
        "opstat_v0",
        OpStat,
        {
            "name": "a",
            "device": "cpu",
            "calls_per_step": 1,
            "self_time_ms_per_step": 2,
            "total_time_ms_per_step": 3,
        },
    ),  # fmt: skip
    ("breakdown_v0", StepBreakdown, {"step_ms": 5}),
    (
        "link_v0",
        LinkBandwidth,
        {"link": "HCCS", "transit_size_mb": 1, "transit_time_ms": 2, "bandwidth_gb_s": 3},
    ),  # fmt: skip
    (
        "communication_v0",
        CommunicationSummary,
        {
            "ops_per_step": 1,
            "elapse_ms": 2,
            "transit_ms": 3,
            "wait_ms": 4,
            "synchronization_ms": 5,
            "idle_ms": 6,
        },
    ),  # fmt: skip
    (
        "rank_pair_v0",
        RankPair,
        {
            "src": 0,
            "dst": 1,
            "link": "HCCS",
            "transit_size_mb": 1,
            "transit_time_ms": 2,
            "bandwidth_gb_s": 3,
        },
    ),  # fmt: skip
    ("timeline_v0", Timeline, {"step": "s", "duration_us": 10}),
    ("profile_v0", ProfileSummary, {"source": "torch.profiler", "steps": 2}),
    # a spec stored before the level of its looks left it (``RunRecord.alpha``)
    ("spec_confirm_alpha", BenchmarkSpec, {"name": "mlp", "looks": 2, "confirm_alpha": 0.0125}),
    (
        "finding_v0",
        Finding,
        {"rule": "r", "severity": "warning", "location": "l", "message": "m", "suggestion": "s"},
    ),  # fmt: skip
)


ROOT = str(Path(__file__).resolve().parent.parent) + "/"


def _text(data: Mapping[str, Any]) -> str:
    """The JSON text, with this checkout's place (in the profiles' raw file paths) as
    ``<repo>/``: the golden output holds where the files are, not where the clone is."""
    return json.dumps(data).replace(ROOT, "<repo>/")


def _entry(text: str) -> dict[str, str]:
    entry = {"sha256": hashlib.sha256(text.encode()).hexdigest()}
    if len(text) <= 3000:
        entry["json"] = text
    return entry


def generate() -> dict[str, Any]:
    shapes = {name: _entry(_text(obj.to_dict())) for name, obj in objects()}
    sparse = {name: _entry(_text(cls.from_dict(doc).to_dict())) for name, cls, doc in SPARSE}
    return {"to_dict": shapes, "from_dict": sparse}


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(GOLDEN.read_text(encoding="utf-8"))
    return data


def _check(entry: Mapping[str, str], text: str) -> None:
    if "json" in entry:
        assert text == entry["json"]
    assert hashlib.sha256(text.encode()).hexdigest() == entry["sha256"]


def test_every_shape_is_kept_byte_for_byte(golden: dict[str, Any]) -> None:
    built = dict(objects())
    assert sorted(built) == sorted(golden["to_dict"])
    for name, obj in built.items():
        _check(golden["to_dict"][name], _text(obj.to_dict()))


def test_documents_of_older_versions_read_with_defaults(golden: dict[str, Any]) -> None:
    for name, cls, doc in SPARSE:
        _check(golden["from_dict"][name], _text(cls.from_dict(doc).to_dict()))


def test_what_is_written_reads_back_equal() -> None:
    for name, obj in objects():
        if isinstance(obj, Alert):
            continue  # written only: its commit_range is two fields, not read back
        text = json.dumps(obj.to_dict())
        back = type(obj).from_dict(json.loads(text))
        if name != "summary_non_finite":
            assert back == obj, name
        assert json.dumps(back.to_dict()) == text, name


def test_read_coerces_to_the_declared_types() -> None:
    fp = Fingerprint.from_dict({**SPARSE[0][2], "device_count": "2", "cpu_cores": 4.0})
    assert (fp.device_count, fp.cpu_cores) == (2, 4)
    assert isinstance(fp.params, dict)
    spec = BenchmarkSpec.from_dict({"name": "x", "warmup": "3", "treatment_params": ["a"]})
    assert spec.warmup == 3 and spec.treatment_params == frozenset({"a"})
    op = OpStat.from_dict({**SPARSE[2][2], "metrics": {"c": "0.5"}})
    assert op.metrics == {"c": 0.5} and isinstance(op.calls_per_step, float)
    f = Finding.from_dict({**SPARSE[-1][2], "evidence": {"n": 3, "x": 0.5, "w": ["a"]}})
    assert f.evidence == {"n": 3, "x": 0.5, "w": "['a']"} and f.severity is Severity.WARNING


def test_a_required_key_missing_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        Fingerprint.from_dict({"device_kind": "cpu"})


if __name__ == "__main__":
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(json.dumps(generate(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    sys.stdout.write(f"wrote {GOLDEN}\n")
