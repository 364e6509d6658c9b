"""The gate in the formats CI systems already read: GitHub workflow-command annotations,
JUnit XML (GitLab's reports:junit, Jenkins), a GitLab metrics report, and click's shell
completion. Real stores, the real CLI; the outputs are read back the way their consumers
read them (GitHub's escaping undone, ElementTree and xmllint with the JUnit schema Jenkins
checks against, GitLab's metrics line parser, prometheus_client's OpenMetrics parser,
promtool)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import fill, perfgate, record

from perfgate.models import Comparison, Direction, GateResult, Verdict
from perfgate.reporters.annotations import escape_data, escape_property, github_annotations

# The shape of Jenkins' xunit junit-10.xsd (GitLab reads the same elements), in brief:
# testsuite needs name, tests, failures and errors; testcase needs name; a case holds
# failure / error / skipped / system-out in any order; testsuites has no skipped count.
JUNIT_XSD = """<?xml version="1.0" encoding="UTF-8"?>
<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema">
  <xs:complexType name="outcome" mixed="true">
    <xs:attribute name="type" type="xs:string"/>
    <xs:attribute name="message" type="xs:string"/>
  </xs:complexType>
  <xs:element name="property">
    <xs:complexType>
      <xs:attribute name="name" type="xs:string" use="required"/>
      <xs:attribute name="value" type="xs:string" use="required"/>
    </xs:complexType>
  </xs:element>
  <xs:element name="properties">
    <xs:complexType><xs:sequence>
      <xs:element ref="property" minOccurs="0" maxOccurs="unbounded"/>
    </xs:sequence></xs:complexType>
  </xs:element>
  <xs:element name="testcase">
    <xs:complexType>
      <xs:choice minOccurs="0" maxOccurs="unbounded">
        <xs:element name="failure" type="outcome"/>
        <xs:element name="error" type="outcome"/>
        <xs:element name="skipped" type="outcome"/>
        <xs:element name="system-out" type="xs:string"/>
        <xs:element name="system-err" type="xs:string"/>
      </xs:choice>
      <xs:attribute name="name" type="xs:string" use="required"/>
      <xs:attribute name="classname" type="xs:string"/>
      <xs:attribute name="time" type="xs:string"/>
    </xs:complexType>
  </xs:element>
  <xs:element name="testsuite">
    <xs:complexType>
      <xs:choice minOccurs="0" maxOccurs="unbounded">
        <xs:element ref="properties"/>
        <xs:element ref="testcase"/>
        <xs:element name="system-out" type="xs:string"/>
        <xs:element name="system-err" type="xs:string"/>
      </xs:choice>
      <xs:attribute name="name" type="xs:string" use="required"/>
      <xs:attribute name="tests" type="xs:nonNegativeInteger" use="required"/>
      <xs:attribute name="failures" type="xs:nonNegativeInteger" use="required"/>
      <xs:attribute name="errors" type="xs:nonNegativeInteger" use="required"/>
      <xs:attribute name="skipped" type="xs:nonNegativeInteger"/>
      <xs:attribute name="time" type="xs:string"/>
      <xs:attribute name="timestamp" type="xs:string"/>
    </xs:complexType>
  </xs:element>
  <xs:element name="testsuites">
    <xs:complexType>
      <xs:sequence>
        <xs:element ref="testsuite" minOccurs="0" maxOccurs="unbounded"/>
      </xs:sequence>
      <xs:attribute name="name" type="xs:string"/>
      <xs:attribute name="tests" type="xs:nonNegativeInteger"/>
      <xs:attribute name="failures" type="xs:nonNegativeInteger"/>
      <xs:attribute name="errors" type="xs:nonNegativeInteger"/>
      <xs:attribute name="time" type="xs:string"/>
    </xs:complexType>
  </xs:element>
</xs:schema>
"""


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Main's history of four benchmarks and a feature branch where ``mlp`` regressed,
    ``cnn`` did not move, ``noisy`` (its main runs +-25% apart) is inconclusive and
    ``fresh`` has no baseline."""
    url = f"sqlite:///{tmp_path_factory.mktemp('ci') / 's.db'}"
    runs = [record(i, 20.0, benchmark="mlp") for i in range(8)]
    runs += [record(i, 7.0, benchmark="cnn", seed=2) for i in range(8)]
    runs += [
        record(i, 10.0 * (1 + 0.25 * (-1) ** i), benchmark="noisy", seed=3, noise=0.02)
        for i in range(6)
    ]
    runs += [
        record(20, 26.0, benchmark="mlp", branch="feat"),
        record(20, 7.0, benchmark="cnn", branch="feat", seed=2),
        record(20, 10.3, benchmark="noisy", branch="feat", seed=3),
        record(20, 5.0, benchmark="fresh", branch="feat"),
    ]
    fill(url, runs)
    return url


