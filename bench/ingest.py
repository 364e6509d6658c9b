"""Ingest speed and memory of perfgate's Ascend parser, next to msprof-analyze and raw parsing.

Three inputs, each a torch_npu text export:

1. the real 2-rank Level1 fixture (``shared/fixtures/ascend/msinsight_pt_text_level1_2rank``,
   else its copy under ``tests/data/ascend/``), about 6 MB;
2. one rank whose ``trace_view.json`` is scaled to ``--size-mb`` (default 1000 MB) by
   repeating the fixture's events with shifted ``ts`` and step numbers (one
   ``ProfilerStep#`` per copy), *without* ``step_trace_time.csv``, so perfgate takes the step
   breakdown from the trace (``perfgate.parsers.ascend.trace_view``);
3. one rank whose ``kernel_details.csv`` is scaled to ``--size-mb`` by repeating the
   fixture's rows with new ``Step Id`` values (and a ``step_trace_time.csv`` row per step).

For each input, every measurement in a fresh subprocess of its own:

- perfgate: ``perfgate.parsers.ascend.parse_ascend(Path(dir))``; wall time of that call,
  and the process's peak RSS (interpreter and imports included);
- msprof-analyze: ``msprof-analyze advisor all -d DIR -o TMP -l en --force --agent`` with a
  timeout (``--msprof-timeout``, 600 s) and a memory cap (``--msprof-max-rss-mb``, 8000 MB,
  so that a shared machine is not pushed into swap or the OOM killer); wall time of the
  command (its own start-up included) and peak memory: the larger of
  ``getrusage(RUSAGE_CHILDREN)`` (its biggest process) and the sum of PSS over its process
  tree sampled every 0.2 s with psutil (installed with msprof-analyze);
- the raw parse limit, for 2: ``orjson.loads`` of the whole ``trace_view.json``; for 3:
  ``pandas.read_csv(path, usecols=...)`` of ``kernel_details.csv`` with the columns
  perfgate's parser uses.

Targets (perfgate on inputs 2 and 3): throughput >= 0.5 x the raw limit's, peak RSS <= 500 MB.

4. kernel_details.csv readers side by side: a ``--size-mb`` kernel_details.csv made from the
   fixture's rows in a temporary directory (free disk checked first, removed afterwards),
   read ``--repeats`` times (default 3, interleaved) each in a fresh process by perfgate's
   reader (``text._read_kernels``: pandas in blocks, grouped and summed), plain pandas
   (``read_csv`` with the same columns, whole file and ``chunksize``), the hand-written
   reader it replaced (``git show`` of the last text.py that called ``numpy.loadtxt``,
   imported as a module copy) and msprof-analyze's own reading of the file (compare tools:
   ``FileManager.read_csv_file(path, KernelDetailsBean)``, a library call) when installed;
   median wall time and peak RSS, a reader stopped above ``--reader-max-rss-mb`` (4000).
   Target: perfgate >= 0.95 x plain whole-file pandas' speed at <= 500 MB peak RSS.
   ``--readers-only`` runs just this part.

The scaled inputs are made once and cached in ``/tmp/perfgate-bench/`` (keyed by size).
Run from the repository root with the virtual environment active::

    python bench/ingest.py                    # 1000 MB inputs: ~4-5 min, mostly msprof
    python bench/ingest.py --size-mb 100      # quick check
    python bench/ingest.py --skip-msprof      # perfgate and the raw limits only
    python bench/ingest.py --readers-only     # input 4 only: ~2.5 min at 1000 MB

Exit status 0 when every perfgate and raw measurement completed (whatever the numbers;
msprof-analyze timing out is a result, not a failure), 1 otherwise.
"""

from __future__ import annotations

import argparse
import csv
import importlib.metadata
import io
import json
import os
import platform
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CACHE = Path("/tmp/perfgate-bench")
FIXTURE_NAME = "msinsight_pt_text_level1_2rank"
FIXTURE_CANDIDATES = (
    REPO.parent / "shared" / "fixtures" / "ascend" / FIXTURE_NAME,
    Path("/work/shared/fixtures/ascend") / FIXTURE_NAME,
    REPO / "tests" / "data" / "ascend" / FIXTURE_NAME,
)
OUTPUT = "ASCEND_PROFILER_OUTPUT"
MB = 1_000_000
THROUGHPUT_TARGET = 0.5
RSS_TARGET_MB = 500.0
COMPLETE = ".complete"

