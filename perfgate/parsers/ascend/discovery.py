"""Find the rank directories of an Ascend PyTorch Profiler output and read how each was collected.

torch_npu's ``tensorboard_trace_handler(dir)`` writes one ``{worker}_{timestamp}_ascend_pt``
directory per rank, each holding ``profiler_info[_{rank}].json``, ``profiler_metadata.json``
and ``ASCEND_PROFILER_OUTPUT/`` (text or db export; ``shared/fixtures/ascend/FORMATS.md`` §1).
This module only looks at that layout and the two small JSON files; the exports themselves
are read by :mod:`perfgate.parsers.ascend.text` and :mod:`perfgate.parsers.ascend.db`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from perfgate.errors import ParseError

__all__ = [
    "OUTPUT_DIR",
    "as_rank_dir",
    "find_rank_dirs",
    "is_ascend_profile",
    "load_json",
    "read_collection",
    "relative",
    "start_rank",
]

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"

_RANK_FILE = re.compile(r"^profiler_info_(\d+)\.json$")


# --------------------------------------------------------------------------- discovery
def as_rank_dir(path: Path) -> Path:
    """``path`` itself, or its parent when ``path`` is ``ASCEND_PROFILER_OUTPUT``."""
    return path.parent if path.name == OUTPUT_DIR else path


def is_ascend_profile(path: Path) -> bool:
    """True for a ``*_ascend_pt`` rank directory (it holds ``ASCEND_PROFILER_OUTPUT``), that
    ``ASCEND_PROFILER_OUTPUT`` directory itself, or a parent holding one or more rank dirs."""
    try:
        return bool(_output_dirs(path))
    except ParseError:
        return False


def _rank_of(rank_dir: Path) -> int | None:
    """The rank a directory's profiler_info file names, from its suffix or its rank_id."""
    infos = sorted(rank_dir.glob("profiler_info*.json"))
    for info in infos:
        if match := _RANK_FILE.match(info.name):
            return int(match.group(1))
    try:
        doc = json.loads(infos[-1].read_text(encoding="utf-8")) if infos else None
    except (OSError, ValueError):
        return None
    return _rank_id(doc) if isinstance(doc, dict) else None


def _rank_id(doc: Mapping[str, Any]) -> int | None:
    """A profiler_info document's ``rank_id``, when it is a rank (an int >= 0)."""
    rank = doc.get("rank_id")
    return rank if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0 else None


def _output_dirs(path: Path) -> list[Path]:
    """``path`` itself when it is a rank dir (or its output dir), else its subdirectories
    that are, unsorted: what detection needs, without reading any rank's files."""
    path = as_rank_dir(Path(path))
    if not path.is_dir():
        raise ParseError(f"{path}: no such directory")
    if (path / OUTPUT_DIR).is_dir():
        return [path]
    try:
        return [c for c in path.iterdir() if (c / OUTPUT_DIR).is_dir()]
    except OSError as exc:
        raise ParseError(f"{path}: cannot be listed ({exc.strerror or exc})") from None


def find_rank_dirs(path: Path) -> tuple[Path, ...]:
    """The rank directories of a profile, sorted by rank (directories without a rank last,
    by name). ``path`` is one rank dir, its ``ASCEND_PROFILER_OUTPUT`` or their parent."""
    children = _output_dirs(path)
    if not children:
        raise ParseError(
            f"{as_rank_dir(Path(path))}: no {OUTPUT_DIR} directory here or in its "
            "subdirectories; not an Ascend PyTorch Profiler output (*_ascend_pt)"
        )
    if len(children) == 1:  # one rank: nothing to order, no rank file to read
        return (children[0],)
    ranked = [(_rank_of(c), c) for c in children]
    ranked.sort(key=lambda rc: (rc[0] is None, rc[0] or 0, rc[1].name))
    return tuple(c for _, c in ranked)


# --------------------------------------------------------------------------- collection
def _config_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v).removeprefix("ProfilerActivity.") for v in value)
    return str(value)