def gate(db: str, *args: str, env: dict[str, str | None] | None = None) -> tuple[int, str, str]:
    """``perfgate gate`` of feat against main, out of CI unless ``env`` says otherwise."""
    result = perfgate(
        None, "gate", "--db", db, "--branch", "feat", "--against", "main", *args, env=env
    )
    return result.returncode, result.stdout, result.stderr


def _unescape(text: str) -> str:
    return text.replace("%0A", "\n").replace("%0D", "\r").replace("%25", "%")


def parse_command(line: str) -> tuple[str, dict[str, str], str]:
    """A workflow command line as GitHub's runner reads it: name, properties, message."""
    assert line.startswith("::"), line
    head, sep, message = line[2:].partition("::")
    assert sep, line
    name, _, props = head.partition(" ")
    properties = {}
    for pair in filter(None, props.split(",")):
        key, _, value = pair.partition("=")
        properties[key] = _unescape(value.replace("%3A", ":").replace("%2C", ","))
    return name, properties, _unescape(message)


def commands(text: str) -> list[tuple[str, dict[str, str], str]]:
    return [parse_command(line) for line in text.splitlines() if line.startswith("::")]


def test_github_annotations_mark_each_regression_and_inconclusive(db: str) -> None:
    code, out, _ = gate(db, env={"GITHUB_ACTIONS": "true"})
    assert code == 1
    found = commands(out)
    assert [(name, p["title"]) for name, p, _ in found] == [
        ("error", "perfgate: mlp step_time_ms regression"),
        ("warning", "perfgate: noisy step_time_ms inconclusive"),
    ]
    # the message says what moved, by how much, and why; one line in the log
    assert "20 ms -> 25.9 ms (+29.7%" in found[0][2] and "minimum effect" in found[0][2]
    assert all("\n" not in line for line in out.splitlines() if line.startswith("::"))


def test_annotations_follow_the_policy_and_the_environment(db: str) -> None:
    code, out, _ = gate(db, "--fail-on", "regression,inconclusive", env={"GITHUB_ACTIONS": "true"})
    assert code == 1
    assert [name for name, _, _ in commands(out)] == ["error", "error"]
    # outside GitHub Actions, or switched off: none
    assert commands(gate(db)[1]) == []
    assert commands(gate(db, "--no-annotations", env={"GITHUB_ACTIONS": "true"})[1]) == []
    assert [n for n, _, _ in commands(gate(db, "--annotations")[1])] == ["error", "warning"]
    # with --json stdout stays one JSON document; the runner reads commands on stderr too
    code, out, err = gate(db, "--json", env={"GITHUB_ACTIONS": "true"})
    assert json.loads(out)["verdict"] == "regression"
    assert [n for n, _, _ in commands(err)] == ["error", "warning"]


def test_annotation_escaping_survives_what_a_reason_and_a_name_can_hold() -> None:
    reason = "50% slower\r\nsee: a,b::c"
    c = Comparison(
        benchmark="bert, seq:512",
        metric="step_time_ms",
        unit="ms",
        direction=Direction.LOWER_IS_BETTER,
        verdict=Verdict.REGRESSION,
        reason=reason,
        current_run_id="r",
        current_centre=30.0,
        baseline_centre=20.0,
        change_pct=50.0,
    )
    result = GateResult("feat", "main", Verdict.REGRESSION, (c,))
    (line,) = github_annotations(result, {Verdict.REGRESSION})
    # the title's ':' and ',' are encoded, so the first '::' after it ends the header;
    # the message may hold '::' (the runner takes the rest of the line as it is)
    assert line.startswith("::error title=perfgate%3A bert%2C seq%3A512 step_time_ms ")
    assert "\n" not in line and "\r" not in line
    name, props, message = parse_command(line)
    assert name == "error"
    assert props == {"title": "perfgate: bert, seq:512 step_time_ms regression"}
    assert message.endswith(reason)
    assert escape_data("100%\n") == "100%25%0A"
    assert escape_property("a:b,c%") == "a%3Ab%2Cc%25"


