"""Rank pairs from the Ascend communication matrix (text and db export) and the advisor's
pair rules: values checked against the real fixtures by a plain reading of the files, and a
matrix written from the documented format firing exactly the findings it was built for."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest

from perfgate.advisor.cluster import pair_utilisation
from perfgate.advisor.rules import advise, rank_pair_findings
from perfgate.config import config_from_mapping
from perfgate.models import ProfileSummary, RankPair, Thresholds
from perfgate.parsers.ascend import parse_ascend, parse_ascend_rank

DATA = Path(__file__).parent / "data"
DB_JOB = DATA / "ascend" / "msinsight_pt_db_level1_2rank"  # see ascend/PROVENANCE.md
OUT = "ASCEND_PROFILER_OUTPUT"
PAIR_RULES = {"low_pair_utilisation", "pair_wait"}


@pytest.fixture(scope="module")
def text_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Level1 2-rank text job of tests/data/ascend with its communication matrices
    (tests/data/ascend_comm, see its README) laid over it, in a temporary directory."""
    job = tmp_path_factory.mktemp("ascend") / "msinsight_pt_text_level1_2rank"
    shutil.copytree(DATA / "ascend" / job.name, job)
    shutil.copytree(DATA / "ascend_comm" / job.name, job, dirs_exist_ok=True)
    return job


def _by_key(pairs: tuple[RankPair, ...]) -> dict[tuple[int, int, str], RankPair]:
    return {(p.src, p.dst, p.link): p for p in pairs}


