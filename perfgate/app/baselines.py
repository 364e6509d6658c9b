"""Baselines as code: a benchmark's baseline window as a versioned JSON file, reviewed in a
pull request like any other file, and a gate that judges runs against such files with no
database at all.

One file per benchmark and testbed (fingerprint key), named ``<benchmark>.<key>.json``
(:func:`baseline_file_name`). Keys are sorted and floats written by :func:`json.dumps`
(shortest round-trip form), so re-exporting an unchanged window gives a byte-identical file
and a changed one a small diff. No timestamps of the export itself are written, for the
same reason.

``import_baselines`` loads such files into a store as runs whose CI provider is
``baseline-import`` (same run ids, so importing twice, or into the store they came from,
adds nothing). Imported runs keep each repeat's centre as that repeat's one sample: enough
for every statistic the gate uses, not for raw-sample plots.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from perfgate.app.files import write_atomic
from perfgate.app.gate import (
    Levels,
    _compared,
    _judge,
    _level,
    baseline_window,
    check_base_branch,
    with_budgets,
)
from perfgate.app.history import select_benchmarks
from perfgate.config import Config
from perfgate.errors import ParseError, StoreError, UsageError
from perfgate.metrics import never_negative
from perfgate.models import (
    BenchmarkSpec,
    CIContext,
    Direction,
    Fingerprint,
    GateResult,
    GitContext,
    Measurement,
    RunPoint,
    RunRecord,
    Summary,
)
from perfgate.stats import ALPHA
from perfgate.stats.decide import overall_verdict
from perfgate.stats.window import Window
from perfgate.store import SqlStore

FORMAT_VERSION = 1
KIND = "perfgate-baseline"
IMPORT_PROVIDER = "baseline-import"
MAD_TO_SD = 1.4826

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
NAME_HASH_DIGITS = 8


def baseline_file_name(benchmark: str, key: str) -> str:
    """The file name of ``benchmark``'s baseline on the testbed ``key``.

    A name of only ASCII letters, digits, ``_``, ``.`` and ``-`` is used as it is:
    ``mlp.<key>.json``. Any other name has each run of other characters written as ``_``,
    then ``+`` and the first digits of the SHA-256 of the exact name: ``a/b`` and ``a_b``,
    or two names in Chinese, would otherwise share one file and one export would overwrite
    the other. A name used as it is holds no ``+``, so it cannot meet a hashed one.
    """
    safe = _UNSAFE.sub("_", benchmark)
    if safe != benchmark:
        digest = hashlib.sha256(benchmark.encode()).hexdigest()[:NAME_HASH_DIGITS]
        safe = f"{safe}+{digest}"
    return f"{safe}.{key}.json"


def _noise(points: Sequence[RunPoint]) -> dict[str, Any]:
    centres = [p.centre for p in points]
    if not centres:
        return {"runs": 0, "median": None, "spread_pct": None}
    median = statistics.median(centres)
    mad = statistics.median(abs(c - median) for c in centres)
    spread = None if median == 0 else MAD_TO_SD * mad / abs(median) * 100.0
    return {"runs": len(centres), "median": median, "spread_pct": spread}


def baseline_document(
    config: Config, store: SqlStore, *, benchmark: str, fingerprint: Fingerprint, branch: str
) -> dict[str, Any] | None:
    """The baseline file of one benchmark and testbed: the window a run recorded now would
    be judged against (resets, exclusions and change points honoured); None if empty."""
    key = fingerprint.key()
    window = baseline_window(
        config, store, benchmark=benchmark, fingerprint_key=key, against=branch
    )
    if not window.points:
        return None
    run_points: dict[str, list[RunPoint]] = {}
    for points in window.points.values():
        for p in points:
            run_points.setdefault(p.run_id, []).append(p)
    ordered = sorted(run_points.values(), key=lambda ps: (ps[0].started_at, ps[0].run_id))
    newest = store.get_run(ordered[-1][0].run_id)
    return {
        "format_version": FORMAT_VERSION,
        "kind": KIND,
        "project": config.project,
        "benchmark": benchmark,
        "branch": branch,
        "fingerprint_key": key,
        "fingerprint": fingerprint.to_dict(),
        "spec": newest.spec.to_dict(),
        "runs": [
            {
                "id": ps[0].run_id,
                "commit": ps[0].commit,
                "started_at": ps[0].started_at.isoformat(),
                "metrics": {
                    p.metric: {
                        "unit": p.unit,
                        "direction": p.direction.value,
                        "deterministic": p.deterministic,
                        "centre": p.centre,
                        "n": len(p.repeat_centres),
                        "centre_se": p.centre_se,
                        "repeat_centres": list(p.repeat_centres),
                    }
                    for p in ps
                },
            }
            for ps in ordered
        ],
        "noise": {metric: _noise(points) for metric, points in sorted(window.points.items())},
    }


def export_baselines(
    config: Config, store: SqlStore, out_dir: Path, *, branch: str, benchmarks: Sequence[str] = ()
) -> list[Path]:
    """Write one baseline file per benchmark and testbed on ``branch`` into ``out_dir``
    (created only when there is a file to write), each replaced atomically (one that cannot
    be written keeps its previous content, an unchanged one gets the same bytes); the paths
    written.

    Raises:
        UsageError: ``branch`` has no runs, a benchmark of ``benchmarks`` has none on it,
            or two files would have names that differ only in case (one would overwrite the
            other on a case-insensitive file system); nothing is written then.
    """
    check_base_branch(config, store, branch)
    names = select_benchmarks(config, store, benchmarks, branch)
    docs: dict[str, tuple[str, dict[str, Any]]] = {}
    for name in names:
        for fingerprint in store.fingerprints(
            project=config.project, benchmark=name, branch=branch
        ).values():
            doc = baseline_document(
                config, store, benchmark=name, fingerprint=fingerprint, branch=branch
            )
            if doc is None:
                continue
            file_name = baseline_file_name(name, fingerprint.key())
            taken = docs.get(file_name.casefold())
            if taken is not None:
                raise UsageError(
                    f"baselines of {taken[1]['benchmark']!r} and {name!r} would both be "
                    f"written to {out_dir / file_name} (names differing only in case): "
                    "export them with --benchmark into separate directories"
                )
            docs[file_name.casefold()] = (file_name, doc)
    if docs:
        out_dir.mkdir(parents=True, exist_ok=True)
    for file_name, doc in docs.values():
        text = json.dumps(doc, indent=2, sort_keys=True, allow_nan=False) + "\n"
        write_atomic(out_dir / file_name, text)
    return [out_dir / file_name for file_name, _ in docs.values()]


# --- reading ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BaselineFile:
    """One parsed baseline file."""

    path: Path
    project: str
    benchmark: str
    branch: str
    fingerprint: Fingerprint
    spec: BenchmarkSpec
    points: Mapping[str, tuple[RunPoint, ...]]
    runs: tuple[Mapping[str, Any], ...]


def _need(doc: Mapping[str, Any], name: str, kind: type, path: Path) -> Any:
    value = doc.get(name)
    if not isinstance(value, kind):
        raise ParseError(f"{path}: baseline file field {name!r} missing or not {kind.__name__}")
    return value


def _never_below_zero(path: Path, where: str, unit: str, values: Mapping[str, float]) -> None:
    """ParseError naming the file and key of the first negative value of an amount (a time,
    bytes, a count, a rate: :func:`perfgate.metrics.never_negative`)."""
    if not never_negative(unit):
        return
    for name, value in values.items():
        if value < 0:
            raise ParseError(
                f"{path}: {where}.{name} is {value!r}: a value in {unit} is never below 0"
            )


def read_baseline(path: Path) -> BaselineFile:
    """Parse and check one baseline file: ParseError where it is not JSON, of another format
    version, has a field missing or malformed, or a negative value of an amount (a time,
    bytes, a count, a rate) or of a standard error."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise ParseError(f"{path}: cannot read baseline file: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise ParseError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from exc
    except RecursionError:
        raise ParseError(f"{path}: not a perfgate baseline file (nested too deeply)") from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise ParseError(f"{path}: not a perfgate baseline file")
    if doc.get("format_version") != FORMAT_VERSION:
        raise ParseError(
            f"{path}: baseline format_version {doc.get('format_version')!r} "
            f"(this perfgate reads {FORMAT_VERSION})"
        )
    try:
        fingerprint = Fingerprint.from_dict(_need(doc, "fingerprint", dict, path))
        spec = BenchmarkSpec.from_dict(_need(doc, "spec", dict, path))
        benchmark = str(_need(doc, "benchmark", str, path))
        branch = str(_need(doc, "branch", str, path))
        key = str(_need(doc, "fingerprint_key", str, path))
        by_metric: dict[str, list[RunPoint]] = {}
        runs = tuple(_need(doc, "runs", list, path))
        for i, run in enumerate(runs):
            started = datetime.fromisoformat(str(run["started_at"]))
            if started.tzinfo is None:
                raise ValueError(f"run {run['id']}: started_at has no timezone")
            for metric, m in sorted(run["metrics"].items()):
                centres = tuple(float(x) for x in m["repeat_centres"])
                centre = float(m["centre"])
                centre_se = None if m.get("centre_se") is None else float(m["centre_se"])
                if not centres or not all(math.isfinite(x) for x in (centre, *centres)):
                    raise ValueError(f"run {run['id']}: metric {metric} has no finite centres")
                where = f"runs[{i}].metrics.{metric}"
                values = {"centre": centre} | {
                    f"repeat_centres[{j}]": x for j, x in enumerate(centres)
                }
                _never_below_zero(path, where, str(m["unit"]), values)
                if centre_se is not None and centre_se < 0:
                    raise ParseError(
                        f"{path}: {where}.centre_se is {centre_se!r}: "
                        "a standard error is never below 0"
                    )
                by_metric.setdefault(metric, []).append(
                    RunPoint(
                        run_id=str(run["id"]),
                        benchmark=benchmark,
                        metric=metric,
                        unit=str(m["unit"]),
                        direction=Direction(m["direction"]),
                        branch=branch,
                        commit=str(run["commit"]),
                        fingerprint_key=key,
                        started_at=started,
                        centre=centre,
                        repeat_centres=centres,
                        deterministic=bool(m["deterministic"]),
                        centre_se=centre_se,
                    )
                )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ParseError(f"{path}: malformed baseline file ({exc!r})") from exc
    if fingerprint.key() != key:
        raise ParseError(
            f"{path}: fingerprint_key {key} does not match its fingerprint "
            f"({fingerprint.key()}): edited by hand, or written by another perfgate version"
        )
    return BaselineFile(
        path=path,
        project=str(doc.get("project", "")),
        benchmark=benchmark,
        branch=branch,
        fingerprint=fingerprint,
        spec=spec,
        points={m: tuple(sorted(ps, key=lambda p: p.started_at)) for m, ps in by_metric.items()},
        runs=runs,
    )


