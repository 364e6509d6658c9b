"""What to run: the suite's benchmarks or ``--workload`` names, with flag overrides, as
validated specs — one path, so a value the suite path refuses is refused here too."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from perfgate.config import Config, parse_benchmark, read_config_file
from perfgate.errors import ConfigError
from perfgate.models import BenchmarkSpec, ParamValue
from perfgate.workloads import BUILTIN, BUILTIN_KINDS


def _resolved(spec: BenchmarkSpec) -> BenchmarkSpec:
    """A spec whose workload is a built-in that exists, with the kind the workload has when
    the suite did not say."""
    if spec.workload is not None and spec.workload not in BUILTIN:
        raise ConfigError(
            f"benchmark {spec.name}: unknown workload {spec.workload!r} "
            f"(built-in: {', '.join(BUILTIN)})"
        )
    if spec.workload is not None and "slowdown" in spec.params:
        slowdown = spec.params["slowdown"]
        if (
            isinstance(slowdown, bool)
            or not isinstance(slowdown, int | float)
            or not 0 <= slowdown < float("inf")
        ):
            raise ConfigError(
                f"benchmark {spec.name}: params.slowdown: expected a number >= 0, got {slowdown!r}"
            )
    if spec.kind:
        return spec
    return replace(spec, kind=BUILTIN_KINDS.get(spec.workload or "", "training"))


def benchmark_specs(
    config: Config,
    *,
    workloads: Sequence[str] = (),
    benchmarks: Sequence[str] = (),
    overrides: Mapping[str, Any] | None = None,
    params: Mapping[str, ParamValue] | None = None,
) -> list[BenchmarkSpec]:
    """The specs ``perfgate run`` measures.

    Args:
        workloads: built-in workload names (``--workload``); each becomes a benchmark of that
            name over the suite's ``[defaults]``, validated exactly as a ``[[benchmarks]]``
            table is. Without any, the suite's benchmarks (``benchmarks`` picks some).
        overrides: spec fields given as flags (``repeats``, ``device``, ``timeout_s``, ...),
            checked as a suite's ``[[benchmarks]]`` values are.
        params: workload parameters (``--param``), over each spec's own.

    Raises:
        ConfigError: an unknown workload or benchmark name, or an invalid value (of the
            suite or of ``overrides``).
    """
    if workloads:
        specs = []
        for name in workloads:
            if name not in BUILTIN:
                hint = (
                    "; a user entry ('module:function') goes in a suite's [[benchmarks]] "
                    "table as entry = ..."
                    if ":" in name
                    else ""
                )
                raise ConfigError(
                    f"--workload {name!r}: unknown (built-in: {', '.join(BUILTIN)}){hint}"
                )
            table = {"name": name, "workload": name}
            specs.append(parse_benchmark(table, config.defaults, config.source, "--workload"))
    else:
        specs = list(config.benchmarks)
        if benchmarks:
            unknown = sorted(set(benchmarks) - {s.name for s in specs})
            if unknown:
                raise ConfigError(f"--benchmark {', '.join(unknown)}: not in the suite")
            specs = [s for s in specs if s.name in set(benchmarks)]
    extra = dict(params or {})
    flags = dict(overrides or {})
    # the flags' values refused as a suite's would be (a script's Measure(repeats=0) ran
    # nothing and recorded nothing, silently)
    as_keys = {"timeout" if k == "timeout_s" else k: v for k, v in flags.items()}
    parse_benchmark({"name": "flags", "workload": "mlp", **as_keys}, {}, "", "overrides")
    if "timeout_s" in flags:
        flags["timeout_set"] = True
    return [_resolved(replace(s, params={**s.params, **extra}, **flags)) for s in specs]


def base_side_spec(
    spec: BenchmarkSpec,
    config: Config,
    *,
    head_dir: Path,
    base_dir: Path,
    warn: Callable[[str], None] | None = None,
) -> BenchmarkSpec:
    """What the base side of an A/B pair runs for ``spec``: the benchmark as the base
    commit's own suite file defines it (``workload``, ``entry``, ``params``), measured the way
    the head is (steps, repeats, device, timeout), so a PR that changes only a suite entry's
    ``params`` is measured as the change it is, not as an A/A.

    ``spec`` itself where that cannot be told or was not asked: the suite file (``config``'s
    ``source``) lies outside the head's checkout or is missing at the base (a new suite),
    the base's suite has no benchmark of that name (a new benchmark), or flags changed what
    the head's suite says (``--workload``, ``--param``: both sides run what was asked). A base
    suite that does not parse is ``warn``-ed about and the head's entry is used.
    """
    ours = next((b for b in config.benchmarks if b.name == spec.name), None)
    if not config.source or ours is None:
        return spec
    if (spec.workload, spec.entry, spec.params) != (ours.workload, ours.entry, ours.params):
        return spec
    try:
        relative = Path(config.source).resolve().relative_to(head_dir.resolve())
    except ValueError:
        return spec
    path = base_dir / relative
    if not path.is_file():
        return spec
    try:
        theirs = next((b for b in read_config_file(path).benchmarks if b.name == spec.name), None)
        if theirs is None:
            return spec
        return _resolved(
            replace(spec, workload=theirs.workload, entry=theirs.entry, params=theirs.params)
        )
    except ConfigError as err:
        if warn is not None:
            warn(f"the base commit's suite cannot be used ({err}); its side runs the head's entry")
        return spec
