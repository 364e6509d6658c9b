"""A gate as JUnit XML, for the test tabs CI systems already have (GitLab's ``reports:
junit``, Jenkins' JUnit plugin, GitHub test-report actions).

The shape is the one those readers share (Jenkins' xunit ``junit-10.xsd``; GitLab reads the
same elements): ``<testsuites>`` holding one ``<testsuite>`` per benchmark, each with
``name``, ``tests``, ``failures``, ``errors`` and ``skipped``, holding one ``<testcase>``
(``name``, ``classname``) per comparison that decides the gate. A verdict the policy fails
on is a ``<failure>``; ``no_baseline`` and ``incomparable`` are ``<skipped>`` (nothing was
judged); every other verdict passes. Each case's ``<system-out>`` says what was measured.
Pure: a GateResult in, bytes out.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Collection

from perfgate.models import Comparison, GateResult, Verdict
from perfgate.reporters.annotations import summary_line
from perfgate.stats import decide

SKIPPED = (Verdict.NO_BASELINE, Verdict.INCOMPARABLE)

# XML 1.0 cannot hold most control characters, even escaped.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _text(text: str) -> str:
    return _NOT_XML.sub("?", text)


def case_name(c: Comparison) -> str:
    """A test case's name: the metric, with ``(A/B)`` for a paired comparison and the
    budget for a budget's (a metric can be judged both ways in one gate)."""
    name = c.metric + (" (A/B)" if c.method == "paired" else "")
    if c.kind == "budget":
        name += f" (budget {c.budget})" if c.budget else " (budget)"
    return name


def render_junit(result: GateResult, fail_on: Collection[Verdict]) -> bytes:
    """The JUnit XML document of ``result`` under the policy ``fail_on`` (UTF-8)."""
    by_benchmark: dict[str, list[Comparison]] = {}
    for c in decide.deciding(result.comparisons):
        by_benchmark.setdefault(c.benchmark, []).append(c)
    root = ET.Element("testsuites", name="perfgate")
    for benchmark, cases in by_benchmark.items():
        fails = [decide.fails_gate(c.verdict, fail_on) for c in cases]
        skips = [c.verdict in SKIPPED and not f for c, f in zip(cases, fails, strict=True)]
        counts = {"tests": len(cases), "failures": sum(fails), "errors": 0, "skipped": sum(skips)}
        attrs = {"name": _text(benchmark), **{k: str(v) for k, v in counts.items()}}
        suite = ET.SubElement(root, "testsuite", attrs)
        properties = ET.SubElement(suite, "properties")
        for name, value in (("branch", result.branch), ("against", result.against)):
            ET.SubElement(properties, "property", name=name, value=_text(value))
        for c, failed, skipped in zip(cases, fails, skips, strict=True):
            case = ET.SubElement(
                suite, "testcase", name=_text(case_name(c)), classname=_text(benchmark)
            )
            message = _text(summary_line(c))
            if failed:
                ET.SubElement(
                    case, "failure", type=c.verdict.value, message=_text(c.reason)
                ).text = message
            elif skipped:
                ET.SubElement(case, "skipped", message=_text(f"{c.verdict.value}: {c.reason}"))
            ET.SubElement(case, "system-out").text = f"verdict: {c.verdict.value}\n{message}\n"
    for k in ("tests", "failures", "errors"):  # junit-10.xsd: no skipped here
        root.set(k, str(sum(int(s.attrib[k]) for s in root)))
    ET.indent(root)
    body: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return body + b"\n"
