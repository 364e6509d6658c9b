"""Other harnesses' result files -> :class:`ResultFile`; pure apart from reading.

A team that already times its code with pytest-benchmark, pyperf or asv, or that prints an
epoch time or a tokens/s figure from its training log, hands perfgate that file as it is.
Each format is read for the samples it carries, never for its own summary when the samples
are there, so that the gate tests the same kind of evidence it tests for ``perfgate run``.

- ``pytest_benchmark``: ``pytest --benchmark-json FILE`` (and the ``--benchmark-save`` /
  ``--benchmark-autosave`` files under ``.benchmarks/``): ``benchmarks[]``, each with
  ``name``, ``fullname``, ``options`` and ``stats``. ``stats.data`` is every round's time per
  iteration in seconds (``--benchmark-json`` always writes it; a saved file only with
  ``--benchmark-save-data``); without it, ``stats.median`` alone is one sample.
  ``machine_info`` (CPU, OS, Python) and ``commit_info`` (``id``, ``branch``, ``dirty``)
  describe where and what it measured.
- ``pyperf``: ``python -m pyperf ... -o FILE`` (``.json`` or ``.json.gz``), format version
  ``1.0`` (pyperf >= 1.0) or 6: ``benchmarks[].runs[]``; a run is one worker process, so its
  ``values`` (per loop iteration, warm-ups in ``warmups`` left out) are one repeat; a run
  without values is pyperf's calibration and is skipped. Metadata is merged as pyperf does
  (the file's, the benchmark's, the run's): ``name``, ``unit`` (``second``, ``byte`` or
  ``integer``), ``cpu_model_name``, ``cpu_count``, ``platform``, ``python_version``,
  ``python_implementation``.
- ``asv``: ``.asv/results/<machine>/<commit>-<env>.json``, results format version 2 (asv >=
  0.5): ``result_columns`` names the columns of each ``results`` row (``result``,
  ``params``, ..., ``samples``; trailing empty columns are left out); ``result`` and
  ``samples`` hold one entry per combination of ``params`` (their product, in order).
  ``samples`` (``asv run --record-samples``) are used where written, else the result (asv's
  median) alone. The benchmark's type (``time``, ``memory``, ``peakmemory``, ``track``) and
  unit come from the ``benchmarks.json`` beside the machine folder when it is there, else
  from the name's prefix (``time_``, ``mem_``, ``peakmem_``, ``track_``). ``commit_hash``,
  ``env_name`` and ``params`` (the machine: ``machine``, ``cpu``, ``num_cpu``, ``os``,
  ``arch``) describe the run.
- ``metrics_file``: perfgate's own plain file for figures from a training log (below).

Times become ms: the metric ``time_ms`` for pytest-benchmark, pyperf and asv (one call of
the benchmarked code), ``memory_bytes`` for pyperf's ``byte`` and asv's memory benchmarks,
``value`` for pyperf's ``integer`` and asv's ``track_`` benchmarks. None of these is in
perfgate's catalogue; each is judged lower-is-better.

The plain metrics file, as JSON::

    {"device": "npu",                                  optional: cpu, cuda, npu, ...
     "params": {"model": "llama-7b", "batch_size": 8},  optional: part of the fingerprint
     "metrics": [
       {"name": "epoch_time", "value": 123.4, "unit": "s", "direction": "lower"},
       {"name": "tokens_per_s", "values": [1510.2, 1498.7], "unit": "1/s",
        "direction": "higher"},
       {"name": "step_time_ms", "repeats": [[101.2, 99.8], [100.4, 100.9]]}]}

or as CSV, a header naming ``name`` and ``value`` (or ``values``), and optionally ``unit``,
``direction`` and ``repeat``; a ``value`` cell may hold several numbers separated by spaces
or ``;``, rows of one name are its samples, and ``repeat`` (a whole number) groups them by
process; lines starting with ``#`` are skipped::

    name,value,unit,direction
    epoch_time,123.4,s,lower
    tokens_per_s,1510.2;1498.7,1/s,higher

``value`` is one sample, ``values`` several from one process, ``repeats`` one list per
process. A metric perfgate's catalogue knows (``step_time_ms``, ``throughput_samples_per_s``,
...) takes the catalogue's unit and direction: a file that says otherwise is an error, and
so is a metric outside the catalogue without a ``direction``. A metric whose name ends in
``_ms`` is in ms: a time in ``s``, ``us`` or ``ns`` is converted; another unit is an error.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import itertools
import json
import math
import re
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfgate.errors import ParseError
from perfgate.metrics import TO_MS, lookup, never_negative
from perfgate.models import Direction, ParamValue
from perfgate.parsers.decompress import read_whole

__all__ = [
    "FORMAT_ASV",
    "FORMAT_METRICS",
    "FORMAT_PYPERF",
    "FORMAT_PYTEST_BENCHMARK",
    "RESULT_FORMATS",
    "ResultBenchmark",
    "ResultFile",
    "ResultHost",
    "ResultMetric",
    "parse_results",
    "sniff_results",
]

FORMAT_PYTEST_BENCHMARK = "pytest_benchmark"
FORMAT_PYPERF = "pyperf"
FORMAT_ASV = "asv"
FORMAT_METRICS = "metrics_file"
RESULT_FORMATS = (FORMAT_PYTEST_BENCHMARK, FORMAT_PYPERF, FORMAT_ASV, FORMAT_METRICS)

# (metric, unit, factor to it) of a time in s, a memory in bytes, a plain value
_TIME = ("time_ms", "ms", 1000.0)
_MEMORY = ("memory_bytes", "bytes", 1.0)
_VALUE = ("value", "", 1.0)

_SNIFF_BYTES = 1 << 16
_SHA = re.compile(r"^[0-9a-fA-F]{7,64}$")


@dataclass(frozen=True)
class ResultMetric:
    """One metric of one benchmark, its samples grouped by repeat (worker process)."""

    name: str
    unit: str
    direction: Direction | None
    """None: the catalogue's (the metric is in it)."""
    repeats: tuple[tuple[float, ...], ...]


