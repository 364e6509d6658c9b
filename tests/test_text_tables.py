"""Terminal tables line up by what a terminal shows, not by code points: Chinese benchmark
names take two columns a character."""

from __future__ import annotations

from helpers import make_run

from perfgate.reporters.render import display_width, pad, render_runs_text


def _starts(line: str, cell: str) -> int:
    """The screen column where ``cell`` begins in ``line``."""
    return display_width(line[: line.index(cell)])


def test_cjk_benchmark_names_keep_the_columns_in_line() -> None:
    runs = [
        make_run("a" * 12, benchmark="训练_基准", branch="main"),
        make_run("b" * 12, benchmark="mlp", branch="feat"),
        make_run("c" * 12, benchmark="大模型训练_基准", branch="dev"),
    ]
    lines = render_runs_text(runs).splitlines()
    header, rule, *rows = lines[: 2 + len(runs)]
    column = _starts(header, "branch")
    assert [
        _starts(row, branch) for row, branch in zip(rows, ["main", "feat", "dev"], strict=True)
    ] == [column] * len(runs)
    # The rule under "benchmark" is as wide as the widest name on screen: 15 columns, where
    # counting code points (8) would have left it at the header's 9.
    assert rule.split("  ")[1] == "-" * 15


def test_display_width_and_pad() -> None:
    assert display_width("训练_基准") == 9
    assert display_width("mlp") == 3
    assert display_width("e\u0301") == 1  # a combining accent takes no column
    assert display_width("a\tb") == 2  # a control character counts as nothing
    assert pad("训练", 6) == "训练  "
    assert pad("too long", 3) == "too long"
