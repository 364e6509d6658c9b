"""Known-answer tests of the history analysis (change points), on fixed series."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from perfgate.app import detect_series
from perfgate.errors import ParseError, UsageError
from perfgate.parsers.series import read_series_csv
from perfgate.reporters.render import change_points_to_json
from perfgate.stats.changepoints import (
    MIN_SEGMENT,
    ChangePoint,
    detect_change_points,
)


def noisy(n: int, cov: float, seed: int, level: float = 100.0) -> np.ndarray:
    """n runs of log-normal noise at CoV ``cov`` around ``level`` (fixed seed)."""
    return level * np.exp(cov * np.random.default_rng(seed).standard_normal(n))


def stepped(n: int, cov: float, seed: int, steps: dict[int, float]) -> np.ndarray:
    """Noise with level changes: ``steps`` maps the first run of a new level to its factor."""
    x = noisy(n, cov, seed)
    for index, factor in steps.items():
        x[index:] *= factor
    return x


def indexes(values: np.ndarray | list[float], **kwargs: float) -> list[int]:
    return [p.index for p in detect_change_points(list(values), **kwargs)]  # type: ignore[arg-type]


# Known answers -------------------------------------------------------------------------------


def test_single_step_up() -> None:
    points = detect_change_points(list(stepped(60, 0.01, 1, {30: 1.10})))
    assert [p.index for p in points] == [30]
    (p,) = points
    assert p.before == pytest.approx(100.0, rel=0.01)
    assert p.after == pytest.approx(110.0, rel=0.01)
    assert p.change_pct == pytest.approx(10.0, abs=1.0)
    assert p.p_value < 1e-6
    assert p.confidence == pytest.approx(1.0 - p.p_value)


def test_single_step_down() -> None:
    points = detect_change_points(list(stepped(80, 0.02, 2, {40: 0.92})))
    assert [p.index for p in points] == [40]
    assert points[0].change_pct == pytest.approx(-8.0, abs=1.5)


def test_two_steps_up_then_back_down() -> None:
    assert indexes(stepped(130, 0.01, 3, {40: 1.06, 90: 1 / 1.06})) == [40, 90]


def test_three_steps_in_noisy_heavy_series() -> None:
    x = stepped(300, 0.03, 4, {70: 1.12, 150: 0.90, 230: 1.07})
    assert indexes(x) == [70, 150, 230]


def test_single_run_spikes_are_not_change_points() -> None:
    x = noisy(100, 0.02, 5)
    for i in (10, 37, 38, 60, 85, 99):
        x[i] *= 1.5
    x[20] *= 0.7
    assert indexes(x) == []


def test_blip_shorter_than_min_segment_is_not_a_change_point() -> None:
    x = noisy(100, 0.01, 6)
    x[50 : 50 + MIN_SEGMENT - 1] *= 1.2
    assert indexes(x) == []
    x = noisy(100, 0.01, 6)
    x[50 : 50 + MIN_SEGMENT + 5] *= 1.2  # held long enough: up, then back down
    assert indexes(x) == [50, 50 + MIN_SEGMENT + 5]


def test_flat_noise_has_no_change_point() -> None:
    assert indexes(noisy(200, 0.03, 7)) == []


def test_flat_noise_false_alarms_are_rare() -> None:
    # The search looks at short intervals too (a 6-run revert is a change), so a short
    # excursion of pure noise is proposed more often than by plain binary segmentation;
    # the merge keeps it rare: 5 false change points in these 100 series (1 before; the
    # target is at most 10 per 100 change-free series).
    alarms = sum(len(indexes(noisy(150, 0.03, seed))) for seed in range(100, 200))
    assert alarms <= 5


def test_step_below_min_effect_is_not_reported() -> None:
    x = stepped(100, 0.001, 8, {50: 1.008})  # 0.8%: highly significant, but small
    assert indexes(x) == []
    assert indexes(x, min_effect_pct=0.5) == [50]


def test_change_in_the_last_runs_waits_for_min_segment_runs() -> None:
    # A 10% step 3 runs before the end: only 3 runs of the new level, fewer than
    # MIN_SEGMENT, so it is not reported yet; with MIN_SEGMENT runs after it, it is.
    assert MIN_SEGMENT == 5
    assert indexes(stepped(60, 0.01, 9, {57: 1.10})) == []
    assert indexes(stepped(62, 0.01, 9, {57: 1.10})) == [57]


def test_a_regression_reverted_after_6_runs_is_a_regression_and_its_revert() -> None:
    found = 0
    for seed in range(20):
        x = noisy(100, 0.01, 300 + seed)
        x[50:56] *= 1.10
        points = detect_change_points(list(x))
        if [p.index for p in points] == [50, 56]:
            assert points[0].change_pct == pytest.approx(10.0, abs=2.0)
            assert points[1].change_pct == pytest.approx(-9.0, abs=2.0)
            found += 1
    assert found >= 16  # 80%


def test_a_load_cycle_is_not_a_change() -> None:
    # A 3% load cycle with a 30-run period: every half period looks like a step to a rank
    # test, but neighbouring runs move together (serial dependence), so none is a change.
    t = np.arange(100)
    with_points = 0
    for seed in range(20):
        phase = np.random.default_rng(seed).uniform(0.0, 2.0 * np.pi)
        x = noisy(100, 0.01, 400 + seed) * (1.0 + 0.03 * np.sin(2 * np.pi * t / 30 + phase))
        with_points += bool(indexes(x))
    assert with_points <= 1  # 5%
    # A step in the same cycle still is one.
    x = noisy(200, 0.01, 420) * (1.0 + 0.03 * np.sin(2 * np.pi * np.arange(200) / 30))
    x[120:] *= 1.12
    assert indexes(x) == [120]


def test_a_load_cycle_does_not_cut_the_gate_window() -> None:
    from perfgate.stats.window import runs_since_last_change

    t = np.arange(100)
    x = noisy(100, 0.01, 430) * (1.0 + 0.03 * np.sin(2 * np.pi * t / 30))
    series = [(f"r{i}", float(v)) for i, v in enumerate(x)]
    assert runs_since_last_change({"m": series}, deterministic=lambda _: False) == {}


def test_heavy_tailed_outliers_do_not_fake_or_hide_a_change() -> None:
    rng = np.random.default_rng(10)
    x = 100.0 * np.exp(0.01 * rng.standard_t(2, size=200))  # Student-t, 2 degrees of freedom
    x[[15, 33, 120, 121, 170]] *= [3.0, 0.5, 2.5, 2.0, 10.0]
    assert indexes(x) == []
    x[100:] *= 1.05
    assert indexes(x) == [100]


def test_slow_drift_is_not_a_change_point() -> None:
    ramp = np.clip((np.arange(250) - 50) / 150, 0.0, 1.0)  # +6% over 150 runs
    x = noisy(250, 0.01, 11) * 1.06**ramp
    assert indexes(x) == []


def test_a_35_percent_ramp_is_not_a_staircase_of_steps() -> None:
    # +35% over runs 50..150 of 200, 1% noise: each 10 runs climb 3.5%, so the rank search
    # proposes a step every few runs; one ramp explains them all, and none is a change point
    # (the ramp is one drift: perfgate.stats.drift reports it, see tests/test_drift.py).
    ramp = np.clip((np.arange(200) - 50) / 100, 0.0, 1.0)
    for seed in (22, 30, 31):
        assert indexes(noisy(200, 0.01, seed) * 1.35**ramp) == []
    # The same climb as two steps of 16% is two change points.
    x = stepped(200, 0.01, 22, {80: 1.16, 120: 1.16})
    assert indexes(x) == [80, 120]


def test_step_inside_a_drift_is_still_found() -> None:
    ramp = np.clip(np.arange(250) / 250, 0.0, 1.0)  # +4% over the whole series
    x = noisy(250, 0.01, 12) * 1.04**ramp
    x[140:] *= 1.08
    assert indexes(x) == [140]


def test_variance_change_alone_is_not_a_change_point() -> None:
    rng = np.random.default_rng(13)
    sigma = np.where(np.arange(200) < 100, 0.01, 0.03)
    x = 100.0 * np.exp(sigma * rng.standard_normal(200))
    assert indexes(x) == []


def test_short_constant_and_tied_series() -> None:
    assert indexes([1.0] * (2 * MIN_SEGMENT - 1)) == []
    assert indexes([5.0] * 50) == []
    assert indexes([1.0] * 20 + [2.0] * 20) == [20]
    assert indexes([]) == []


def test_non_positive_values_are_allowed() -> None:
    x = np.concatenate([np.zeros(20), np.full(20, 3.0)]) + noisy(40, 0.01, 14) - 100.0
    points = detect_change_points(list(x))
    assert [p.index for p in points] == [20]
    assert math.isfinite(points[0].change_pct)


def test_deterministic_and_input_type_independent() -> None:
    x = stepped(300, 0.05, 15, {80: 1.07, 200: 0.95})
    first = detect_change_points(list(x))
    assert detect_change_points(list(x)) == first
    assert detect_change_points(tuple(float(v) for v in x)) == first
    assert detect_change_points(x) == first  # type: ignore[arg-type]


def test_bad_arguments() -> None:
    with pytest.raises(UsageError):
        detect_change_points([1.0, 2.0], min_segment=1)
    with pytest.raises(UsageError):
        detect_change_points([1.0, 2.0], alpha=0.0)
    with pytest.raises(UsageError):
        detect_change_points([1.0, 2.0], min_effect_pct=-1.0)
    with pytest.raises(UsageError):
        detect_change_points([1.0, float("nan")] * 10)


def test_p_value_is_calibrated_on_change_free_segments() -> None:
    # The scan p-value of the best split of pure noise is roughly uniform: about 10% of
    # change-free series have one below 0.1, whatever the noise distribution.
    from perfgate.stats.changepoints import _best_split

    rng = np.random.default_rng(16)
    ps = []
    for _ in range(400):
        split = _best_split(rng.standard_exponential(120), MIN_SEGMENT)
        assert split is not None
        ps.append(split.p_value)
    share = float(np.mean(np.asarray(ps) < 0.1))
    assert 0.05 < share < 0.15


def test_a_long_series_with_four_steps() -> None:
    # The runtime on a long series is measured in bench/detection_history.py, not here.
    x = stepped(1000, 0.01, 17, {150: 1.05, 400: 1.1, 420: 1 / 1.1, 700: 0.95})
    assert indexes(x) == [150, 400, 420, 700]


# JSON ---------------------------------------------------------------------------------------


def test_json_shape() -> None:
    points = detect_change_points(list(stepped(60, 0.01, 1, {30: 1.10})))
    obj = change_points_to_json(points)
    assert list(obj) == ["change_points", "details", "drift"]
    assert obj["change_points"] == [30]
    details = obj["details"]
    assert isinstance(details, list)
    assert list(details[0]) == [
        *("index", "before", "after", "change_pct", "p_value", "confidence", "verdict")
    ]
    assert details[0]["index"] == 30
    assert json.loads(json.dumps(obj)) == obj
    assert change_points_to_json([]) == {"change_points": [], "details": [], "drift": None}


def test_json_non_finite_change_becomes_null() -> None:
    point = ChangePoint(
        index=5, before=0.0, after=1.0, change_pct=math.inf, p_value=0.0, confidence=1.0
    )
    obj = change_points_to_json([point])
    text = json.dumps(obj, allow_nan=False)
    assert json.loads(text)["details"][0]["change_pct"] is None


# CSV ----------------------------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "series.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_read_series_csv(tmp_path: Path) -> None:
    path = write(tmp_path, "index,value\n0,1.5\n1, 2\n\n3,1e1\n")
    assert read_series_csv(path) == ([0, 1, 3], [1.5, 2.0, 10.0])
    assert read_series_csv(str(path)) == read_series_csv(path)


def test_read_series_csv_then_detect(tmp_path: Path) -> None:
    x = stepped(60, 0.01, 1, {30: 1.10})
    rows = "".join(f"{i},{v!r}\n" for i, v in enumerate(x.tolist()))
    path = write(tmp_path, "index,value\n" + rows)
    assert indexes(read_series_csv(path)[1]) == [30]


def test_detect_names_runs_by_the_files_own_index(tmp_path: Path) -> None:
    """A series numbered from 1001 (a CI's run numbers): the change is at run 1031, the
    first of the new level, not at row position 30."""
    x = stepped(60, 0.01, 1, {30: 1.10})
    rows = "".join(f"{1001 + i},{v!r}\n" for i, v in enumerate(x.tolist()))
    path = write(tmp_path, "index,value\n" + rows)
    _, points, _ = detect_series(path)
    assert [p.index for p in points] == [1031]
    ramp = "".join(f"{101 + i},{100.0 + min(max(i - 19, 0), 20)}\n" for i in range(60))
    _, points, drift = detect_series(write(tmp_path, "index,value\n" + ramp))
    assert not points and drift is not None
    assert 118 <= drift.start < drift.end <= 143  # the ramp runs from 120 to 140


@pytest.mark.parametrize(
    ("text", "where", "words"),
    [
        ("idx,value\n0,1\n", ":1:", "header"),
        ("index,value,extra\n0,1,2\n", ":1:", "header"),
        ("", ":1:", "empty"),
        ("index,value\n0,1\n1,fast\n", ":3:", "not a number"),
        ("index,value\n0,1\n1,nan\n", ":3:", "not finite"),
        ("index,value\n0,inf\n", ":2:", "not finite"),
        ("index,value\n0,1\n1,-Infinity\n", ":3:", "not finite"),
        ("index,value\n0,1\n2,1\n2,1\n", ":4:", "not greater"),
        ("index,value\n3,1\n1,1\n", ":3:", "not greater"),
        ("index,value\n0,1\nx,1\n", ":3:", "not an integer"),
        ("index,value\n0,1\n1\n", ":3:", "2 fields"),
        ("index,value\n", "", "empty"),
        ("index,value\n\n\n", "", "empty"),
    ],
)
def test_read_series_csv_errors(tmp_path: Path, text: str, where: str, words: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ParseError) as info:
        read_series_csv(path)
    message = str(info.value)
    assert message.startswith(str(path) + where)
    assert words in message
    assert "\n" not in message


def test_read_series_csv_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.csv"
    with pytest.raises(ParseError, match="nope.csv: no such file"):
        read_series_csv(path)


# Never raises (issue 42 item 14) -------------------------------------------------------------

CYCLE_FIXTURE = Path(__file__).parent / "data" / "changepoints" / "cycle_index_error.csv"


def _random_series(rng: np.random.Generator) -> np.ndarray:
    """One finite series of a random length (0-400 runs) and shape: noise of several
    families and scales, steps, reverts, cycles, ramps, spikes, ties, zeros, signs."""
    n = int(rng.choice([rng.integers(0, 25), rng.integers(0, 120), rng.integers(0, 400)]))
    t = np.arange(n, dtype=float)
    family = int(rng.integers(6))
    if family == 0:
        e = rng.standard_normal(n)
    elif family == 1:
        e = rng.standard_t(1 + float(rng.random()) * 3, size=n)
    elif family == 2:
        e = rng.integers(-2, 3, size=n).astype(float)  # heavy ties
    elif family == 3:
        e = np.where(rng.random(n) < 0.5, 0.0, 1.0)  # two runners
    elif family == 4:
        e = np.zeros(n)  # constant
    else:
        e = rng.standard_exponential(n)
    level = np.zeros(n)
    for _ in range(int(rng.integers(0, 6))):
        start = int(rng.integers(0, n + 1))
        end = start + int(rng.integers(1, 40)) if rng.random() < 0.5 else n
        level[start:end] += float(rng.normal(0.0, 0.2))
    if rng.random() < 0.3:
        period = float(rng.uniform(4.0, 60.0))
        level += float(rng.uniform(0.0, 0.1)) * np.sin(2 * np.pi * t / period + rng.random() * 6)
    if rng.random() < 0.3:
        level += float(rng.normal(0.0, 0.3)) * np.clip((t - rng.integers(0, n + 1)) / 30.0, 0, 1)
    cov = float(10.0 ** rng.uniform(-5.0, 0.0))
    x = np.exp(level + cov * np.clip(e, -30.0, 30.0))  # a Cauchy draw must not overflow
    shape = int(rng.integers(4))
    if shape == 1:
        x = x - float(np.median(x)) if n else x  # around zero, both signs
    elif shape == 2:
        x = np.round(x * 3.0)  # small integers, zeros possible
    elif shape == 3:
        x = x * float(10.0 ** rng.uniform(-12.0, 12.0))
    spikes = rng.random(n) < 0.03
    x[spikes] *= float(rng.uniform(2.0, 50.0))
    return x


@pytest.mark.parametrize("seed", range(4))
def test_the_detector_and_the_window_cut_never_raise_on_a_finite_series(seed: int) -> None:
    from perfgate.stats.window import runs_since_last_change

    rng = np.random.default_rng(4200 + seed)
    for _ in range(600):
        x = _random_series(rng)
        assert np.all(np.isfinite(x))
        points = detect_change_points(list(x))
        assert all(MIN_SEGMENT <= p.index <= x.size - MIN_SEGMENT for p in points)
        assert [p.index for p in points] == sorted({p.index for p in points})
        series = [(f"r{i}", float(v)) for i, v in enumerate(x)]
        cut = runs_since_last_change({"m": series}, deterministic=lambda _: False)
        assert set(cut) <= {"m"}


def test_a_3_percent_load_cycle_does_not_crash_the_detector() -> None:
    # 100 runs with a 3% load cycle: its last refinement moved two neighbouring change
    # points onto each other (IndexError in _split_at, via _judge_all; `perfgate detect`
    # and the gate's window cut exited 4).
    _, values = read_series_csv(CYCLE_FIXTURE)
    assert len(values) == 100
    detect_change_points(values)


def test_a_step_inside_a_creep_is_one_change_point_not_a_staircase() -> None:
    # A creep with a real step in it: the ramp alone could not stand in for the step, so
    # the creep's staircase around it stayed (about six points a series at +20% over 160
    # runs), and a step at a ramp's edge went with the ramp.
    found = []
    for seed in range(10):
        rng = np.random.default_rng([33, seed])
        t = np.arange(160)
        log_level = math.log(1.20) * t / 159 + np.where(t >= 80, math.log(1.10), 0.0)
        x = 100.0 * np.exp(log_level + 0.01 * rng.standard_normal(160))
        found.append([p.index for p in detect_change_points(list(x))])
    assert all(len(points) == 1 and abs(points[0] - 80) <= 2 for points in found), found


def test_a_clean_ramp_between_two_levels_keeps_no_point() -> None:
    for seed in range(10):
        rng = np.random.default_rng([34, seed])
        g = np.clip((np.arange(200) - 50) / 100, 0.0, 1.0)
        x = 100.0 * (1.0 + 0.35 * g) * np.exp(0.01 * rng.standard_normal(200))
        assert detect_change_points(list(x)) == [], seed