def _plain_text_totals(out_dir: Path) -> dict[tuple[int, int, str], list[float]]:
    """Size and time per (src, dst, link), summed over the ``-total@`` groups."""
    doc = json.loads((out_dir / "communication_matrix.json").read_text())
    sums: dict[tuple[int, int, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for step in doc.values():
        for kind in ("collective", "p2p"):
            for key, links in step[kind].items():
                if "-total@" not in key:
                    continue
                for link, info in links.items():
                    src, dst = (int(x) for x in link.split("-"))
                    slot = sums[(src, dst, info["Transport Type"])]
                    slot[0] += info["Transit Size(MB)"]
                    slot[1] += info["Transit Time(ms)"]
    return sums


def test_text_export_pairs_are_the_matrix_totals_with_the_source_ranks_waits(
    text_job: Path,
) -> None:
    ranks = parse_ascend(text_job)
    assert [r.rank for r in ranks] == [0, 1]
    for summary in ranks:
        out = text_job / f"rank{summary.rank}_ascend_pt" / OUT
        expected = _plain_text_totals(out)
        pairs = _by_key(summary.rank_pairs)
        assert pairs.keys() == expected.keys()
        assert len(pairs) == 8  # one 8-rank group; this rank is the source of every pair
        assert all(p.src == summary.rank for p in summary.rank_pairs)
        comm = json.loads((out / "communication.json").read_text())["step50"]["collective"]
        ops = [v for k, v in comm.items() if k != "Total Op Info"]
        wait = sum(op["Communication Time Info"]["Wait Time(ms)"] for op in ops)
        for key, (size, time) in expected.items():
            pair = pairs[key]
            assert pair.transit_size_mb == pytest.approx(size)
            assert pair.transit_time_ms == pytest.approx(time)
            assert pair.bandwidth_gb_s == pytest.approx(size / time)
            assert pair.ops == len(ops) == 4
            assert pair.wait_ms == pytest.approx(wait)
        assert f"{OUT}/communication_matrix.json" in summary.raw_files
    rank0 = _by_key(ranks[0].rank_pairs)
    # The file's own per-pair figure agrees with size / time (to its 4 decimals).
    assert rank0[(0, 1, "HCCS")].bandwidth_gb_s == pytest.approx(15.7599, abs=1e-4)
    assert rank0[(0, 0, "LOCAL")].transit_size_mb == pytest.approx(61.210656)


def test_db_export_pairs_are_the_commanalyzermatrix_totals() -> None:
    ranks = parse_ascend(DB_JOB)
    for summary in ranks:
        db = DB_JOB / f"rank{summary.rank}_ascend_pt" / OUT / "analysis.db"
        with sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True) as conn:
            rows = conn.execute(
                "SELECT src_rank, dst_rank, transport_type, SUM(transit_size), "
                "SUM(transit_time) FROM CommAnalyzerMatrix WHERE hccl_op_name LIKE '%-total' "
                "GROUP BY 1, 2, 3"
            ).fetchall()
            waits = conn.execute("SELECT COUNT(*), SUM(wait_time) FROM CommAnalyzerTime").fetchone()
        pairs = _by_key(summary.rank_pairs)
        assert len(pairs) == len(rows) == 8
        for src, dst, link, size, time in rows:
            pair = pairs[(int(src), int(dst), link)]
            assert pair.transit_size_mb == pytest.approx(size)
            assert pair.transit_time_ms == pytest.approx(time)
            assert pair.bandwidth_gb_s == pytest.approx(size / time)
            assert pair.ops == waits[0] == 4
            assert pair.wait_ms == pytest.approx(waits[1])


def test_text_and_db_exports_agree_on_the_pairs_and_sizes(text_job: Path) -> None:
    # Two runs of one job: the same pairs and bytes; the times are each run's own.
    text = {r.rank: _by_key(r.rank_pairs) for r in parse_ascend(text_job)}
    db = {r.rank: _by_key(r.rank_pairs) for r in parse_ascend(DB_JOB)}
    assert text.keys() == db.keys()
    for rank, pairs in text.items():
        assert pairs.keys() == db[rank].keys()
        for key, pair in pairs.items():
            assert pair.transit_size_mb == pytest.approx(db[rank][key].transit_size_mb)
            assert pair.bandwidth_gb_s == pytest.approx(db[rank][key].bandwidth_gb_s, rel=0.1)


# --------------------------------------------------------------------------- built matrix

_STEP_TRACE = (
    "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
    "Communication(Not Overlapped and Exclude Receive),Preparing\n"
    "7,60000,20000,1000,21000,20000,100000,0,20000,500\n"
)


def _link(transport: str, size_mb: float, time_ms: float, op: str | None = None) -> dict:
    info = {
        "Transport Type": transport,
        "Transit Size(MB)": size_mb,
        "Transit Time(ms)": time_ms,
        "Bandwidth(GB/s)": round(size_mb / time_ms, 4),
    }
    if op is not None:
        info["Op Name"] = op
    return info


def _op(wait_ms: float) -> dict:
    return {
        "Communication Time Info": {
            "Start Timestamp(us)": 1.0,
            "Elapse Time(ms)": wait_ms + 2.0,
            "Transit Time(ms)": 2.0,
            "Wait Time(ms)": wait_ms,
            "Synchronization Time(ms)": 0.0,
            "Idle Time(ms)": 0.0,
            "Wait Time Ratio": 0.5,
            "Synchronization Time Ratio": 0.0,
        },
        "Communication Bandwidth Info": {},
    }


def _built_rank(tmp_path: Path) -> Path:
    """Rank 0 of a 3-rank job: an allreduce group carries 0->1 at full speed but waits 8 ms
    before it; a broadcast group carries 0->2 at 3 GB/s (11% of HCCS's 28) without waiting."""
    rank_dir = tmp_path / "node_0_ascend_pt"
    out = rank_dir / OUT
    out.mkdir(parents=True)
    (rank_dir / "profiler_info_0.json").write_text(json.dumps({"rank_id": 0}))
    (out / "step_trace_time.csv").write_text(_STEP_TRACE)
    ar, bc = "hcom_allReduce__1_0_1", "hcom_broadcast__2_0_1"
    matrix = {
        "step7": {
            "p2p": {},
            "collective": {
                "allreduce-top1@111": {"0-1": _link("HCCS", 50.0, 2.0, ar)},
                "allreduce-total@111": {
                    "0-0": _link("LOCAL", 1.0, 1.0),
                    "0-1": _link("HCCS", 50.0, 2.0),
                },
                "broadcast-top1@222": {"0-2": _link("HCCS", 6.0, 2.0, bc)},
                "broadcast-total@222": {"0-2": _link("HCCS", 6.0, 2.0)},
            },
        }
    }  # fmt: skip
    (out / "communication_matrix.json").write_text(json.dumps(matrix))
    comm = {"step7": {"p2p": {}, "collective": {f"{ar}@111": _op(8.0), f"{bc}@222": _op(0.1)}}}
    (out / "communication.json").write_text(json.dumps(comm))
    return rank_dir


def _pair_findings(summary: ProfileSummary, thresholds: Thresholds | None = None) -> dict:
    found = advise(summary, thresholds=thresholds)
    return {f.rule: f for f in found if f.rule in PAIR_RULES}


def test_a_built_matrix_fires_exactly_its_low_utilisation_and_long_wait_pairs(
    tmp_path: Path,
) -> None:
    summary = parse_ascend_rank(_built_rank(tmp_path))
    pairs = _by_key(summary.rank_pairs)
    assert pairs.keys() == {(0, 0, "LOCAL"), (0, 1, "HCCS"), (0, 2, "HCCS")}
    assert pairs[(0, 1, "HCCS")].wait_ms == pytest.approx(8.0)
    assert pairs[(0, 2, "HCCS")].bandwidth_gb_s == pytest.approx(3.0)
    found = _pair_findings(summary)
    assert found.keys() == PAIR_RULES
    low, wait = found["low_pair_utilisation"], found["pair_wait"]
    assert low.location == "HCCS rank pairs"
    assert "0->2 3.0 GB/s (11%)" in low.message and "0->1" not in low.message
    assert low.evidence["pairs"] == 1.0
    assert low.evidence["utilisation:0->2"] == pytest.approx(3.0 / 28.0)
    assert "0->1 8 ms" in wait.message and "0->2" not in wait.message
    assert wait.evidence == {"pairs": 1.0, "threshold_ms": 5.0, "wait_ms:0->1": 8.0}
    assert wait.impact_ms == pytest.approx(8.0)
    assert low.suggestion and wait.suggestion


def test_the_suites_advisor_table_moves_the_pair_thresholds(tmp_path: Path) -> None:
    summary = parse_ascend_rank(_built_rank(tmp_path))
    config = config_from_mapping(
        {"advisor": {"pair_wait_ms": 10, "link_nominal_gb_s": {"hccs": 5}}}
    )
    assert config.advisor.pair_wait_ms == 10.0
    assert ("HCCS", 5.0) in config.advisor.link_nominal_gb_s
    assert ("RDMA", 25.0) in config.advisor.link_nominal_gb_s  # merged over the defaults
    assert _pair_findings(summary, config.advisor) == {}  # 3 of 5 GB/s is 60%; 8 ms < 10 ms
    stricter = config_from_mapping({"advisor": {"pair_low_utilisation": 0.9}}).advisor
    low = _pair_findings(summary, stricter)["low_pair_utilisation"]
    # 0->1 runs at 25 of 28 GB/s (89%): below 90% now, and the slower pair is named first.
    assert low.message.index("0->2") < low.message.index("0->1")


def test_pair_utilisation_is_a_share_of_the_nominal_link() -> None:
    t = Thresholds()
    hccs = RankPair(0, 1, "hccs", 14.0, 1.0, 14.0)
    assert pair_utilisation(hccs, t) == pytest.approx(0.5)
    assert pair_utilisation(RankPair(0, 1, "HCCS", 100.0, 1.0, 100.0), t) == 1.0
    assert pair_utilisation(RankPair(0, 0, "LOCAL", 4.0, 0.01, 400.0), t) is None
    assert pair_utilisation(RankPair(0, 1, "UB", 4.0, 1.0, 4.0), t) is None
    assert pair_utilisation(RankPair(0, 1, "HCCS", 0.0, 0.0, 0.0), t) is None
    assert rank_pair_findings([RankPair(0, 0, "LOCAL", 4.0, 1.0, 4.0)], t) == []


def test_findings_name_the_worst_pairs_first_and_cap_the_list() -> None:
    pairs = [RankPair(0, d, "RDMA", float(d), 1.0, float(d)) for d in range(1, 9)]
    (low,) = rank_pair_findings(pairs, Thresholds())
    assert low.message.endswith("(+2 more)")  # 7 below 7.5 GB/s, 5 named
    assert low.message.index("0->1 ") < low.message.index("0->5 ")
    assert "0->6" not in low.message and low.evidence["pairs"] == 7.0


def test_a_broken_matrix_is_a_note_and_the_profile_still_reads(tmp_path: Path) -> None:
    rank_dir = _built_rank(tmp_path)
    (rank_dir / OUT / "communication_matrix.json").write_text('{"step7": {"collective": [')
    summary = parse_ascend_rank(rank_dir)
    assert summary.rank_pairs == ()
    assert any(
        n.startswith("rank_pairs: communication_matrix.json not valid JSON") for n in summary.notes
    )
    assert summary.steps == 1


def test_without_communication_json_the_wait_is_unknown(tmp_path: Path) -> None:
    rank_dir = _built_rank(tmp_path)
    (rank_dir / OUT / "communication.json").unlink()
    summary = parse_ascend_rank(rank_dir)
    assert all(p.wait_ms is None for p in summary.rank_pairs)
    assert _by_key(summary.rank_pairs)[(0, 1, "HCCS")].ops == 1  # the ops the samples name
    assert "rank_pairs: wait_ms unknown, communication.json absent" in summary.notes
    assert "pair_wait" not in _pair_findings(summary)
