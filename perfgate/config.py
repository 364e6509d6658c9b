"""Configuration: ``perfgate.toml`` (or ``[tool.perfgate]`` in pyproject.toml), ``PERFGATE_*``
environment variables and command-line flags, merged into one frozen :class:`Config`.

Precedence: flag > environment > file > default. Unknown keys are errors, named with the file
and the key's path, so a typo never silently turns a setting off.

Budgets (``[budgets]``, :func:`parse_budgets`) are absolute limits a suite states for its
metrics (``latency_p99_ms = "<= 100"``), judged on every run whatever its history; they fail
the gate by default (:data:`DEFAULT_FAIL_ON`).

An operator count (``op_calls_per_step``) explains a time verdict and never fails a gate
alone; a suite opts in to its deciding by naming it, ``[metrics.op_calls_per_step]`` (any
key, or none), and ``decides = false`` in a ``[metrics.NAME]`` table keeps any metric shown,
not deciding (:attr:`perfgate.models.MetricPolicy.decides`).
"""

from __future__ import annotations

import math
import operator
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from perfgate.errors import ConfigError
from perfgate.metrics import FALLBACK_POLICY, base_name, default_policy, lookup
from perfgate.models import (
    TABLE_THRESHOLDS,
    TREATMENT_PARAMS,
    BenchmarkSpec,
    Direction,
    MetricPolicy,
    Thresholds,
    Verdict,
    threshold_names,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

DEFAULT_DATABASE_URL = "sqlite:///.perfgate/perfgate.db"


_TOP_KEYS = {
    *("project", "database_url", "base_branch", "host_label", "fail_on", "baseline_window"),
    *("defaults", "metrics", "benchmarks", "advisor", "budgets"),
}
_COUNTS = {"warmup": 0, "measured": 2, "profiled": 0, "repeats": 1}  # each with its least
_DEFAULT_KEYS = {"device", *_COUNTS}
_BENCH_KEYS = {
    *("name", "workload", "entry", "params", "treatment_params", "kind", "nproc", "nnodes"),
    *("timeout", *_DEFAULT_KEYS),
}
_KINDS = ("training", "inference")
BENCHMARK_NAME = re.compile(
    r"[^/\\\x00-\x1f\x7f.\s-](?:[^/\\\x00-\x1f\x7f]*[^/\\\x00-\x1f\x7f\s])?"
)
"""A suite benchmark's name: no ``/`` or ``\\``, no control character (a line break), not
starting with ``.``, ``-`` or a blank, not ending with a blank. It becomes part of a file name
(a profile's trace, a baseline file) and a report's heading, so it is never a path, never
taken for a hidden file or a flag, and stays on one line; any other character (a space,
a letter of any script) is kept."""
_ENTRY = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*", re.ASCII)
"""A user entry: a dotted module name, ``:``, a function name (the worker imports the module
and calls the function; a file path or a ``Class.method`` cannot be imported)."""
_METRIC_KEYS = {"direction", "min_effect_pct", "min_effect_abs", "deterministic", "decides"}
_DEVICES = {"cpu", "cuda", "npu"}
MAX_EFFECT_PCT = 1000.0
"""``min_effect_pct`` is below this: a minimum effect of 1000% lets an 11-fold slowdown pass,
which is no gate at all (and a detectable change above it is shown as "over 1000%")."""
_SHARES = frozenset(
    {
        *("comm_share_warning", "comm_share_critical", "idle_share_warning"),
        *("idle_share_critical", "data_loading_share", "cpu_sync_cause_share", "aicpu_share"),
        *("format_conversion_share", "dominant_op_share", "low_unit_utilization"),
        *("memory_bound_pipe_ratio", "memory_capacity_warning", "memory_capacity_critical"),
        *("leak_rising_share", "window_growth_share", "pair_low_utilisation"),
    }
)
"""The ``[advisor]`` thresholds that are a share of a whole (of the step, of op time, of the
device's memory, ...): a fraction from 0 to 1 (0.15 is 15%), never a percentage."""

DEFAULT_FAIL_ON = frozenset({Verdict.REGRESSION, Verdict.OVER_BUDGET})
"""The verdicts that fail a gate when the suite does not say: a regression, and a breached
budget. A suite that sets ``fail_on`` gets exactly what it lists: ``fail_on =
["regression"]`` shows a breached budget and passes."""

ALL_BENCHMARKS = "*"
"""The key of the budgets (and reference values) that apply to every benchmark."""

_COMPARE = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}
"""A budget's operator and the comparison of a run's value with the limit it makes."""