def _xmllint_validates(path: Path, tmp_path: Path) -> None:
    xmllint = shutil.which("xmllint")
    if xmllint is None:
        return  # ElementTree's checks below still run; CI installs libxml2-utils
    schema = tmp_path / "junit.xsd"
    schema.write_text(JUNIT_XSD)
    done = subprocess.run(
        [xmllint, "--noout", "--schema", str(schema), str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_junit_has_a_suite_per_benchmark_and_a_case_per_comparison(db: str, tmp_path: Path) -> None:
    path = tmp_path / "reports" / "perfgate-junit.xml"
    code, _, err = gate(db, "--junit", str(path))
    assert code == 1 and f"wrote {path}" in err
    _xmllint_validates(path, tmp_path)
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {"mlp", "cnn", "noisy", "fresh"}
    counts = {
        name: tuple(s.get(k) for k in ("tests", "failures", "errors", "skipped"))
        for name, s in suites.items()
    }
    assert counts == {
        "mlp": ("1", "1", "0", "0"),
        "cnn": ("1", "0", "0", "0"),
        "noisy": ("1", "0", "0", "0"),
        "fresh": ("1", "0", "0", "1"),
    }
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("4", "1", "0")
    (case,) = suites["mlp"].findall("testcase")
    assert (case.get("name"), case.get("classname")) == ("step_time_ms", "mlp")
    failure = case.find("failure")
    assert failure is not None and failure.get("type") == "regression"
    assert "29.7% slower" in (failure.get("message") or "")
    (fresh,) = suites["fresh"].findall("testcase")
    skipped = fresh.find("skipped")
    assert skipped is not None and "no_baseline" in (skipped.get("message") or "")
    (noisy,) = suites["noisy"].findall("testcase")
    assert noisy.find("failure") is None and "inconclusive" in (noisy.findtext("system-out") or "")
    props = {p.get("name"): p.get("value") for p in suites["mlp"].iter("property")}
    assert props == {"branch": "feat", "against": "main"}


def test_junit_failures_follow_fail_on(db: str, tmp_path: Path) -> None:
    path = tmp_path / "j.xml"
    code, _, _ = gate(db, "--junit", str(path), "--fail-on", "inconclusive")
    assert code == 1
    _xmllint_validates(path, tmp_path)
    root = ET.parse(path).getroot()
    failed = {
        s.get("name"): [f.get("type") for f in s.iter("failure")] for s in root.iter("testsuite")
    }
    assert failed == {"mlp": [], "cnn": [], "noisy": ["inconclusive"], "fresh": []}


def gitlab_metrics(text: str) -> dict[str, str]:
    """What GitLab keeps of a metrics report: its parser drops each line from the first
    '#', splits it like a shell, and takes the first two words as name and value."""
    out = {}
    for line in text.splitlines():
        words = shlex.split(line.split("#", 1)[0])
        if len(words) >= 2:
            out[words[0]] = words[1]
    return out


def test_gitlab_metrics_report_reads_back_in_gitlab_and_openmetrics(
    db: str, tmp_path: Path
) -> None:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    path = tmp_path / "metrics.txt"
    code, _, err = gate(db, "--gitlab-metrics", str(path))
    assert code == 1, err
    text = path.read_text(encoding="utf-8")
    seen = gitlab_metrics(text)
    name = "perfgate_step_time_seconds{benchmark=%s,metric=step_time_ms,rank=}"
    assert set(seen) == {name % b for b in ("cnn", "fresh", "mlp", "noisy")}
    assert float(seen[name % "mlp"]) == pytest.approx(0.026, rel=0.02)
    families = list(text_string_to_metric_families(text))  # valid OpenMetrics
    assert [f.name for f in families] == ["perfgate_step_time_seconds"]
    assert len(families[0].samples) == 4
    promtool = shutil.which("promtool")
    if promtool is not None:
        done = subprocess.run(
            [promtool, "check", "metrics"], input=text, capture_output=True, text=True,
            timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr


def test_an_output_file_that_cannot_be_written_is_a_warning(db: str, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, out, err = gate(db, "--junit", str(blocker / "j.xml"))
    assert code == 1  # the verdict's exit code, not an infrastructure error
    assert f"warning: cannot write {blocker / 'j.xml'}" in err
    assert "REGRESSION" in out


def test_check_takes_the_ci_output_flags() -> None:
    from perfgate.cli.check import check

    names = {p.name for p in check.params}
    assert {"junit", "gitlab_metrics", "annotations"} <= names


def test_bash_completion_script_comes_from_click() -> None:
    # The installed entry point in a process of its own, as a shell calls it for completion.
    env = {**os.environ, "_PERFGATE_COMPLETE": "bash_source"}
    done = subprocess.run(
        [sys.executable, "-m", "perfgate"], env=env, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "_perfgate_completion()" in done.stdout
    assert "complete -o nosort -F _perfgate_completion perfgate" in done.stdout
    # and the completions themselves: subcommands, then a command's options
    env = {
        **env,
        "_PERFGATE_COMPLETE": "bash_complete",
        "COMP_WORDS": "perfgate ga",
        "COMP_CWORD": "1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "perfgate"], env=env, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert "plain,gate" in done.stdout.splitlines()
    env = {**env, "COMP_WORDS": "perfgate gate --ju", "COMP_CWORD": "2"}
    done = subprocess.run(
        [sys.executable, "-m", "perfgate"], env=env, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert "plain,--junit" in done.stdout.splitlines()
