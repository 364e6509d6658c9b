"""GitHub Actions annotations of a gate: ``::error`` and ``::warning`` workflow commands.

The runner turns each such line of a step's output into an annotation on the run's summary
page and, for a pull request, in its checks tab, so a regression is visible without opening
the log. The command format and its escaping follow GitHub's "Workflow commands" page and
``@actions/core`` (``::error title=T::MESSAGE``; in the message ``%``, CR and LF are
percent-encoded, in a property value ``:`` and ``,`` too). Pure: lines in, lines out.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from perfgate.models import Comparison, GateResult, Verdict
from perfgate.reporters.render import format_change, format_value, metric_tags
from perfgate.stats import decide

ANNOTATED = (Verdict.REGRESSION, Verdict.OVER_BUDGET, Verdict.INCONCLUSIVE)
"""The verdicts a gate annotates; the others are not news in a CI log."""


def escape_data(text: str) -> str:
    """A workflow command's message: ``%``, CR and LF percent-encoded."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: as a message, and ``:`` and ``,`` too."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


_LINE_ENDS = "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def neutralize(text: str, *, at_line_start: bool = True) -> str:
    """``text`` (what a command prints, perhaps several lines) with nothing the runner would
    act on: a line that is ``::name ...::`` after its leading blanks gets its first ``::``
    percent-encoded (``%3A%3A``), and the legacy ``##[name]`` form anywhere becomes
    ``##%5B``. So a branch named ``feat\n::error::x`` prints ``%3A%3Aerror::x`` and no
    annotation; perfgate's own commands are written apart from it. ``at_line_start``:
    whether ``text`` starts a line (False for the rest of a line written in pieces)."""
    out = []
    for line in text.splitlines(keepends=True):
        body = line.lstrip(" \t")
        if at_line_start and body.startswith("::"):
            line = line[: len(line) - len(body)] + "%3A%3A" + body[2:]
        out.append(line.replace("##[", "##%5B"))
        at_line_start = ends_line(line)
    return "".join(out)


def ends_line(text: str) -> bool:
    """Whether ``text`` ends with a line break (what follows it starts a line)."""
    return text.rstrip(_LINE_ENDS) != text


def command(name: str, message: str, **properties: str) -> str:
    """One workflow command line, ``::name k=v,k=v::message``, escaped."""
    props = ",".join(f"{k}={escape_property(v)}" for k, v in properties.items() if v)
    return f"::{name}{' ' + props if props else ''}::{escape_data(message)}"


def summary_line(c: Comparison) -> str:
    """What a comparison found, in one line: the values, the change and the reason."""
    if c.kind == "budget":
        values = f"{format_value(c.current_centre, c.unit)}, budget {c.budget}"
    elif c.baseline_centre is None:
        values = format_value(c.current_centre, c.unit)
    else:
        values = (
            f"{format_value(c.baseline_centre, c.unit)} -> "
            f"{format_value(c.current_centre, c.unit)} ({format_change(c)})"
        )
    tags = metric_tags(c).strip()
    return f"{tags + ' ' if tags else ''}{values}: {c.reason}".strip()


def github_annotations(result: GateResult, fail_on: Collection[Verdict]) -> list[str]:
    """One line per deciding comparison whose verdict is in :data:`ANNOTATED`: ``::error``
    when its verdict fails the gate (``fail_on``: by default a regression and a breached
    budget), else ``::warning`` (an inconclusive one, or a regression under a policy that
    lets it pass)."""
    lines = []
    for c in decide.deciding(result.comparisons):
        if c.verdict not in ANNOTATED:
            continue
        level = "error" if decide.fails_gate(c.verdict, fail_on) else "warning"
        title = f"perfgate: {c.benchmark} {c.metric} {c.verdict.value.replace('_', ' ')}"
        lines.append(command(level, summary_line(c), title=title))
    return lines


def annotations_wanted(env: Mapping[str, str], flag: bool | None) -> bool:
    """``--annotations/--no-annotations`` when given, else whether this is a GitHub Actions
    job (``GITHUB_ACTIONS=true``)."""
    return flag if flag is not None else env.get("GITHUB_ACTIONS") == "true"
