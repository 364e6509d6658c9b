"""Which benchmark definition the base side of an A/B pair runs (no processes: suite files
in two trees)."""

from __future__ import annotations

from pathlib import Path

from perfgate.app.specs import base_side_spec, benchmark_specs
from perfgate.config import read_config_file

SUITE = """
[defaults]
repeats = 5
[[benchmarks]]
name = "kernel"
entry = "bench_ab:build"
params = {{ size = {size} }}
"""


def trees(tmp_path: Path, head: str, base: str | None) -> tuple[Path, Path]:
    head_dir, base_dir = tmp_path / "head", tmp_path / "base"
    (head_dir / "bench").mkdir(parents=True)
    (base_dir / "bench").mkdir(parents=True)
    (head_dir / "bench" / "perfgate.toml").write_text(head)
    if base is not None:
        (base_dir / "bench" / "perfgate.toml").write_text(base)
    return head_dir, base_dir


def test_the_base_runs_its_own_params_measured_as_the_head_is(tmp_path: Path) -> None:
    head_dir, base_dir = trees(tmp_path, SUITE.format(size=48), SUITE.format(size=32))
    config = read_config_file(head_dir / "bench" / "perfgate.toml")
    (spec,) = benchmark_specs(config, overrides={"repeats": 2})
    base = base_side_spec(spec, config, head_dir=head_dir, base_dir=base_dir)
    assert base.params == {"size": 32}
    assert base.repeats == spec.repeats == 2  # the head's protocol on both sides


def test_flags_a_new_suite_and_a_new_benchmark_keep_the_heads_entry(tmp_path: Path) -> None:
    head_dir, base_dir = trees(tmp_path, SUITE.format(size=48), None)
    config = read_config_file(head_dir / "bench" / "perfgate.toml")
    (spec,) = benchmark_specs(config)
    # no suite file at the base commit
    assert base_side_spec(spec, config, head_dir=head_dir, base_dir=base_dir) == spec
    # --param on the command line: both sides run what was asked
    (flagged,) = benchmark_specs(config, params={"size": 64})
    (base_dir / "bench" / "perfgate.toml").write_text(SUITE.format(size=32))
    assert base_side_spec(flagged, config, head_dir=head_dir, base_dir=base_dir) == flagged
    # the base's suite has no benchmark of that name
    renamed = SUITE.format(size=32).replace('"kernel"', '"other"')
    (base_dir / "bench" / "perfgate.toml").write_text(renamed)
    assert base_side_spec(spec, config, head_dir=head_dir, base_dir=base_dir) == spec


def test_a_base_suite_that_does_not_load_is_warned_about(tmp_path: Path) -> None:
    head_dir, base_dir = trees(tmp_path, SUITE.format(size=48), "[[benchmarks]\nname = ")
    config = read_config_file(head_dir / "bench" / "perfgate.toml")
    (spec,) = benchmark_specs(config)
    warned: list[str] = []
    got = base_side_spec(spec, config, head_dir=head_dir, base_dir=base_dir, warn=warned.append)
    assert got == spec
    assert len(warned) == 1 and "base commit's suite cannot be used" in warned[0]