@dataclass(frozen=True)
class Budget:
    """One limit of the suite's ``[budgets]``: ``metric operator value``, judged on a run's
    centre (:mod:`perfgate.stats.budget`).

    ``value`` is in the metric's unit; for a budget relative to the reference
    (``">= 95% of reference"``) it is the fraction of the reference's value (0.95), resolved
    at gate time. ``text`` is the budget as the suite wrote it (normalised spacing)."""

    metric: str
    operator: str
    value: float
    of_reference: bool = False
    text: str = ""

    @property
    def upper(self) -> bool:
        """An upper limit (``<=``, ``<``): the run breaches it from above."""
        return self.operator.startswith("<")

    def allows(self, value: float, limit: float) -> bool:
        """Whether ``value`` keeps this budget with its limit resolved to ``limit``."""
        return bool(_COMPARE[self.operator](value, limit))


@dataclass(frozen=True)
class Config:
    """Everything a command needs to know that is not its own flags."""

    project: str = "default"
    database_url: str = DEFAULT_DATABASE_URL
    base_branch: str = "main"
    host_label: str = ""
    fail_on: frozenset[Verdict] = DEFAULT_FAIL_ON
    baseline_window: int = 30
    defaults: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, MetricPolicy] = field(default_factory=dict)
    """The suite's ``[metrics.NAME]`` policies; every other metric takes its catalogue's
    (:mod:`perfgate.metrics`). A metric named here decides unless its table says
    ``decides = false`` (an operator count decides only here)."""
    metrics_directed: frozenset[str] = frozenset()
    """The ``[metrics.NAME]`` tables that say a ``direction``: the others keep the one a
    metric the catalogue does not know was recorded with (a file's ``tokens_per_s``,
    higher is better, stays so under a table that only sets its minimum effect)."""
    benchmarks: tuple[BenchmarkSpec, ...] = ()
    source: str = ""
    advisor: Thresholds = field(default_factory=Thresholds)
    """Thresholds of perfgate's advisor rules (the suite's ``[advisor]`` table)."""
    budgets: Mapping[str, Mapping[str, Budget]] = field(default_factory=dict)
    """The suite's ``[budgets]``: benchmark name (:data:`ALL_BENCHMARKS` for every one) ->
    metric -> budget; see :meth:`budgets_for`."""
    budget_reference: Path | None = None
    """The reference file of the budgets relative to it (``[budgets] reference``), resolved
    against the suite file's folder."""

    def budgets_for(self, benchmark: str) -> dict[str, Budget]:
        """The budgets that judge ``benchmark``'s runs, by metric: its own
        ``[budgets.NAME]`` over those for every benchmark. A per-rank metric
        (``step_time_ms.rank1``) is judged by a budget on its own name, else on its base's
        (:mod:`perfgate.stats.budget`)."""
        return {**self.budgets.get(ALL_BENCHMARKS, {}), **self.budgets.get(benchmark, {})}

    def policy(self, metric: str, recorded: Direction | None = None) -> MetricPolicy:
        """How a comparison judges ``metric``: the suite's ``[metrics.NAME]`` where it has
        one, else the catalogue's; a per-rank metric ``<m>.rank<r>`` without its own takes
        ``<m>``'s. Its direction is the one a verdict is judged by. A metric neither knows
        (one a metrics file or a harness brought, ``tokens_per_s``) is judged the way it was
        ``recorded`` (the file said which way is better) when that is given, with the
        fallback's minimum effect, under the suite's table where it has one that does not
        say a direction."""
        unknown = recorded is not None and lookup(metric) is None
        for name in (metric, base_name(metric)):
            if name in self.metrics:
                rule = self.metrics[name]
                if unknown and recorded is not None and name not in self.metrics_directed:
                    return replace(rule, direction=recorded)
                return rule
        if unknown and recorded is not None:
            return replace(FALLBACK_POLICY, direction=recorded)
        return default_policy(metric)

    def with_overrides(self, **overrides: Any) -> Config:
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})