def read_baselines(path: Path) -> list[BaselineFile]:
    """The baseline files at ``path``, parsed and checked (:func:`read_baseline`): a
    directory's ``*.json`` files (sorted), or the one file given. What ``gate
    --baseline-file`` and ``baseline import`` both read.

    Raises:
        ParseError: a directory with no ``*.json`` file (a gate against it would pass every
            run as no baseline), a malformed file, or two files of one benchmark and
            testbed (which of them to judge against cannot be told).
    """
    paths = sorted(path.glob("*.json")) if path.is_dir() else [path]
    if not paths:
        raise ParseError(f"no baseline files (*.json) in {path}")
    parsed = [read_baseline(p) for p in paths]
    seen: dict[tuple[str, str], Path] = {}
    for f in parsed:
        key = (f.benchmark, f.fingerprint.key())
        if key in seen:
            raise ParseError(
                f"{seen[key]} and {f.path.name} are both the baseline of {f.benchmark!r} "
                f"on testbed {key[1]}: keep one"
            )
        seen[key] = f.path
    return parsed


# --- judging without a database --------------------------------------------------------------


def gate_from_baseline_files(
    config: Config,
    records: Sequence[RunRecord],
    files: Path,
    *,
    alpha: Levels = ALPHA,
    against: str | None = None,
) -> GateResult:
    """Judge ``records`` (one run per benchmark) against baseline files (``files``: a
    directory of ``*.json`` files, or one: :func:`read_baselines`), with no store, at the
    level ``alpha`` (as :func:`perfgate.app.compare_records`). ``against``: the base branch
    the gate was asked for by name (``--against``), None when it was not.

    Each run is compared with the file of its benchmark and fingerprint key by exactly the
    statistics of :func:`perfgate.app.compare_records`; a benchmark with files only for
    other testbeds is ``incomparable`` (naming the fields that differ), one with no file
    ``no_baseline``; the suite's ``[budgets]`` are judged beside them. Paired A/B runs,
    attribution and findings need the store and are not part of this result.

    Raises:
        ParseError: no baseline file, or one that is unreadable or malformed.
        UsageError: ``against`` is given and a file is the baseline of another branch
            (the gate would judge against a branch it was not asked for).
    """
    parsed = read_baselines(files)
    branches = sorted({f.branch for f in parsed})
    if against is not None and branches != [against]:
        raise UsageError(
            f"--against {against!r}, but the baseline files in {files} are of branch "
            f"{', '.join(repr(b) for b in branches)}: export {against!r} "
            f"('perfgate baseline export --branch {against}') or leave --against out"
        )
    by_key = {(f.benchmark, f.fingerprint.key()): f for f in parsed}
    base = ", ".join(branches)
    judged = []
    for record in records:
        found = by_key.get((record.benchmark, record.fingerprint.key()))
        if found is None:  # incomparable where other testbeds have files
            theirs = [f.fingerprint for f in parsed if f.benchmark == record.benchmark]
            window = Window({}, {fp.key(): fp for fp in theirs})
        else:
            ps = found.points.items()
            window = Window({m: tuple(p for p in v if p.run_id != record.id) for m, v in ps}, {})
        judged.append(_judge(config, record, window, base, _level(alpha, record.benchmark)))
    ordered = tuple(sorted(_compared(judged), key=lambda c: (c.benchmark, c.metric, c.method)))
    branch = records[0].git.branch if records else ""
    result = GateResult(branch, base, overall_verdict(ordered), ordered)
    # The suite's budgets hold against files as against the store.
    return with_budgets(config, records, result)