@dataclass(frozen=True)
class ResultBenchmark:
    """One benchmark of a result file: the harness's name for it and its metrics."""

    name: str
    """As the harness names it (``test_sort``, ``benchmarks.Suite.time_x(10, 'a')``); "" for
    a metrics file, which is one benchmark."""
    metrics: tuple[ResultMetric, ...]
    params: Mapping[str, ParamValue] = field(default_factory=dict)
    """What changes what this benchmark measures (pytest-benchmark's timer, ...): part of
    its fingerprint."""


@dataclass(frozen=True)
class ResultHost:
    """What the file says about the machine it ran on; "" or 0 where it does not say."""

    cpu_model: str = ""
    cpu_cores: int = 0
    os: str = ""
    """``<system>-<machine>`` (``Linux-x86_64``), as perfgate writes it."""
    os_release: str = ""
    python_version: str = ""
    """Major.minor (``3.11``)."""
    device_kind: str = ""


@dataclass(frozen=True)
class ResultFile:
    """A result file read and checked: its benchmarks, and what it says about where and
    what it measured."""

    format: str
    path: Path
    benchmarks: tuple[ResultBenchmark, ...]
    host: ResultHost
    params: Mapping[str, ParamValue]
    """Fingerprint params of every benchmark in the file (the Python implementation, asv's
    environment and machine, a metrics file's ``params``)."""
    commit: str = ""
    """The commit the file says it measured; "" when it does not say."""
    branch: str = ""
    notes: tuple[str, ...] = ()


# --- detection ------------------------------------------------------------------------------
def sniff_results(path: Path) -> str | None:
    """The result format of the file at ``path`` from its name and first 64 KiB, or None.

    pytest-benchmark writes ``machine_info`` first; pyperf sorts its keys, so ``benchmarks``
    comes first and its benchmarks start with ``metadata`` or ``runs``; asv writes
    ``commit_hash`` and ``result_columns``; a metrics file has a ``metrics`` list. A
    Chrome trace (``traceEvents``) and an ais_bench summary (``NPU_compute_time``) are
    none of them. Whether the content holds up is :func:`parse_results`'s to say.
    """
    name = path.name
    if name.endswith(".csv"):
        return FORMAT_METRICS if _csv_header_fits(path) else None
    if not name.endswith((".json", ".json.gz")) or ".pt.trace" in name:
        return None
    try:
        head = _head(path)
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile):
        return None
    if b'"traceEvents"' in head or b'"NPU_compute_time"' in head:
        return None
    if b'"result_columns"' in head or (b'"commit_hash"' in head and b'"env_name"' in head):
        return FORMAT_ASV
    if b'"machine_info"' in head:
        return FORMAT_PYTEST_BENCHMARK
    if re.match(rb'\s*\{\s*"benchmarks"\s*:\s*\[\s*\{\s*"(metadata|runs)"', head) or (
        b'"perf_version"' in head and b'"runs"' in head
    ):
        return FORMAT_PYPERF
    if re.search(rb'"metrics"\s*:\s*\[', head):
        return FORMAT_METRICS
    return None