# kernel_details columns perfgate's parser reads besides the PMU metric columns (every
# column not in its list of standard columns); see perfgate/parsers/ascend/text.py _read_kernels.
KERNEL_KEY_COLUMNS = ("Step Id", "Name", "Type", "Accelerator Core", "Duration(us)", "Input Shapes")


def out(line: str = "") -> None:
    print(line, flush=True)


# --- inputs ---------------------------------------------------------------------------------


def fixture_dir() -> Path:
    for candidate in FIXTURE_CANDIDATES:
        if (candidate / "rank0_ascend_pt" / OUTPUT / "trace_view.json").is_file():
            return candidate
    raise SystemExit(f"no {FIXTURE_NAME} fixture in {[str(c) for c in FIXTURE_CANDIDATES]}")


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _copy_rank(src: Path, dst: Path, skip: Sequence[str]) -> None:
    """Copy a rank dir (writable), leaving out the named ASCEND_PROFILER_OUTPUT files."""
    shutil.copytree(src, dst, ignore=lambda d, names: [n for n in names if n in skip])
    for p in [dst, *dst.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)


def _ts_ns(ts: str) -> int:
    whole, _, frac = ts.partition(".")
    return int(whole) * 1000 + int((frac + "000")[:3])


def scale_trace_view(src: Path, dst: Path, target_bytes: int) -> int:
    """Write ``dst``: the metadata events of ``src`` once, then its other events repeated
    until ``target_bytes``, each copy shifted in time by the trace's span (+1 ms) and its
    ``ProfilerStep#N`` renamed to ``#N+i``. Single line, as torch_npu writes it. Returns
    the number of copies."""
    events = json.loads(src.read_bytes())
    timed = [e for e in events if isinstance(e.get("ts"), str)]
    lo = min(_ts_ns(e["ts"]) for e in timed)
    hi = max(_ts_ns(e["ts"]) + round(float(e.get("dur", 0)) * 1000) for e in timed)
    period = hi - lo + 1_000_000
    meta = ", ".join(json.dumps(e, ensure_ascii=False) for e in events if e.get("ph") == "M")
    # Each event as text with a hole for its ts: (before, after, ts_ns, step number or None).
    parts: list[tuple[str, str, int, int | None]] = []
    fixed: list[str] = []
    for e in events:
        if e.get("ph") == "M":
            continue
        text = json.dumps(e, ensure_ascii=False)
        if not isinstance(e.get("ts"), str):
            fixed.append(text)
            continue
        before, after = text.split(f'"ts": "{e["ts"]}"', 1)
        step: int | None = None
        name = e.get("name", "")
        if isinstance(name, str) and name.startswith("ProfilerStep#"):
            step = int(name.split("#", 1)[1])
            before = before.replace(f'"{name}"', '"ProfilerStep#{}"')
            after = after.replace(f'"{name}"', '"ProfilerStep#{}"')
        parts.append((before, after, _ts_ns(e["ts"]), step))
    copies = 0
    written = 0
    tmp = dst.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        written += f.write("[" + meta)
        while written < target_bytes:
            shift = copies * period
            texts = []
            for before, after, ts, step in parts:
                v = ts + shift
                text = f'{before}"ts": "{v // 1000}.{v % 1000:03d}"{after}'
                if step is not None:
                    text = text.replace('"ProfilerStep#{}"', f'"ProfilerStep#{step + copies}"')
                texts.append(text)
            if copies == 0:
                texts.extend(fixed)
            written += f.write(", " + ", ".join(texts))
            copies += 1
        f.write("]")
    tmp.replace(dst)
    return copies