def _json_problem(exc: json.JSONDecodeError) -> str:
    """Say whether a JSON error means the file was cut short or is otherwise broken."""
    if exc.pos >= len(exc.doc.rstrip()) or exc.msg.startswith("Unterminated string"):
        return f"truncated JSON ({exc.msg}, line {exc.lineno})"
    return f"not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno})"


def load_json(
    path: Path,
    hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
    problem: Callable[[json.JSONDecodeError], str] = _json_problem,
) -> tuple[Any, str | None]:
    """A JSON file's document (``hook`` as ``object_pairs_hook``), or ``(None, why)`` when
    it cannot be read (``problem`` says why for a JSON error)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    try:
        return json.loads(text, object_pairs_hook=hook), None
    except json.JSONDecodeError as exc:
        return None, problem(exc)
    except RecursionError:
        return None, "JSON nested too deeply"


def read_collection(rank_dir: Path) -> tuple[dict[str, str], tuple[str, ...]]:
    """How a rank's profile was collected, from ``profiler_info*.json`` and
    ``profiler_metadata.json``.

    Keys (only those present): profiler_level, aic_metrics, export_type, l2_cache,
    record_shapes, profile_memory, with_stack, activities, torch_npu_version, cann_version,
    rank. Values are strings; booleans are ``true``/``false`` and activities are joined with
    commas without the ``ProfilerActivity.`` prefix (``CPU,NPU``). Returns the mapping and
    notes on what could not be read.
    """
    rank_dir = as_rank_dir(Path(rank_dir))
    out: dict[str, str] = {}
    notes: list[str] = []
    infos = sorted(rank_dir.glob("profiler_info*.json"))
    if not infos:
        notes.append(f"collection: no profiler_info*.json in {rank_dir.name}")
    elif len(infos) > 1:
        notes.append(
            f"collection: {len(infos)} profiler_info*.json files in {rank_dir.name}; "
            f"read {infos[0].name}"
        )
    docs: list[Mapping[str, Any]] = []
    for path in infos[:1] + [rank_dir / "profiler_metadata.json"]:
        if not path.is_file():
            continue
        doc, why = load_json(path)
        if why is not None:
            notes.append(f"collection: {path.name} {why}")
        elif isinstance(doc, dict):
            docs.append(doc)
        else:
            notes.append(f"collection: {path.name} is not a JSON object")

    def put(key: str, value: Any) -> None:
        text = _config_text(value)
        if text is not None and key not in out:
            out[key] = text

    def obj(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
        value = doc.get(key)
        return value if isinstance(value, dict) else {}

    for doc in docs:
        config = obj(doc, "config")
        common, experimental = obj(config, "common_config"), obj(config, "experimental_config")
        for key in ("profiler_level", "aic_metrics", "export_type", "l2_cache"):
            put(key, experimental.get(f"_{key}", experimental.get(key)))
        for key in ("record_shapes", "profile_memory", "with_stack", "activities"):
            put(key, common.get(key))
        for key in ("torch_npu_version", "cann_version"):
            put(key, doc.get(key))
        put("rank", _rank_id(doc))
    if "rank" not in out and infos and (match := _RANK_FILE.match(infos[0].name)):
        out["rank"] = match.group(1)
    return out, tuple(notes)


def relative(path: Path, rank_dir: Path) -> str:
    """``path`` relative to ``rank_dir`` (POSIX separators), or whole when outside it."""
    return (path.relative_to(rank_dir) if path.is_relative_to(rank_dir) else path).as_posix()


def start_rank(rank_dir: Path) -> tuple[dict[str, str], list[str], list[str]]:
    """What both exports' readers start from: :func:`read_collection`'s mapping, its notes
    (a list to add to) and the collection files there are (the start of ``raw_files``)."""
    collection, notes = read_collection(rank_dir)
    raw = [relative(info, rank_dir) for info in sorted(rank_dir.glob("profiler_info*.json"))[:1]]
    if (rank_dir / "profiler_metadata.json").is_file():
        raw.append("profiler_metadata.json")
    return collection, list(notes), raw