def _err(source: str, key: str, what: str) -> ConfigError:
    """The error ``what`` at ``key`` of the file ``source`` (``S02.toml: benchmarks[0].repeat``)."""
    return ConfigError(f"{source}: {key}: {what}" if source else f"{key}: {what}")


def _table(value: Any, source: str, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _err(source, path, "expected a table")
    return value


def _check_keys(table: Mapping[str, Any], allowed: set[str], source: str, path: str) -> None:
    for key in table:
        if key not in allowed:
            known = ", ".join(sorted(allowed))
            raise _err(source, path + key, f"unknown key (known keys here: {known})")


def _int(value: Any, source: str, path: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _err(source, path, f"expected an integer >= {minimum}, got {value!r}")
    return value


def _str(value: Any, source: str, path: str) -> str:
    """A string that is not empty nor only blanks (a name, a URL, a branch)."""
    if not isinstance(value, str) or not value.strip():
        raise _err(source, path, f"expected a non-empty string, got {value!r}")
    return value


def _name(value: Any, source: str, path: str) -> str:
    """A benchmark's name (:data:`BENCHMARK_NAME`)."""
    name = _str(value, source, path)
    if not BENCHMARK_NAME.fullmatch(name):
        raise _err(
            source,
            path,
            "expected no '/', '\\' or control character, not starting with '.', '-' or a "
            f"blank, not ending with a blank (it names files), got {name!r}",
        )
    return name


def _device(value: Any, source: str, path: str) -> str:
    if value not in _DEVICES:
        raise _err(source, path, f"expected one of cpu, cuda, npu, got {value!r}")
    return str(value)


def _params(value: Any, source: str, path: str) -> dict[str, str | int | float | bool]:
    if not isinstance(value, Mapping):
        raise _err(source, path, "expected a table of parameters")
    out: dict[str, str | int | float | bool] = {}
    for k, v in value.items():
        if not isinstance(v, str | int | float | bool):
            raise _err(source, f"{path}.{k}", "parameters must be strings, numbers or booleans")
        if isinstance(v, float) and not math.isfinite(v):  # no fingerprint can hold it
            raise _err(source, f"{path}.{k}", f"expected a finite number, got {v!r}")
        out[str(k)] = v
    return out


def parse_benchmark(
    table: Mapping[str, Any], defaults: Mapping[str, Any], source: str, path: str
) -> BenchmarkSpec:
    """Validate one ``[[benchmarks]]`` table (merged over ``[defaults]``) into a spec."""
    _check_keys(table, _BENCH_KEYS, source, path + ".")
    merged = {**defaults, **table}
    name = _name(merged.get("name"), source, f"{path}.name")
    workload, entry = merged.get("workload"), merged.get("entry")
    if (workload is None) == (entry is None):
        raise _err(
            source, path, "give exactly one of 'workload' (built-in) or 'entry' ('module:function')"
        )
    if entry is not None and (not isinstance(entry, str) or not _ENTRY.fullmatch(entry)):
        raise _err(
            source,
            path + ".entry",
            f"expected 'module:function' (a dotted module name and a function name), got {entry!r}",
        )
    if workload is not None:
        _str(workload, source, f"{path}.workload")
    device = _device(merged.get("device", "cpu"), source, f"{path}.device")
    treatment = merged.get("treatment_params", list(TREATMENT_PARAMS))
    if not isinstance(treatment, list) or not all(isinstance(t, str) and t for t in treatment):
        raise _err(source, path + ".treatment_params", "expected a list of non-empty names")
    kind = merged.get("kind", "")  # "": the workload's own kind (perfgate.app.specs)
    if kind != "" and kind not in _KINDS:
        raise _err(source, path + ".kind", f"expected one of {', '.join(_KINDS)}, got {kind!r}")
    return BenchmarkSpec(
        name=name,
        workload=workload,
        kind=kind,
        nproc=_int(merged.get("nproc", 1), source, f"{path}.nproc", 1),
        nnodes=_int(merged.get("nnodes", 1), source, f"{path}.nnodes", 1),
        entry=entry,
        device=device,
        params=_params(merged.get("params", {}), source, f"{path}.params"),
        **{
            key: _int(merged.get(key, getattr(BenchmarkSpec, key)), source, f"{path}.{key}", least)
            for key, least in _COUNTS.items()
        },
        treatment_params=frozenset(TREATMENT_PARAMS) | frozenset(treatment),  # others beside
        timeout_s=_timeout(merged.get("timeout", 900.0), source, f"{path}.timeout"),
        timeout_set="timeout" in merged,
    )


def _number(value: Any) -> bool:
    """Whether ``value`` is a finite number >= 0 (TOML's true and false are not numbers)."""
    return not isinstance(value, bool) and isinstance(value, int | float) and 0 <= value < math.inf


def _timeout(value: Any, source: str, path: str) -> float:
    """A benchmark's ``timeout``: seconds one repeat may take, a finite number > 0."""
    if not _number(value) or value == 0:
        raise _err(source, path, f"expected a number of seconds > 0, got {value!r}")
    return float(value)


def _parse_metric(name: str, table: Any, source: str) -> MetricPolicy:
    path = f"metrics.{name}"
    _check_keys(_table(table, source, path), _METRIC_KEYS, source, path + ".")
    base = default_policy(name)
    direction = table.get("direction", base.direction.value)
    try:
        parsed_direction = Direction(direction)
    except ValueError:
        raise _err(
            source, path + ".direction", f"expected 'lower' or 'higher', got {direction!r}"
        ) from None
    effect = table.get("min_effect_pct", base.min_effect_pct)
    if not _number(effect) or effect >= MAX_EFFECT_PCT:
        raise _err(
            source,
            path + ".min_effect_pct",
            f"expected a percentage >= 0 and < {MAX_EFFECT_PCT:g}, got {effect!r}",
        )
    deterministic = _flag(table, "deterministic", base.deterministic, source, path)
    absolute = table.get("min_effect_abs", base.min_effect_abs)
    if not _number(absolute):
        raise _err(
            source, path + ".min_effect_abs", f"expected a finite number >= 0, got {absolute!r}"
        )
    # Naming a metric is asking for it to decide: an operator count, which only explains by
    # default (the catalogue's ``decides``), fails the gate in a suite that names it, unless
    # the table says ``decides = false`` (kept shown, with its own tolerance, say).
    return replace(
        base,
        direction=parsed_direction,
        min_effect_pct=float(effect),
        deterministic=deterministic,
        min_effect_abs=float(absolute),
        decides=_flag(table, "decides", True, source, path),
    )


def _flag(table: Mapping[str, Any], key: str, default: bool, source: str, path: str) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise _err(source, f"{path}.{key}", "expected true or false")
    return value


def _parse_number_table(
    table: Any, default: tuple[tuple[str, float], ...], source: str, path: str
) -> tuple[tuple[str, float], ...]:
    """A table of name = number >= 0 merged over ``default`` (names compared upper-cased)."""
    if not isinstance(table, Mapping):
        raise _err(source, path, "expected a table of name = number")
    merged = {name.upper(): value for name, value in default}
    for name, value in table.items():
        if not _number(value):
            raise _err(source, path + "." + name, f"expected a number >= 0, got {value!r}")
        merged[str(name).upper()] = float(value)
    return tuple(merged.items())


def _parse_advisor(table: Any, source: str) -> Thresholds:
    """``[advisor]``: any Thresholds field, each a number >= 0 (integers where the default is);
    the table fields (``[advisor.slow_link_gb_s]``) are merged over their defaults."""
    _check_keys(_table(table, source, "advisor"), set(threshold_names()), source, "advisor.")
    defaults = Thresholds()
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key in TABLE_THRESHOLDS:
            values[key] = _parse_number_table(
                value, getattr(defaults, key), source, f"advisor.{key}"
            )
            continue
        whole = isinstance(getattr(defaults, key), int)
        if not _number(value) or (whole and not float(value).is_integer()):
            kind = "an integer" if whole else "a number"
            raise _err(source, "advisor." + key, f"expected {kind} >= 0, got {value!r}")
        if key in _SHARES and value > 1:
            raise _err(
                source,
                "advisor." + key,
                f"expected a share from 0 to 1 (0.15 is 15%), got {value!r}",
            )
        values[key] = int(value) if whole else float(value)
    return replace(defaults, **values)


_BUDGET = re.compile(
    r"(?P<op><=|>=|<|>)\s*(?P<num>[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*"
    r"(?P<rest>.*)"
)
_OF_REFERENCE = re.compile(r"%\s*of\s+(the\s+)?reference")
BUDGET_FORMS = '"<= 100", ">= 70", "< 0.5" or ">= 95% of reference"'


def parse_budget(metric: str, text: Any, source: str, path: str) -> Budget:
    """One budget's text: an operator (``<=``, ``<``, ``>=``, ``>``) and a number in the
    metric's unit (the unit may follow: ``"<= 100 ms"``, ``">= 70%"``), or a percentage of the
    reference's value (``">= 95% of reference"``).

    Raises:
        ConfigError: anything else, naming the file and the key.
    """
    expected = f"expected a budget like {BUDGET_FORMS}"
    found = _BUDGET.fullmatch(text.strip()) if isinstance(text, str) else None
    if found is None or not math.isfinite(float(found["num"])):
        raise _err(source, path, f"{expected}, got {text!r}")
    op, value, rest = found["op"], float(found["num"]), found["rest"].strip()
    if _OF_REFERENCE.fullmatch(rest):
        if value <= 0:
            raise _err(source, path, f"a share of the reference must be more than 0%, got {text!r}")
        return Budget(metric, op, value / 100.0, True, f"{op} {found['num']}% of reference")
    spec = lookup(metric)
    unit = "" if spec is None else spec.unit
    if rest and rest != unit:
        known = f"the metric's unit is {unit!r}" if unit else "give a plain number"
        raise _err(
            source,
            path,
            f"{expected} ({known}; a share of the reference is '% of reference'), got {text!r}",
        )
    if unit and found["num"].startswith("-"):
        # Every catalogue metric with a unit (a time, a rate, a size, a count, a share) is
        # >= 0: "<= -5" fails every run, ">= -5" holds for every one.
        raise _err(source, path, f"{metric} is never negative: give a limit >= 0, got {text!r}")
    return Budget(metric, op, value, False, f"{op} {found['num']}")


def parse_budgets(
    table: Any, source: str, base_dir: Path | None = None
) -> tuple[dict[str, dict[str, Budget]], Path | None]:
    """The suite's ``[budgets]``: ``METRIC = "BUDGET"`` for every benchmark, ``[budgets.NAME]``
    tables for one benchmark (over those for every one), and ``reference = "FILE"`` (relative
    to the suite file's folder ``base_dir``) for the budgets relative to the reference.

    A metric the catalogue does not know is allowed: results ingested from other harnesses
    carry their own metric names, and a run that lacks the metric gets a note at gate time
    (naming the metric and the nearest ones the run has), never a silent pass.

    Raises:
        ConfigError: a value that is neither a budget nor a table, a bad budget, a budget
            relative to the reference with no ``reference`` file named.
    """
    table = _table(table, source, "budgets")
    budgets: dict[str, dict[str, Budget]] = {}
    reference: Path | None = None
    for key, value in table.items():
        path = f"budgets.{key}"
        if key == "reference":
            name = _str(value, source, path)
            reference = Path(name) if base_dir is None else base_dir / name
        elif isinstance(value, Mapping):
            if lookup(str(key)) is not None:
                # TOML reads an unquoted step_time_ms.rank1 = ... as a table step_time_ms.
                inner = next(iter(value), "rank1")
                raise _err(
                    source,
                    path,
                    f"{key} is a metric, not a benchmark: a per-rank "
                    f'metric is written quoted ("{key}.{inner}" = "<= 100")',
                )
            one = budgets.setdefault(str(key), {})
            for metric, text in value.items():
                if isinstance(text, Mapping):
                    raise _err(
                        source,
                        f"{path}.{metric}",
                        f"expected a budget like "
                        f"{BUDGET_FORMS}, got a table (a per-rank metric is written quoted: "
                        f'"{metric}.rank1" = "<= 100")',
                    )
                one[str(metric)] = parse_budget(str(metric), text, source, f"{path}.{metric}")
        else:
            budgets.setdefault(ALL_BENCHMARKS, {})[str(key)] = parse_budget(
                str(key), value, source, path
            )
    relative = [
        f"budgets.{'' if b == ALL_BENCHMARKS else b + '.'}{m}"
        for b, by_metric in budgets.items()
        for m, budget in by_metric.items()
        if budget.of_reference
    ]
    if relative and reference is None:
        raise _err(
            source,
            relative[0],
            "a budget relative to the reference needs the "
            'reference file: [budgets] reference = "official.json"',
        )
    return budgets, reference


def _check_defaults(defaults: Mapping[str, Any], source: str) -> None:
    """``[defaults]`` valid on its own, whichever benchmarks use it (suite or ``--workload``)."""
    for key, least in _COUNTS.items():
        if key in defaults:
            _int(defaults[key], source, f"defaults.{key}", least)
    if "device" in defaults:
        _device(defaults["device"], source, "defaults.device")


def _fail_on(raw: Any, source: str) -> frozenset[Verdict]:
    """``fail_on``: a list of distinct verdicts, at least one."""
    verdicts = ", ".join(v.value for v in Verdict)
    try:
        if not isinstance(raw, list):
            raise TypeError
        fail_on = frozenset(Verdict(v) for v in raw)
    except (ValueError, TypeError):
        raise _err(
            source, "fail_on", f"expected a list of verdicts ({verdicts}), got {raw!r}"
        ) from None
    if not fail_on:
        # fail_on = [] would fail on nothing: the gate silently switched off.
        raise _err(source, "fail_on", f"empty; give at least one verdict ({verdicts})")
    if len(fail_on) < len(raw):
        twice = next(v for v in raw if raw.count(v) > 1)
        raise _err(source, "fail_on", f"{twice!r} is listed twice")
    return fail_on


def config_from_mapping(
    data: Mapping[str, Any], source: str = "", base_dir: Path | None = None
) -> Config:
    """Validate a parsed TOML document (the perfgate table) into a Config; ``base_dir`` is
    the suite file's folder (the budgets' reference file is named relative to it)."""
    _check_keys(data, _TOP_KEYS, source, "")
    defaults = _table(data.get("defaults", {}), source, "defaults")
    _check_keys(defaults, _DEFAULT_KEYS, source, "defaults.")
    _check_defaults(defaults, source)
    raw_metrics = _table(data.get("metrics", {}), source, "metrics").items()
    metrics = {name: _parse_metric(name, table, source) for name, table in raw_metrics}
    raw_benchmarks = data.get("benchmarks", [])
    if not isinstance(raw_benchmarks, list):
        raise _err(source, "benchmarks", "expected [[benchmarks]] tables")
    benchmarks = []
    for i, table in enumerate(raw_benchmarks):
        where = f"benchmarks[{i}]"
        benchmarks.append(parse_benchmark(_table(table, source, where), defaults, source, where))
    names = [b.name for b in benchmarks]
    for name in names:
        if names.count(name) > 1:
            raise _err(source, "benchmarks", f"benchmark name {name!r} is repeated")
    fail_on = _fail_on(data.get("fail_on", sorted(v.value for v in DEFAULT_FAIL_ON)), source)
    budgets, reference = parse_budgets(data.get("budgets", {}), source, base_dir)
    host_label = data.get("host_label", "")
    if not isinstance(host_label, str):
        raise _err(source, "host_label", f"expected a string, got {host_label!r}")
    return Config(
        project=_str(data.get("project", "default"), source, "project"),
        database_url=_str(data.get("database_url", DEFAULT_DATABASE_URL), source, "database_url"),
        base_branch=_str(data.get("base_branch", "main"), source, "base_branch"),
        host_label=host_label,
        fail_on=fail_on,
        baseline_window=_int(data.get("baseline_window", 30), source, "baseline_window", 3),
        defaults=dict(defaults),
        metrics=metrics,
        metrics_directed=frozenset(name for name, table in raw_metrics if "direction" in table),
        benchmarks=tuple(benchmarks),
        source=source,
        advisor=_parse_advisor(data.get("advisor", {}), source),
        budgets=budgets,
        budget_reference=reference,
    )


def read_config_file(path: Path) -> Config:
    """Read a perfgate.toml, or the ``[tool.perfgate]`` table of a pyproject.toml."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the suite file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {exc.start}); a suite file is UTF-8 TOML"
        ) from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    except RecursionError:  # the parser recurses once per nested array or inline table
        raise ConfigError(f"{path}: not valid TOML (nested too deeply)") from None
    if path.name == "pyproject.toml":
        table = _tool_table(document, path).get("perfgate", {})
        if not isinstance(table, Mapping):
            raise ConfigError(f"{path}: tool.perfgate: expected a table, got {table!r}")
        return config_from_mapping(table, f"{path} [tool.perfgate]", path.parent)
    return config_from_mapping(document, str(path), path.parent)


def _tool_table(document: Mapping[str, Any], path: Path) -> Mapping[str, Any]:
    """A pyproject.toml's ``[tool]`` table (empty when it has none)."""
    tool = document.get("tool", {})
    if not isinstance(tool, Mapping):
        raise ConfigError(f"{path}: tool: expected a table, got {tool!r}")
    return tool


def find_config_file(start: Path) -> Path | None:
    """perfgate.toml in ``start``, else a pyproject.toml there with a [tool.perfgate] table."""
    candidate = start / "perfgate.toml"
    if candidate.is_file():
        return candidate
    pyproject = start / "pyproject.toml"
    if pyproject.is_file():
        try:
            document = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
            return None
        if "perfgate" in _tool_table(document, pyproject):
            return pyproject
    return None


def load_config(
    suite: Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    database_url: str | None = None,
    project: str | None = None,
    base_branch: str | None = None,
    host_label: str | None = None,
) -> Config:
    """Build the Config: defaults, then the file, then ``PERFGATE_*`` variables, then flags."""
    environ = os.environ if env is None else env
    path = suite if suite is not None else find_config_file(cwd or Path.cwd())
    config = read_config_file(path) if path is not None else Config()
    flags = dict(
        database_url=database_url, project=project, base_branch=base_branch, host_label=host_label
    )
    variables = {name: environ.get(f"PERFGATE_{name.upper()}") or None for name in flags}
    named = environ.get("PERFGATE_PROJECT")
    if project is None and named is not None and not named.strip():
        # an unset CI variable would file the runs under the suite's (or the default) project
        raise ConfigError("PERFGATE_PROJECT is set but empty: give a project name or unset it")
    return config.with_overrides(**variables).with_overrides(**flags)