def scale_kernel_details(src_dir: Path, dst_dir: Path, target_bytes: int) -> int:
    """Write ``dst_dir/kernel_details.csv``: the header, then the fixture's rows repeated with
    ``Step Id`` 50+i and ``Start Time(us)`` shifted per copy, up to ``target_bytes``; and a
    ``step_trace_time.csv`` with the fixture's row once per step. Returns the copies."""
    with (src_dir / "kernel_details.csv").open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        rows = [r for r in reader if r]
    i_step = header.index("Step Id")
    i_start = header.index("Start Time(us)")
    starts = [_ts_ns(r[i_start].strip()) for r in rows]
    period = max(starts) - min(starts) + 10_000_000
    first_step = int(rows[0][i_step])
    # Rows as CSV text with holes for the two changing cells.
    templates = []
    for r, start in zip(rows, starts, strict=True):
        cells = list(r)
        cells[i_step] = "\x00STEP\x00"
        cells[i_start] = "\x00START\x00"
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow(cells)
        before, rest = buf.getvalue().split("\x00STEP\x00", 1)
        middle, after = rest.split("\x00START\x00", 1)
        templates.append((before, middle, after, start))
    tail = "\t" if rows[0][i_start].endswith("\t") else ""
    copies = 0
    tmp = dst_dir / "kernel_details.csv.tmp"
    with tmp.open("w", encoding="utf-8", newline="") as f:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow(header)
        written = f.write(buf.getvalue())
        while written < target_bytes:
            step = str(first_step + copies)
            shift = copies * period
            chunk = []
            for before, middle, after, start in templates:
                v = start + shift
                chunk.append(f"{before}{step}{middle}{v // 1000}.{v % 1000:03d}{tail}{after}")
            written += f.write("".join(chunk))
            copies += 1
    tmp.replace(dst_dir / "kernel_details.csv")
    with (src_dir / "step_trace_time.csv").open(newline="", encoding="utf-8") as f:
        step_rows = list(csv.reader(f))
    step_header, step_row = step_rows[0], step_rows[1]
    i = step_header.index("Step")
    with (dst_dir / "step_trace_time.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(step_header)
        for k in range(copies):
            row = list(step_row)
            row[i] = str(first_step + k)
            writer.writerow(row)
    return copies


def make_trace_view_input(fixture: Path, size_mb: int) -> tuple[Path, Path, str]:
    """(dir, trace file, how it was made); cached."""
    top = CACHE / f"trace_view_{size_mb}mb"
    rank = top / "rank0_ascend_pt"
    trace = rank / OUTPUT / "trace_view.json"
    if (top / COMPLETE).is_file():
        return top, trace, (top / COMPLETE).read_text().strip() + " (cached)"
    shutil.rmtree(top, ignore_errors=True)
    started = time.perf_counter()
    _copy_rank(fixture / "rank0_ascend_pt", rank, ("step_trace_time.csv", "trace_view.json"))
    copies = scale_trace_view(
        fixture / "rank0_ascend_pt" / OUTPUT / "trace_view.json", trace, size_mb * MB
    )
    how = f"{copies} copies of the rank0 events, {copies} steps"
    (top / COMPLETE).write_text(how + "\n")
    return top, trace, f"{how}, made in {time.perf_counter() - started:.0f} s"


def make_kernel_details_input(fixture: Path, size_mb: int) -> tuple[Path, Path, str]:
    top = CACHE / f"kernel_details_{size_mb}mb"
    rank = top / "rank0_ascend_pt"
    kernels = rank / OUTPUT / "kernel_details.csv"
    if (top / COMPLETE).is_file():
        return top, kernels, (top / COMPLETE).read_text().strip() + " (cached)"
    shutil.rmtree(top, ignore_errors=True)
    started = time.perf_counter()
    _copy_rank(fixture / "rank0_ascend_pt", rank, ("kernel_details.csv", "step_trace_time.csv"))
    copies = scale_kernel_details(fixture / "rank0_ascend_pt" / OUTPUT, rank / OUTPUT, size_mb * MB)
    how = f"{copies} copies of the rank0 rows, {copies} steps"
    (top / COMPLETE).write_text(how + "\n")
    return top, kernels, f"{how}, made in {time.perf_counter() - started:.0f} s"


# --- measurements, each in a fresh child process --------------------------------------------


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def child_perfgate(path: Path) -> dict[str, Any]:
    before = _rss_mb()
    from perfgate.parsers.ascend import parse_ascend

    started = time.perf_counter()
    summaries = parse_ascend(path)
    wall = time.perf_counter() - started
    first = summaries[0]
    step = first.breakdown.step_ms if first.breakdown else float("nan")
    what = (
        f"{len(summaries)} rank(s); rank0 {len(first.step_times_ms)} steps,"
        f" step {step:.3f} ms, {len(first.ops)} ops"
    )
    return {"wall": wall, "rss": _rss_mb(), "rss_before": before, "what": what}


def child_orjson(path: Path) -> dict[str, Any]:
    loads: Any
    try:
        import orjson

        loads, name = orjson.loads, "orjson.loads"
    except ImportError:
        loads, name = json.loads, "json.loads (no orjson)"
    before = _rss_mb()
    started = time.perf_counter()
    with path.open("rb") as f:
        events = loads(f.read())
    wall = time.perf_counter() - started
    return {
        "wall": wall,
        "rss": _rss_mb(),
        "rss_before": before,
        "what": f"{len(events)} events",
        "name": name,
    }


def kernel_usecols(path: Path) -> list[str]:
    from perfgate.parsers.ascend.text import _KERNEL_STANDARD as standard

    with path.open(newline="", encoding="utf-8") as f:
        header = next(csv.reader(f))
    return [c for c in header if c in KERNEL_KEY_COLUMNS or c.lower() not in standard]


def child_pandas(path: Path) -> dict[str, Any]:
    import pandas as pd

    cols = kernel_usecols(path)
    before = _rss_mb()
    started = time.perf_counter()
    frame = pd.read_csv(path, usecols=cols)
    wall = time.perf_counter() - started
    what = f"{len(frame)} rows x {len(cols)} of the columns"
    return {"wall": wall, "rss": _rss_mb(), "rss_before": before, "what": what}


def child_msprof(path: Path, timeout: float, max_rss_mb: float) -> dict[str, Any]:
    exe = shutil.which("msprof-analyze") or str(Path(sys.executable).parent / "msprof-analyze")
    with tempfile.TemporaryDirectory(prefix="perfgate-bench-msprof-") as tmp:
        argv = [exe, "advisor", "all", "-d", str(path), "-o", tmp, "-l", "en", "--force", "--agent"]
        env = dict(os.environ, TMPDIR=tmp)  # its log file goes to the temp dir
        log = Path(tmp) / "msprof-output.txt"  # a file, not a pipe: nothing drains a pipe
        with log.open("wb") as sink:
            started = time.perf_counter()
            proc = subprocess.Popen(
                argv,
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=tmp,
                start_new_session=True,
            )
            tree_peak, capped = _watch_tree(proc, started + timeout, max_rss_mb)
            stopped = proc.poll() is None
            if stopped:
                os.killpg(proc.pid, signal.SIGKILL)  # its own session: msprof and its workers
            proc.wait()
            wall = time.perf_counter() - started
        output = log.read_text(encoding="utf-8", errors="replace")
    biggest = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    status = ""
    for line in output.splitlines():
        if line.startswith('{"status"'):
            try:
                status = str(json.loads(line).get("status"))
            except ValueError:
                status = "unparsable agent output"
    if stopped and capped:
        what = f"stopped at the {max_rss_mb:.0f} MB memory cap after {wall:.0f} s"
    elif stopped:
        what = f"timed out after {timeout:.0f} s"
    else:
        what = f"rc {proc.returncode}, {status or 'no agent JSON'}"
    return {
        "wall": wall,
        "rss": max(biggest, tree_peak),
        "what": what,
        "timed_out": stopped,
        "ok": proc.returncode == 0 and not stopped,
    }


def _watch_tree(
    proc: subprocess.Popen[Any], deadline: float, max_rss_mb: float
) -> tuple[float, bool]:
    """Wait for ``proc`` until ``deadline`` or until its process tree holds more than
    ``max_rss_mb``. Returns (peak of the tree's summed memory in MB, whether the cap was
    hit). The sum is of PSS (shared pages split between the processes that map them) where
    psutil can read it, else of RSS; 0 without psutil."""
    try:
        import psutil
    except ImportError:
        while proc.poll() is None and time.perf_counter() < deadline:
            time.sleep(0.2)
        return 0.0, False
    peak = 0.0
    try:
        root = psutil.Process(proc.pid)
    except psutil.Error:
        return 0.0, False
    while proc.poll() is None and time.perf_counter() < deadline:
        total = 0
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            tree = []
        for p in tree:
            try:
                info = p.memory_full_info()
                total += getattr(info, "pss", info.rss)
            except psutil.AccessDenied:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            except psutil.Error:
                pass
        peak = max(peak, total / 2**20)
        if peak > max_rss_mb:
            return peak, True
        time.sleep(0.2)
    return peak, False


CHILDREN = {"perfgate": child_perfgate, "orjson": child_orjson, "pandas": child_pandas}


def measure(kind: str, path: Path, timeout: float = 0, max_rss_mb: float = 0) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter; its result dict (``error`` on failure)."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", kind, str(path)]
    if kind == "msprof":
        argv += ["--msprof-timeout", str(timeout), "--msprof-max-rss-mb", str(max_rss_mb)]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            result: dict[str, Any] = json.loads(line)
            return result
    err = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"error": f"rc {proc.returncode}: {err}"}