def _head(path: Path) -> bytes:
    with path.open("rb") as fh:
        head = fh.read(_SNIFF_BYTES)
    if not head.startswith(b"\x1f\x8b"):
        return head
    out = b""
    # only the first 64 KiB of the compressed stream are read: it ends early (EOFError)
    with gzip.GzipFile(fileobj=io.BytesIO(head)) as gz, contextlib.suppress(EOFError):
        while len(out) < _SNIFF_BYTES and (chunk := gz.read(4096)):
            out += chunk
    return out


def _csv_header_fits(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            for line in fh:
                if line.strip() and not line.lstrip().startswith("#"):
                    columns = {c.strip().lower() for c in next(csv.reader([line]))}
                    return "name" in columns and bool({"value", "values"} & columns)
    except (OSError, UnicodeDecodeError, csv.Error):
        return False
    return False


# --- reading --------------------------------------------------------------------------------
def parse_results(path: Path, fmt: str) -> ResultFile:
    """Read the result file at ``path`` as ``fmt`` (one of :data:`RESULT_FORMATS`).

    Raises:
        ParseError: it cannot be read, is not JSON (CSV), or a key is missing or holds the
            wrong thing (one line naming the file and the key).
    """
    if fmt == FORMAT_METRICS and path.name.endswith(".csv"):
        return _parse_metrics_csv(path, _text(path))
    doc = load_json(_text(path), path)
    label, parse = _PARSERS[fmt]
    if not isinstance(doc, dict):
        raise ParseError(f"{path}: a {label} file is a JSON object, not {kind(doc)}")
    return parse(doc, path)


def _text(path: Path) -> str:
    try:
        return read_whole(path, str(path)).decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ParseError(f"{path}: not UTF-8 text") from None


def load_json(text: str, path: Path, empty: str = "empty file") -> Any:
    """``text`` parsed; ParseError naming ``path`` (and ``empty`` when it is blank)."""
    if not text.strip():
        raise ParseError(f"{path}: {empty}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(
            f"{path}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except RecursionError:
        raise ParseError(f"{path}: JSON nested too deeply") from None


def kind(value: Any) -> str:
    """What a JSON value is, for a message: ``a list``, ``null``, ``a number``, ..."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return {list: "a list", str: "a string", dict: "an object", type(None): "null"}.get(
        type(value), type(value).__name__
    )


def number(value: Any, path: Path, key: str) -> float:
    """``value`` as a float; ParseError naming ``key`` unless it is a JSON number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        shown = repr(value)[:40] if isinstance(value, str) else kind(value)
        raise ParseError(f"{path}: {key}: {shown} is not a number")
    try:
        return float(value)
    except OverflowError:  # an integer of hundreds of digits
        return math.inf


def _number(value: Any, path: Path, key: str, *, minimum: float | None = None) -> float:
    x = number(value, path, key)
    if not math.isfinite(x):
        raise ParseError(f"{path}: {key}: {value} is not a finite number")
    if minimum is not None and x < minimum:
        raise ParseError(f"{path}: {key}: {value} is below {minimum:g}")
    return x


def _numbers(value: Any, path: Path, key: str, *, minimum: float | None = None) -> list[float]:
    if not isinstance(value, list):
        raise ParseError(f"{path}: {key}: {kind(value)}, not a list of numbers")
    return [_number(x, path, f"{key}[{i}]", minimum=minimum) for i, x in enumerate(value)]


def _object(doc: Mapping[str, Any], key: str, path: Path, where: str = "") -> dict[str, Any]:
    value = doc.get(key)
    if value is not None and not isinstance(value, dict):
        raise ParseError(f"{path}: {where}{key}: {kind(value)}, not an object")
    return value or {}


def _items(doc: Mapping[str, Any], key: str, path: Path, what: str) -> Iterator[tuple[str, Any]]:
    """``(key[i], item)`` for each object of the non-empty list ``doc[key]``."""
    if key not in doc:
        raise ParseError(f"{path}: no {key}: not a {what} file")
    value = doc[key]
    if not isinstance(value, list):
        raise ParseError(f"{path}: {key}: {kind(value)}, not a list")
    if not value:
        raise ParseError(f"{path}: {key}: empty, no benchmark to record")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise ParseError(f"{path}: {key}[{i}]: {kind(item)}, not an object")
        yield f"{key}[{i}]", item


def _str(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _python_minor(version: Any) -> str:
    """``3.11`` from ``3.11.7``, ``3.11.7 (64-bit) revision ...`` or ``3.11``; "" otherwise."""
    match = re.match(r"\s*(\d+)\.(\d+)", _str(version))
    return f"{match.group(1)}.{match.group(2)}" if match else ""


_ARCHES = ("x86_64", "aarch64", "arm64", "AMD64", "ppc64le", "s390x", "riscv64", "i686")


def _platform_os(platform: str) -> tuple[str, str]:
    """``(Linux-x86_64, 6.8.0-45-generic)`` from Python's ``platform.platform()`` string,
    which pyperf records (``Linux-6.8.0-45-generic-x86_64-with-glibc2.39``)."""
    system, _, rest = platform.partition("-")
    for arch in _ARCHES:
        if f"-{arch}" in rest:
            return f"{system}-{arch}", rest.split(f"-{arch}", 1)[0]
    return platform, ""


def _commit(value: Any) -> str:
    text = _str(value)
    return text.lower() if _SHA.match(text) else ""


def _implementation(meta: Mapping[str, Any]) -> dict[str, ParamValue]:
    """``python_implementation`` (lower-cased) as a fingerprint param, when the file says."""
    implementation = _str(meta.get("python_implementation")).lower()
    return {"python_implementation": implementation} if implementation else {}


def first_three(names: Sequence[str]) -> str:
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")


def _lower_is_better(
    path: Path,
    name: str,
    unit: tuple[str, str, float],
    raw: Iterable[Sequence[float]],
    params: Mapping[str, ParamValue] | None = None,
) -> ResultBenchmark:
    """A benchmark of one lower-is-better metric, each repeat of ``raw`` (metric, unit,
    factor) scaled to it; ParseError where the scaled values cannot be summarised (1e308 s
    is finite, in ms it is not)."""
    metric, shown, factor = unit
    repeats = tuple(tuple(x * factor for x in rep) for rep in raw)
    if not math.isfinite(sum(abs(x) for rep in repeats for x in rep)):
        raise ParseError(f"{path}: {name}: its {metric} values are too large to summarise")
    metrics = (ResultMetric(metric, shown, Direction.LOWER_IS_BETTER, repeats),)
    return ResultBenchmark(name, metrics, params or {})


def _check_unique(names: Iterable[str], path: Path, key: str) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise ParseError(f"{path}: {key}: two entries named {n!r}")
        seen.add(n)


# --- pytest-benchmark -----------------------------------------------------------------------
def _parse_pytest_benchmark(doc: Mapping[str, Any], path: Path) -> ResultFile:
    notes: list[str] = []
    parsed: list[tuple[str, str, list[float], dict[str, ParamValue]]] = []
    no_data: list[str] = []
    for where, item in _items(doc, "benchmarks", path, "pytest-benchmark"):
        name = _str(item.get("name"))
        if not name:
            raise ParseError(f"{path}: {where}.name: missing or not a string")
        stats = _object(item, "stats", path, f"{where}.")
        if not stats:
            raise ParseError(f"{path}: {where}.stats: missing ({name})")
        if "data" in stats:
            if not (seconds := _numbers(stats["data"], path, f"{where}.stats.data", minimum=0.0)):
                raise ParseError(f"{path}: {where}.stats.data: empty ({name})")
        elif "median" in stats:
            seconds = [_number(stats["median"], path, f"{where}.stats.median", minimum=0.0)]
            no_data.append(name)
        else:
            raise ParseError(f"{path}: {where}.stats: no data and no median ({name})")
        options = _object(item, "options", path, f"{where}.")
        params: dict[str, ParamValue] = {}
        if timer := _str(options.get("timer")):
            params["timer"] = timer
        if isinstance(options.get("disable_gc"), bool):
            params["disable_gc"] = options["disable_gc"]
        parsed.append((name, _str(item.get("fullname")), seconds, params))
    counts = Counter(name for name, *_ in parsed)
    unique = [f if counts[n] > 1 and f else n for n, f, *_ in parsed]
    if repeated := sorted(n for n, k in counts.items() if k > 1):
        notes.append(
            f"named by fullname, their name being repeated in the file: {', '.join(repeated)}"
        )
    _check_unique(unique, path, "benchmarks")
    if no_data:
        notes.append(
            f"no stats.data (saved without --benchmark-save-data): the median alone, one "
            f"sample, for {first_three(no_data)}"
        )
    machine = _object(doc, "machine_info", path)
    raw_cpu = machine.get("cpu")
    cpu: dict[str, Any] = raw_cpu if isinstance(raw_cpu, dict) else {}
    system, arch = _str(machine.get("system")), _str(machine.get("machine"))
    model = _str(cpu.get("brand_raw")) or _str(machine.get("processor"))
    os_name = f"{system}-{arch}" if system and arch else ""
    python = _python_minor(machine.get("python_version"))
    release = _str(machine.get("release"))
    host = ResultHost(
        cpu_model=model,
        cpu_cores=_int(cpu.get("count")),
        os=os_name,
        os_release=release,
        python_version=python,
        device_kind="cpu",
    )
    info = _object(doc, "commit_info", path)
    commit = _commit(info.get("id"))
    branch = _str(info.get("branch"))
    if commit and info.get("dirty") is True:
        notes.append(f"commit_info: the checkout had uncommitted changes over {commit[:12]}")
    benchmarks = tuple(
        _lower_is_better(path, u, _TIME, (s,), p)
        for u, (_, _, s, p) in zip(unique, parsed, strict=True)
    )
    branch = "" if branch in ("(unknown)", "HEAD") else branch
    params = _implementation(machine)
    return ResultFile(
        FORMAT_PYTEST_BENCHMARK, path, benchmarks, host, params, commit, branch, tuple(notes)
    )


# --- pyperf ---------------------------------------------------------------------------------
_PYPERF_UNITS = {"second": _TIME, "byte": _MEMORY, "integer": _VALUE}


def _parse_pyperf(doc: Mapping[str, Any], path: Path) -> ResultFile:
    version = doc.get("version")
    if version not in ("1.0", 6):
        raise ParseError(
            f"{path}: version: pyperf JSON format {version!r}; perfgate reads 1.0 (pyperf >= "
            "1.0) and 6 (convert older files with python -m pyperf convert)"
        )
    suite = _object(doc, "metadata", path)
    benchmarks: list[ResultBenchmark] = []
    first: dict[str, Any] = {}
    for where, item in _items(doc, "benchmarks", path, "pyperf"):
        metadata = {**suite, **_object(item, "metadata", path, f"{where}.")}
        runs = item.get("runs")
        if not isinstance(runs, list):
            raise ParseError(f"{path}: {where}.runs: missing or not a list")
        name = _str(metadata.get("name"))
        if not name:
            raise ParseError(
                f"{path}: {where}.metadata.name: missing (pyperf names every benchmark)"
            )
        unit = ""
        repeats: list[list[float]] = []
        for j, run in enumerate(runs):
            rwhere = f"{where}.runs[{j}]"
            if not isinstance(run, dict):
                raise ParseError(f"{path}: {rwhere}: {kind(run)}, not an object")
            run_meta = {**metadata, **_object(run, "metadata", path, f"{rwhere}.")}
            run_unit = _str(run_meta.get("unit")) or "second"
            if unit and run_unit != unit:
                raise ParseError(f"{path}: {rwhere}.metadata.unit: {run_unit!r}, not {unit!r}")
            unit = run_unit
            if version == 6 and "values" not in run and "samples" in run:
                raise ParseError(f"{path}: {rwhere}: samples, not values (pyperf < 0.9.6)")
            values = _numbers(run.get("values", []), path, f"{rwhere}.values", minimum=0.0)
            if values:  # a run without values is a calibration run
                repeats.append(values)
        if unit not in _PYPERF_UNITS:
            raise ParseError(
                f"{path}: {where}.metadata.unit: {unit!r} (pyperf's are second, byte, integer)"
            )
        if not repeats:
            raise ParseError(f"{path}: {where}.runs: no run with values ({name})")
        benchmarks.append(_lower_is_better(path, name, _PYPERF_UNITS[unit], repeats))
        first = first or metadata
    _check_unique((b.name for b in benchmarks), path, "benchmarks")
    system_arch, release = _platform_os(_str(first.get("platform")))
    model = _str(first.get("cpu_model_name"))
    python = _python_minor(first.get("python_version"))
    host = ResultHost(
        cpu_model=model,
        cpu_cores=_int(first.get("cpu_count")),
        os=system_arch,
        os_release=release,
        python_version=python,
        device_kind="cpu",
    )
    return ResultFile(FORMAT_PYPERF, path, tuple(benchmarks), host, _implementation(first))


# --- asv ------------------------------------------------------------------------------------
_ASV_TYPES = {"time": _TIME, "memory": _MEMORY, "peakmemory": _MEMORY, "track": _VALUE}
_ASV_PREFIXES = (
    ("timeraw_", "time"),
    ("time_", "time"),
    ("peakmem_", "peakmemory"),
    ("mem_", "memory"),
    ("track_", "track"),
)


def _asv_declared(path: Path, notes: list[str]) -> dict[str, Any]:
    """``benchmarks.json`` beside the machine folder (``.asv/results/benchmarks.json``), or
    {} when it is not there or cannot be read."""
    declared = path.parent.parent / "benchmarks.json"
    if not declared.is_file():
        return {}
    try:
        doc = json.loads(declared.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        notes.append(f"{declared}: not readable JSON; types taken from the benchmark names")
        return {}
    return doc if isinstance(doc, dict) else {}


def _asv_type(name: str, declared: Mapping[str, Any]) -> tuple[str, str]:
    """The benchmark's type and the unit asv declares for it ("" when not declared)."""
    entry = declared.get(name)
    if isinstance(entry, dict) and _str(entry.get("type")) in _ASV_TYPES:
        unit = _str(entry.get("unit"))
        return _str(entry["type"]), "" if unit == "unit" else unit
    short = name.rsplit(".", 1)[-1]
    return next(((k, "") for prefix, k in _ASV_PREFIXES if short.startswith(prefix)), ("", ""))


def _parse_asv(doc: Mapping[str, Any], path: Path) -> ResultFile:
    version = doc.get("version")
    if version != 2:
        raise ParseError(
            f"{path}: version: asv results format {version!r}; perfgate reads version 2 "
            "(asv >= 0.5; asv update rewrites older results)"
        )
    columns = doc.get("result_columns")
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise ParseError(f"{path}: result_columns: missing or not a list of names")
    if "result" not in columns:
        raise ParseError(f"{path}: result_columns: no 'result' column")
    results = _object(doc, "results", path)
    if not results:
        raise ParseError(f"{path}: results: missing or empty, no benchmark to record")
    at = {c: i for i, c in enumerate(columns)}
    notes: list[str] = []
    declared = _asv_declared(path, notes)
    benchmarks: list[ResultBenchmark] = []
    skipped: list[str] = []
    untyped: list[str] = []
    without_samples: list[str] = []
    for name, row in results.items():
        where = f"results.{name}"
        if not isinstance(row, list):
            raise ParseError(f"{path}: {where}: {kind(row)}, not a row of result_columns")
        cells = {c: row[i] for c, i in at.items() if i < len(row)}
        kind_, declared_unit = _asv_type(name, declared)
        if not kind_:
            untyped.append(name)
            continue
        values = cells.get("result")
        params = cells.get("params") or []
        if not isinstance(params, list) or not all(isinstance(p, list) for p in params):
            raise ParseError(f"{path}: {where}: params: not a list of parameter lists")
        combos = list(itertools.product(*params))
        if values is None:
            skipped.append(name)
            continue
        if not isinstance(values, list):
            raise ParseError(f"{path}: {where}: result: {kind(values)}, not a list")
        if len(values) != len(combos):
            raise ParseError(
                f"{path}: {where}: result: {len(values)} values for {len(combos)} parameter "
                "combinations"
            )
        samples = cells.get("samples")
        if samples is not None and (not isinstance(samples, list) or len(samples) != len(combos)):
            raise ParseError(f"{path}: {where}: samples: not one entry per parameter combination")
        metric, unit, factor = _ASV_TYPES[kind_]
        unit = declared_unit if kind_ == "track" else unit
        for j, (combo, value) in enumerate(zip(combos, values, strict=True)):
            label = f"{name}({', '.join(str(p) for p in combo)})" if combo else name
            if value is None or (isinstance(value, float) and not math.isfinite(value)):
                skipped.append(label)  # asv writes null (failed) or NaN (skipped)
                continue
            low = None if kind_ == "track" else 0.0  # a time or a memory size is never < 0
            if samples is not None and samples[j]:
                raw = _numbers(samples[j], path, f"{where}: samples[{j}]", minimum=low)
            else:
                raw = [_number(value, path, f"{where}: result[{j}]", minimum=low)]
                if kind_ == "time":
                    without_samples.append(label)
            benchmarks.append(_lower_is_better(path, label, (metric, unit, factor), (raw,)))
    if untyped:
        notes.append(
            f"not recorded, type unknown (no benchmarks.json beside the results and no "
            f"time_/mem_/peakmem_/track_ prefix): {first_three(untyped)}"
        )
    if skipped:
        notes.append(f"not recorded, no result (failed or skipped in asv): {first_three(skipped)}")
    if not benchmarks:
        raise ParseError(f"{path}: results: no benchmark with a result to record")
    if without_samples:
        notes.append(
            "no samples (asv run without --record-samples): the result, asv's median, alone "
            f"for {first_three(without_samples)}"
        )
    notes.append("asv pools its processes' samples: each benchmark is one repeat")
    machine = _object(doc, "params", path)
    os_name, arch, num_cpu = (_str(machine.get(k)) for k in ("os", "arch", "num_cpu"))
    cores = _int(machine.get("num_cpu")) or (int(num_cpu) if num_cpu.isdigit() else 0)
    system = f"{os_name.split()[0]}-{arch}" if os_name and arch else ""
    release = " ".join(os_name.split()[1:])
    python = _python_minor(doc.get("python"))
    host = ResultHost(
        cpu_model=_str(machine.get("cpu")),
        cpu_cores=cores,
        os=system,
        os_release=release,
        python_version=python,
        device_kind="cpu",
    )
    named = (("asv_env", doc.get("env_name")), ("asv_machine", machine.get("machine")))
    file_params: dict[str, ParamValue] = {k: _str(v) for k, v in named if _str(v)}
    if not (commit := _commit(doc.get("commit_hash"))):
        raise ParseError(f"{path}: commit_hash: missing or not a commit hash")
    return ResultFile(
        FORMAT_ASV, path, tuple(benchmarks), host, file_params, commit, notes=tuple(notes)
    )


# --- the plain metrics file ------------------------------------------------------------------
def _metric(
    path: Path,
    where: str,
    name: str,
    repeats: list[list[float]],
    unit: str | None,
    direction: str | None,
) -> ResultMetric:
    """One metric of a metrics file, checked against the catalogue and put in ms.

    ``where`` names the item in messages: ``metrics[2]`` (JSON) or ``line 3`` (CSV).
    """
    dot = "." if where.startswith("metrics[") else ": "
    if not name:
        raise ParseError(f"{path}: {where}{dot}name: missing or not a string")
    if not any(repeats):
        raise ParseError(f"{path}: {where} ({name}): no value")
    at = f"{path}: {where}{dot}"
    parsed: Direction | None = None
    if direction is not None:
        try:
            parsed = Direction(direction.strip().lower())
        except ValueError:
            raise ParseError(
                f"{at}direction ({name}): {direction!r}, not 'lower' or 'higher'"
            ) from None
    factor = 1.0
    shown = (unit or "").strip()
    if name.endswith("_ms"):
        if shown and shown not in TO_MS:
            raise ParseError(
                f"{at}unit ({name}): {shown!r} is not a time, and a *_ms metric is one "
                "(s, ms, us, ns)"
            )
        factor = TO_MS.get(shown, 1.0)
        shown = "ms"
    spec = lookup(name)
    if spec is not None:
        if shown and spec.unit and shown != spec.unit:
            raise ParseError(
                f"{at}unit ({name}): {shown!r}; perfgate's catalogue records {name} in "
                f"{spec.unit!r}"
            )
        if parsed is not None and parsed is not spec.direction:
            raise ParseError(
                f"{at}direction ({name}): {parsed.value!r}; perfgate's catalogue says "
                f"{spec.direction.value} is better"
            )
        shown, parsed = spec.unit, None
    elif parsed is None:
        raise ParseError(
            f"{at}direction ({name}): missing; perfgate's catalogue does not know this "
            "metric, so say 'lower' or 'higher' (which is better)"
        )
    scaled = tuple(tuple(x * factor for x in rep) for rep in repeats if rep)
    if never_negative(shown) and (low := min(min(rep) for rep in scaled)) < 0:
        given = (unit or shown).strip()
        raise ParseError(f"{at}value ({name}): {low / factor:g} {given} is negative")
    if not math.isfinite(sum(abs(x) for rep in scaled for x in rep)):
        raise ParseError(f"{at}values ({name}): too large to summarise (their sum overflows)")
    return ResultMetric(name, shown, parsed, scaled)


def _parse_metrics_json(doc: Mapping[str, Any], path: Path) -> ResultFile:
    metrics: list[ResultMetric] = []
    for where, item in _items(doc, "metrics", path, "metrics"):
        name = _str(item.get("name"))
        given = [k for k in ("value", "values", "repeats") if k in item]
        if len(given) != 1:
            raise ParseError(
                f"{path}: {where} ({name or '?'}): give one of value, values or repeats"
                + (f", not {' and '.join(given)}" if given else "")
            )
        if "value" in item:
            repeats = [[_number(item["value"], path, f"{where}.value")]]
        elif "values" in item:
            repeats = [_numbers(item["values"], path, f"{where}.values")]
        elif isinstance(raw := item["repeats"], list):
            repeats = [_numbers(r, path, f"{where}.repeats[{j}]") for j, r in enumerate(raw)]
        else:
            raise ParseError(f"{path}: {where}.repeats: {kind(raw)}, not a list of lists")
        unit, direction = item.get("unit"), item.get("direction")
        for k, v in (("unit", unit), ("direction", direction)):
            if v is not None and not isinstance(v, str):
                raise ParseError(f"{path}: {where}.{k} ({name}): {kind(v)}, not a string")
        metrics.append(_metric(path, where, name, repeats, unit, direction))
    _check_unique((m.name for m in metrics), path, "metrics")
    device = doc.get("device")
    if device is not None and (
        not isinstance(device, str) or not re.match(r"^[a-z][a-z0-9_]{0,15}$", device.strip())
    ):
        raise ParseError(
            f"{path}: device: {kind(device)}, not a device kind such as npu, cuda, cpu"
        )
    params = doc.get("params")
    if params is not None and not isinstance(params, dict):
        raise ParseError(f"{path}: params: {kind(params)}, not an object of name: value")
    for k, v in (params or {}).items():
        if not isinstance(v, (str, int, float, bool)):
            raise ParseError(f"{path}: params.{k}: {kind(v)}, not a string, number or boolean")
    benchmarks = (ResultBenchmark("", tuple(metrics)),)
    host = ResultHost(device_kind=(device or "").strip())
    named = {str(k): v for k, v in (params or {}).items()}
    return ResultFile(FORMAT_METRICS, path, benchmarks, host, named)


_SPLIT = re.compile(r"[;\s]+")


def _csv_rows(text: str) -> Iterator[tuple[int, list[str]]]:
    lines = [
        (n, line)
        for n, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    reader = csv.reader([line for _, line in lines])
    yield from zip((n for n, _ in lines), reader, strict=True)


def _parse_metrics_csv(path: Path, text: str) -> ResultFile:
    rows = _csv_rows(text)
    samples: dict[str, dict[int, list[float]]] = {}  # name -> repeat -> values
    meta: dict[str, dict[str, str | None]] = {}  # name -> unit and direction
    first_line: dict[str, int] = {}
    try:
        _, header = next(rows, (0, None))
        if header is None:
            raise ParseError(f"{path}: empty file, no header (name,value,unit,direction)")
        columns = [c.strip().lower() for c in header]
        value_col = "value" if "value" in columns else "values"
        if "name" not in columns or value_col not in columns:
            raise ParseError(
                f"{path}: header: no name and value columns (name,value,unit,direction)"
            )
        index = {c: i for i, c in enumerate(columns)}
        for n, row in rows:
            cells = {c: row[i].strip() for c, i in index.items() if i < len(row)}
            where = f"{path}: line {n}: "
            name = cells.get("name") or ""
            if not name:
                raise ParseError(f"{where}name: empty")
            if not (items := [x for x in _SPLIT.split(cells.get(value_col) or "") if x]):
                raise ParseError(f"{where}{value_col} ({name}): empty")
            values = []
            for item in items:
                try:
                    value = float(item)
                except ValueError:
                    raise ParseError(
                        f"{where}{value_col} ({name}): {item[:40]!r} is not a number"
                    ) from None
                if not math.isfinite(value):
                    raise ParseError(f"{where}{value_col} ({name}): {item} is not finite")
                values.append(value)
            repeat = cells.get("repeat") or "0"
            if not repeat.isdigit():
                raise ParseError(f"{where}repeat ({name}): {repeat!r}, not a whole number")
            if name not in samples:
                samples[name], first_line[name] = {}, n
                meta[name] = {"unit": None, "direction": None}
            for column, seen in meta[name].items():
                mine = cells.get(column) or None
                if mine is not None and seen is not None and mine != seen:
                    raise ParseError(
                        f"{where}{column} ({name}): {mine!r}, not {seen!r} as on line "
                        f"{first_line[name]}"
                    )
                meta[name][column] = seen or mine
            samples[name].setdefault(int(repeat), []).extend(values)
    except csv.Error as exc:
        raise ParseError(f"{path}: not CSV ({exc})") from None
    if not samples:
        raise ParseError(f"{path}: no metric rows under the header")
    metrics = tuple(
        _metric(path, f"line {first_line[name]}", name, [s[k] for k in sorted(s)], **meta[name])
        for name, s in samples.items()
    )
    return ResultFile(FORMAT_METRICS, path, (ResultBenchmark("", metrics),), ResultHost(), {})


_PARSERS: dict[str, tuple[str, Callable[[Mapping[str, Any], Path], ResultFile]]] = {
    FORMAT_PYTEST_BENCHMARK: ("pytest-benchmark", _parse_pytest_benchmark),
    FORMAT_PYPERF: ("pyperf", _parse_pyperf),
    FORMAT_ASV: ("asv results", _parse_asv),
    FORMAT_METRICS: ("metrics", _parse_metrics_json),
}