# --- importing --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportResult:
    files: int
    added: int
    already_stored: int


def _imported_measurement(p: RunPoint) -> Measurement:
    centres = list(p.repeat_centres)
    ordered = sorted(centres)
    median = statistics.median(ordered)
    summary = Summary(
        n=len(ordered),
        centre=p.centre,
        median=median,
        mean=statistics.fmean(ordered),
        mad=statistics.median(abs(x - median) for x in ordered),
        p10=ordered[(len(ordered) - 1) // 10],
        p90=ordered[((len(ordered) - 1) * 9) // 10],
        p99=ordered[-1],
        minimum=ordered[0],
        maximum=ordered[-1],
        repeat_centres=tuple(centres),
        centre_se=p.centre_se,
    )
    return Measurement(
        metric=p.metric,
        unit=p.unit,
        direction=p.direction,
        repeats=tuple((x,) for x in centres),
        summary=summary,
        deterministic=p.deterministic,
    )


def records_of(baseline: BaselineFile) -> list[RunRecord]:
    """The runs of a baseline file as records to store, marked as imported."""
    out = []
    for run in baseline.runs:
        run_id = str(run["id"])
        measurements = tuple(
            _imported_measurement(next(p for p in baseline.points[m] if p.run_id == run_id))
            for m in sorted(run["metrics"])
        )
        started = datetime.fromisoformat(str(run["started_at"]))
        out.append(
            RunRecord(
                id=run_id,
                project=baseline.project,
                benchmark=baseline.benchmark,
                fingerprint=baseline.fingerprint,
                git=GitContext(commit=str(run["commit"]), branch=baseline.branch),
                ci=CIContext(IMPORT_PROVIDER, job_url=baseline.path.name, trigger="import"),
                started_at=started,
                finished_at=started,
                measurements=measurements,
                spec=baseline.spec,
            )
        )
    return out


def import_baselines(store: SqlStore, files: Path) -> ImportResult:
    """Load baseline files (:func:`read_baselines`: all are read and checked first, so
    ParseError stores nothing) into ``store``, one transaction per file (StoreError naming
    it where the store failed). Runs already stored (by id) are left as they are, so
    importing twice adds nothing."""
    parsed = read_baselines(files)
    added = already = 0
    for baseline in parsed:
        records = records_of(baseline)
        fresh = [r for r in records if not store.has_run(r.id)]
        already += len(records) - len(fresh)
        if fresh:
            try:
                store.save_runs(fresh)
            except StoreError as exc:
                raise StoreError(f"{baseline.path}: {exc}") from exc
            added += len(fresh)
    return ImportResult(files=len(parsed), added=added, already_stored=already)