# --- kernel_details.csv readers side by side (input 4) ---------------------------------------
#
# One kernel_details.csv of --size-mb, made in a temporary directory (removed afterwards), read
# by each reader in a fresh process --repeats times: wall time of the read alone (median) and
# the process's peak RSS (the largest; interpreter and imports included).

READER_TARGET = 0.95
READERS = ("perfgate", "pandas_whole", "pandas_chunked", "perfgate_before", "msprof_read")
READER_NAMES = {
    "perfgate": "perfgate text._read_kernels (pandas blocks)",
    "pandas_whole": "pandas.read_csv usecols (whole file)",
    "pandas_chunked": "pandas.read_csv usecols chunksize=100000",
    "perfgate_before": "perfgate before ({rev}, hand-written)",
    "msprof_read": "msprof-analyze FileManager.read_csv_file",
}
TEXT_MODULE = "perfgate/parsers/ascend/text.py"


def before_revision() -> str | None:
    """The commit whose text.py holds the hand-written reader: HEAD while it does, else the
    parent of the last commit that changed how often it calls numpy.loadtxt."""

    def git(*argv: str) -> str:
        return subprocess.run(
            ["git", *argv], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout

    try:
        if "np.loadtxt(" in git("show", f"HEAD:{TEXT_MODULE}"):
            return "HEAD"
        last = git("log", "-1", "--format=%H", "-S", "np.loadtxt(", "--", TEXT_MODULE).strip()
        return f"{last[:12]}^" if last else None
    except (OSError, subprocess.CalledProcessError):
        return None


def write_before_module(rev: str, where: Path) -> Path:
    source = subprocess.run(
        ["git", "show", f"{rev}:{TEXT_MODULE}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = where / "perfgate_text_before.py"
    path.write_text(source, encoding="utf-8")
    return path


def child_reader(kind: str, path: Path, extra: str) -> dict[str, Any]:
    """One read of ``path`` by reader ``kind``; ``extra`` is the before-module file."""
    import importlib.util

    import pandas as pd

    from perfgate.parsers.ascend import text

    columns = kernel_usecols(path)
    read: Any
    if kind == "perfgate":
        read = lambda: text._read_kernels(path, str(path), 1)  # noqa: E731
    elif kind == "perfgate_before":
        spec = importlib.util.spec_from_file_location("perfgate_text_before", extra)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["perfgate_text_before"] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
        read = lambda: module._read_kernels(path, str(path), 1)  # noqa: E731
    elif kind == "pandas_whole":
        read = lambda: pd.read_csv(path, usecols=columns)  # noqa: E731
    elif kind == "pandas_chunked":

        def read() -> int:
            rows = 0
            with pd.read_csv(path, usecols=columns, chunksize=100_000) as chunks:
                for frame in chunks:
                    rows += len(frame)
            return rows

    elif kind == "msprof_read":
        # msprof-analyze compare's reading of kernel_details.csv (npu_profiling_parser.py
        # _read_csv_data): csv.DictReader, one KernelDetailsBean per row, all kept.
        from msprof_analyze.compare_tools.compare_backend.compare_bean.origin_data_bean.kernel_details_bean import (  # type: ignore[import-untyped]  # noqa: E501
            KernelDetailsBean,
        )
        from msprof_analyze.prof_common.file_manager import (  # type: ignore[import-untyped]
            FileManager,
        )

        read = lambda: FileManager.read_csv_file(str(path), KernelDetailsBean)  # noqa: E731
    else:
        raise SystemExit(f"unknown reader {kind}")
    before = _rss_mb()
    started = time.perf_counter()
    got = read()
    wall = time.perf_counter() - started
    if kind.startswith("perfgate"):
        what = f"{got.rows} rows, {len(got.ops)} ops"
    elif kind == "pandas_whole":
        what = f"{len(got)} rows x {len(columns)} columns"
    else:
        what = f"{got if isinstance(got, int) else len(got)} rows"
    return {"wall": wall, "rss": _rss_mb(), "rss_before": before, "what": what}


def measure_reader(kind: str, path: Path, extra: str, max_rss_mb: float) -> dict[str, Any]:
    """One reader run in a fresh interpreter, stopped when its memory passes ``max_rss_mb``."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--child-reader", kind, str(path)]
    argv += ["--before-module", extra]
    with tempfile.TemporaryFile() as sink:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, cwd=REPO)
        peak, capped = _watch_tree(proc, started + 1800, max_rss_mb)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        wall = time.perf_counter() - started
        sink.seek(0)
        output = sink.read().decode("utf-8", errors="replace")
    if capped:
        return {
            "error": f"stopped at the {max_rss_mb:.0f} MB memory cap after {wall:.0f} s",
            "capped": True,
            "rss": peak,
        }
    for line in reversed(output.splitlines()):
        if line.startswith("{"):
            result: dict[str, Any] = json.loads(line)
            return result
    last = (output.strip().splitlines() or ["no output"])[-1]
    return {"error": f"rc {proc.returncode}: {last}"}


def run_readers(fixture: Path, args: Any) -> bool:
    """Input 4: the table of kernel_details.csv readers. Returns whether perfgate's reader
    and plain pandas were measured."""
    size = args.size_mb * MB
    out(
        f"input 4: kernel_details.csv of {args.size_mb} MB, read by each reader "
        f"{args.repeats}x in a fresh process"
    )
    with tempfile.TemporaryDirectory(prefix="perfgate-bench-readers-") as tmp:
        free = shutil.disk_usage(tmp).free
        out(f"  free disk in {tmp}: {free / MB:.0f} MB (needs ~{1.1 * size / MB:.0f} MB)")
        if free < 1.2 * size:
            out("  not enough free disk; input 4 skipped")
            return False
        started = time.perf_counter()
        copies = scale_kernel_details(fixture / "rank0_ascend_pt" / OUTPUT, Path(tmp), size)
        path = Path(tmp) / "kernel_details.csv"
        file_mb = path.stat().st_size / MB
        out(
            f"  made {path.name}: {copies} copies of the fixture's rows, {file_mb:.0f} MB, "
            f"in {time.perf_counter() - started:.0f} s"
        )
        rev = before_revision()
        extra = str(write_before_module(rev, Path(tmp))) if rev else ""
        kinds = [k for k in READERS if k != "perfgate_before" or rev]
        if version("msprof-analyze") == "not installed" or args.skip_msprof:
            kinds.remove("msprof_read")
        results: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
        for round_no in range(args.repeats):  # interleaved: load drift hits every reader
            for kind in kinds:
                if results[kind] and "error" in results[kind][-1]:
                    continue  # a capped or failed reader is not run again
                out(f"  round {round_no + 1}: {kind} ...")
                results[kind].append(measure_reader(kind, path, extra, args.reader_max_rss_mb))
    out("")
    print_reader_table(results, file_mb, rev or "-")
    ours, plain = results.get("perfgate", []), results.get("pandas_whole", [])
    return all("error" not in r for r in (*ours, *plain))


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def print_reader_table(results: dict[str, list[dict[str, Any]]], file_mb: float, rev: str) -> None:
    walls: dict[str, float] = {}
    head = (
        "reader",
        "runs",
        "wall s (median)",
        "min-max",
        "MB/s",
        "peak RSS MB",
        "x pandas",
        "notes",
    )
    table = [head]
    for kind, runs in results.items():
        name = READER_NAMES[kind].format(rev=rev)
        good = [r for r in runs if "error" not in r]
        if not good:
            error = runs[-1].get("error", "not run") if runs else "not run"
            rss = f"{runs[-1]['rss']:.0f}" if runs and "rss" in runs[-1] else "-"
            table.append((name, str(len(runs)), "-", "-", "-", rss, "-", error))
            continue
        wall = _median([r["wall"] for r in good])
        walls[kind] = wall
        spread = f"{min(r['wall'] for r in good):.2f}-{max(r['wall'] for r in good):.2f}"
        rss = max(r["rss"] for r in good)
        table.append(
            (
                name,
                str(len(good)),
                f"{wall:.2f}",
                spread,
                f"{file_mb / wall:.1f}",
                f"{rss:.0f}",
                "",
                good[-1]["what"],
            )
        )
    plain = walls.get("pandas_whole")
    rows = []
    for row in table[1:]:
        kind = next(k for k in results if READER_NAMES[k].format(rev=rev) == row[0])
        ratio = f"{plain / walls[kind]:.2f}" if plain and kind in walls else "-"
        rows.append((*row[:6], ratio, row[7]))
    table = [head, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(head) - 1)]
    for k, row in enumerate(table):
        left = "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=False))
        )
        out(f"{left}  {row[-1]}")
        if k == 0:
            out("-" * (sum(widths) + 2 * len(widths) + len(head[-1])))
    ours = walls.get("perfgate")
    peak = max((r["rss"] for r in results.get("perfgate", []) if "error" not in r), default=None)
    if ours and plain and peak is not None:
        speed = plain / ours
        out(
            f"target: perfgate >= {READER_TARGET} x plain pandas' speed at"
            f" <= {RSS_TARGET_MB:.0f} MB peak RSS: {speed:.2f}x"
            f" ({'ok' if speed >= READER_TARGET else 'MISSED'}),"
            f" {peak:.0f} MB ({'ok' if peak <= RSS_TARGET_MB else 'MISSED'})"
        )
    out(
        "x pandas: plain pandas' whole-file wall time / the reader's (above 1 = faster)."
        " perfgate's reader also groups and sums (what parse_ascend needs); the pandas rows"
        " only parse. Wall s: the read alone, in a fresh process; peak RSS: that process's"
        " (interpreter and imports included). MB = 10^6 bytes."
    )


# --- report ---------------------------------------------------------------------------------


@dataclass
class Row:
    input: str
    size_mb: float
    tool: str
    result: dict[str, Any]
    target: str = ""

    @property
    def mb_s(self) -> float | None:
        wall = self.result.get("wall")
        if "error" in self.result or self.result.get("timed_out") or not wall:
            return None
        return self.size_mb / float(wall)


def targets(perfgate: Row, raw: Row | None) -> str:
    if "error" in perfgate.result:
        return "not measured"
    parts = []
    ours = perfgate.mb_s
    limit = raw.mb_s if raw is not None else None
    if ours is not None and limit:
        ratio = ours / limit
        verdict = "ok" if ratio >= THROUGHPUT_TARGET else "MISSED"
        parts.append(f"{ratio:.2f}x raw {verdict}")
    rss = float(perfgate.result["rss"])
    parts.append(f"RSS {'ok' if rss <= RSS_TARGET_MB else 'MISSED'}")
    return ", ".join(parts)


def print_table(rows: Sequence[Row]) -> None:
    head = ("input", "size MB", "tool", "wall s", "MB/s", "peak RSS MB", "targets / notes")
    table = [head]
    for r in rows:
        res = r.result
        if "error" in res:
            cells = ("-", "-", "-", f"failed: {res['error']}")
        else:
            mb_s = r.mb_s
            wall = f"{res['wall']:.2f}" if not res.get("timed_out") else f">{res['wall']:.0f}"
            cells = (
                wall,
                f"{mb_s:.1f}" if mb_s is not None else "-",
                f"{res['rss']:.0f}",
                r.target or res.get("what", ""),
            )
        table.append((r.input, f"{r.size_mb:.1f}", r.tool, *cells))
    widths = [max(len(row[i]) for row in table) for i in range(len(head) - 1)]
    for k, row in enumerate(table):
        left = "  ".join(
            cell.ljust(w) if i in (0, 2) else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=False))
        )
        out(f"{left}  {row[-1]}")
        if k == 0:
            out("-" * (sum(widths) + 2 * len(widths) + len(head[-1])))


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)  # never `msprof-analyze --version`
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def run_input(
    label: str, path: Path, size_mb: float, raw: tuple[str, Path, str] | None, args: Any
) -> tuple[list[Row], bool]:
    rows: list[Row] = []
    out(f"  {label}: perfgate ...")
    ours = Row(label, size_mb, "perfgate parse_ascend", measure("perfgate", path, 0))
    rows.append(ours)
    ok = "error" not in ours.result
    raw_row: Row | None = None
    if raw is not None:
        kind, file, name = raw
        out(f"  {label}: {name} ...")
        raw_row = Row(
            label, file.stat().st_size / MB, f"{name} (raw limit)", measure(kind, file, 0)
        )
        raw_row.tool = f"{raw_row.result.get('name', name)} (raw limit)"
        rows.append(raw_row)
        ok = ok and "error" not in raw_row.result
        ours.target = targets(ours, raw_row)
        if "error" not in ours.result:
            ours.target += f"; {ours.result['what']}"
    if not args.skip_msprof:
        out(f"  {label}: msprof-analyze advisor (timeout {args.msprof_timeout:.0f} s) ...")
        rows.append(
            Row(
                label,
                size_mb,
                "msprof-analyze advisor",
                measure("msprof", path, args.msprof_timeout, args.msprof_max_rss_mb),
            )
        )
    return rows, ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Ascend ingest speed: perfgate vs msprof-analyze.")
    parser.add_argument("--size-mb", type=int, default=1000, help="scaled input size (1000)")
    parser.add_argument("--skip-msprof", action="store_true", help="do not run msprof-analyze")
    parser.add_argument(
        "--msprof-timeout", type=float, default=600.0, help="seconds per msprof run (600)"
    )
    parser.add_argument(
        "--msprof-max-rss-mb",
        type=float,
        default=8000.0,
        help="stop msprof-analyze when its processes hold more than this (8000)",
    )
    parser.add_argument(
        "--readers-only",
        action="store_true",
        help="only input 4: kernel_details.csv readers side by side",
    )
    parser.add_argument("--repeats", type=int, default=3, help="runs per reader, input 4 (3)")
    parser.add_argument(
        "--reader-max-rss-mb",
        type=float,
        default=4000.0,
        help="stop a reader of input 4 whose process holds more than this (4000)",
    )
    parser.add_argument("--child", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument("--child-reader", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument("--before-module", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_reader:
        kind, path = args.child_reader[0], Path(args.child_reader[1])
        print(json.dumps(child_reader(kind, path, args.before_module)), flush=True)
        return 0
    if args.child:
        kind, path = args.child[0], Path(args.child[1])
        if kind == "msprof":
            result = child_msprof(path, args.msprof_timeout, args.msprof_max_rss_mb)
        else:
            result = CHILDREN[kind](path)
        print(json.dumps(result), flush=True)
        return 0

    command = shlex.join(getattr(sys, "orig_argv", [sys.executable, *sys.argv]))
    started = time.perf_counter()
    out("perfgate Ascend ingest benchmark (bench/ingest.py)")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    out(f"machine: {platform.machine()}, {cores} cores usable; load average at start: {loadavg()}")
    out(
        f"Python {platform.python_version()}; msprof-analyze {version('msprof-analyze')};"
        f" orjson {version('orjson')}; pandas {version('pandas')}; psutil {version('psutil')}"
    )
    fixture = fixture_dir()
    out(f"fixture: {fixture}")
    if args.readers_only:
        ok = run_readers(fixture, args)
        out(f"load average now: {loadavg()}")
        out(f"command: {command}  (cwd {Path.cwd()}; took {time.perf_counter() - started:.0f} s)")
        return 0 if ok else 1
    CACHE.mkdir(parents=True, exist_ok=True)
    tv_dir, tv_file, tv_how = make_trace_view_input(fixture, args.size_mb)
    out(f"input 2: {tv_dir} ({tv_how})")
    kd_dir, kd_file, kd_how = make_kernel_details_input(fixture, args.size_mb)
    out(f"input 3: {kd_dir} ({kd_how})")
    out("")

    rows: list[Row] = []
    all_ok = True
    inputs: list[tuple[str, Path, tuple[str, Path, str] | None]] = [
        ("1 fixture, 2 ranks", fixture, None),
        ("2 trace_view.json", tv_dir, ("orjson", tv_file, "orjson.loads")),
        ("3 kernel_details.csv", kd_dir, ("pandas", kd_file, "pandas.read_csv usecols")),
    ]
    for label, path, raw in inputs:
        got, ok = run_input(label, path, dir_bytes(path) / MB, raw, args)
        rows.extend(got)
        all_ok = all_ok and ok
    out("")
    print_table(rows)
    out("")
    out(
        "wall s: perfgate and the raw limits time the call alone (in a fresh process);"
        " msprof-analyze times the whole command, start-up included."
    )
    out(
        "peak RSS: the measuring process's own peak, interpreter and imports included;"
        " for msprof-analyze the larger of its biggest process and its tree's sampled PSS sum."
    )
    out(
        f"targets: perfgate MB/s >= {THROUGHPUT_TARGET} x the raw limit's;"
        f" peak RSS <= {RSS_TARGET_MB:.0f} MB. MB = 10^6 bytes."
    )
    out("")
    all_ok = run_readers(fixture, args) and all_ok
    out(f"load average now: {loadavg()}")
    out(f"command: {command}  (cwd {Path.cwd()}; took {time.perf_counter() - started:.0f} s)")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
