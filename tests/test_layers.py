"""The import arrows of DESIGN.md §3, checked on the source with ``ast`` (nothing is imported).

Every ``perfgate`` module is parsed and each of its imports is collected: absolute
(``import perfgate.x``, ``from perfgate.x import y``), relative (resolved against the module's
package), inside functions, under ``if TYPE_CHECKING:``, and ``importlib.import_module`` with a
literal name. Each import is then judged against one table, :data:`ALLOWED`, which is §3's
arrows written out::

    cli -> app -> {runner (+ workloads), parsers, stats, advisor, store, reporters, exporters}
        -> {metrics, models, errors, config}

plus the rules on third-party packages (torch, click, HTTP clients, SQLAlchemy).
A failure lists one line per violation: ``file:line: imports MODULE: rule``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "perfgate"

ARROWS = (
    "cli -> app -> {runner, parsers, stats, advisor, store, reporters, exporters}"
    " -> {metrics, models, errors, config}"
)

# A unit is the part of the layout an import is judged by. Top-level names of the package map to
# units; workloads/ goes with runner/. ``entry`` is the package itself (the Python API) and
# ``__main__``.
UNIT_OF_NAME = {
    "__main__": "entry",
    "cli": "cli",
    "app": "app",
    "runner": "runner",
    "workloads": "runner",
    "parsers": "parsers",
    "stats": "stats",
    "advisor": "advisor",
    "store": "store",
    "reporters": "reporters",
    "exporters": "exporters",
    "metrics": "metrics",
    "models": "models",
    "serial": "models",  # the models' to_dict / from_dict (perfgate/serial.py)
    "errors": "errors",
    "lazy": "lazy",  # a package's names imported on first use (perfgate/lazy.py)
    "config": "config",
}
MIDDLE = frozenset({"runner", "parsers", "stats", "advisor", "store", "reporters", "exporters"})
BASE = frozenset({"metrics", "models", "errors", "lazy", "config"})
RANK = {"entry": 4, "cli": 3, "app": 2} | dict.fromkeys(MIDDLE, 1) | dict.fromkeys(BASE, 0)

# Which units each unit may import (its own unit always included).
# - cli parses options, calls one app function and renders (reporters); it never touches the
#   store, nor the stages below app, directly.
# - the stages in the middle import only the base, except runner, which reads profiles through
#   the one parser dispatcher (§3: "used by run, ingest, torchrun and advise"). advisor works on
#   models.ProfileSummary and models.Comparison, so it needs neither parsers nor stats; the
#   renderers read result types from models ("every result type a renderer reads").
# - config imports only models, errors and metrics; those three import only each other.
ALLOWED: dict[str, frozenset[str]] = {
    "entry": frozenset(RANK),
    "cli": frozenset({"cli", "app", "reporters"}) | BASE,
    "app": frozenset({"app"}) | MIDDLE | BASE,
    "runner": frozenset({"runner", "parsers"}) | BASE,
    "parsers": frozenset({"parsers"}) | BASE,
    "stats": frozenset({"stats"}) | BASE,
    "advisor": frozenset({"advisor"}) | BASE,
    "store": frozenset({"store"}) | BASE,
    "reporters": frozenset({"reporters"}) | BASE,
    "exporters": frozenset({"exporters", "reporters"}) | BASE,  # the push sends reporters' text
    "config": BASE,
    "metrics": BASE - {"config"},
    "models": BASE - {"config"},
    "errors": BASE - {"config"},
    "lazy": frozenset({"lazy"}),
}

# The one decision rule (issue 2.1): every headline and the exit code ask stats/decide.py, so
# the renderers may import that one module of stats (and nothing else of it).
SHARED_MODULES: dict[str, frozenset[str]] = {"perfgate.stats.decide": frozenset({"reporters"})}

HTTP_CLIENTS = ("urllib.request", "http.client", "requests", "httpx", "urllib3", "aiohttp")


@dataclass(frozen=True)
class ExternalRule:
    """Third-party (or stdlib) modules only some parts of perfgate may import."""

    prefixes: tuple[str, ...]
    allowed_under: tuple[str, ...]  # module-name prefixes inside perfgate
    rule: str

    def matches(self, module: str) -> bool:
        return any(module == p or module.startswith(p + ".") for p in self.prefixes)

    def allows(self, importer: str) -> bool:
        return any(importer == p or importer.startswith(p + ".") for p in self.allowed_under)


EXTERNAL_RULES = (
    ExternalRule(
        ("torch",),
        ("perfgate.runner", "perfgate.workloads"),
        "only runner/ and workloads/ import torch (perfgate --help works without it)",
    ),
    ExternalRule(("click",), ("perfgate.cli",), "only cli/ imports click"),
    ExternalRule(
        HTTP_CLIENTS,
        ("perfgate.reporters.forges",),
        "only reporters/forges/ (the HTTP edge) imports an HTTP client",
    ),
    ExternalRule(
        ("sqlalchemy", "alembic"),
        ("perfgate.store",),
        "only store/ imports SQLAlchemy or alembic",
    ),
)


@dataclass(frozen=True)
class Import:
    """One imported module, absolute, at the line that imports it."""

    line: int
    module: str
    names: tuple[str, ...] = ()  # for ``from perfgate import a, b``: the names


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    module: str
    rule: str

    def __str__(self) -> str:
        if self.line == 0:  # the module itself, not one of its imports
            return f"{self.path}: {self.rule}"
        return f"{self.path}:{self.line}: imports {self.module}: {self.rule}"


def module_name(path: str) -> tuple[str, bool]:
    """``perfgate/stats/x.py`` -> ("perfgate.stats.x", False); ``__init__.py`` names its package."""
    parts = list(Path(path).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def known_modules(package: Path = PACKAGE) -> frozenset[str]:
    """Every module and package name in the tree (to tell ``from perfgate import app`` apart)."""
    names = {
        ".".join(d.relative_to(package.parent).parts) for d in package.rglob("*") if d.is_dir()
    }
    for file in package.rglob("*.py"):
        names.add(module_name(file.relative_to(package.parent).as_posix())[0])
    return frozenset(n for n in names if "__pycache__" not in n)


def _resolve(module: str | None, level: int, importer: str, is_package: bool) -> str:
    if level == 0:
        return module or ""
    parts = importer.split(".") if is_package else importer.split(".")[:-1]
    base = parts[: len(parts) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def imports_of(source: str, path: str, known: frozenset[str]) -> Iterator[Import]:
    """Every import in one module's source, wherever it is written, with its module absolute."""
    importer, is_package = module_name(path)
    for node in ast.walk(ast.parse(source, filename=path)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node.module, node.level, importer, is_package)
            inside = base == "perfgate" or base.startswith("perfgate.")
            subs = [f"{base}.{alias.name}" for alias in node.names]
            plain = tuple(
                a.name for a, sub in zip(node.names, subs, strict=True) if sub not in known
            )
            if plain or not inside:
                yield Import(node.lineno, base, plain)
            # A submodule imported by name (``from perfgate import app``) is an import of it;
            # outside perfgate the name may be a submodule too (``from urllib import request``).
            for sub in subs:
                if sub in known or not inside:
                    yield Import(node.lineno, sub)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield Import(node.lineno, node.args[0].value)


def unit_of(module: str) -> str | None:
    """The §3 unit a perfgate module belongs to; None for a module outside the layout."""
    parts = module.split(".")
    if parts[0] != "perfgate":
        return None
    if len(parts) == 1:
        return "entry"
    return UNIT_OF_NAME.get(parts[1])


def _internal_rule(source: str, target: str) -> str | None:
    """Why ``source`` may not import ``target`` (units), or None when it may."""
    if target in ALLOWED[source] or target == source:
        return None
    if target == "entry":
        return (
            "the package root is the API and re-exports app; below it only "
            "`from perfgate import __version__` is allowed"
        )
    if RANK[target] > RANK[source]:
        return f"{source} is below {target}; arrows point {ARROWS}"
    if source == "cli":
        return "cli calls one app function and renders; it never reaches past app to " + target
    if source in MIDDLE and target == "store":
        return f"{source} never imports store (only app does)"
    if source in MIDDLE:
        allowed = ", ".join(sorted(ALLOWED[source] - BASE - {source})) or "nothing"
        return (
            f"{source} may import only itself and metrics/models/errors/config "
            f"(of the other stages: {allowed})"
        )
    return f"{source} may import only {', '.join(sorted(ALLOWED[source]))}"


def check_module(source: str, path: str, known: frozenset[str]) -> list[Violation]:
    """The violations of one module, given its source and its path (``perfgate/...py``)."""
    importer, _ = module_name(path)
    own = unit_of(importer)
    if own is None:
        return [Violation(path, 0, importer, "a module outside DESIGN.md §3's layout")]
    found: list[Violation] = []
    for imp in imports_of(source, path, known):
        rule: str | None = None
        if imp.module == "perfgate" or imp.module.startswith("perfgate."):
            if imp.module == "perfgate" and set(imp.names) <= {"__version__"} and imp.names:
                continue  # __version__ has one source, the package root
            target = unit_of(imp.module)
            if own in SHARED_MODULES.get(imp.module, frozenset()):
                continue
            if target is None:
                rule = "a module outside DESIGN.md §3's layout"
            else:
                rule = _internal_rule(own, target)
        else:
            for ext in EXTERNAL_RULES:
                if ext.matches(imp.module) and not ext.allows(importer):
                    rule = ext.rule
                    break
        if rule is not None:
            # one line, one rule: ``from sqlalchemy import select`` is one violation, not two
            if not any(v.line == imp.line and v.rule == rule for v in found):
                found.append(Violation(path, imp.line, imp.module, rule))
    return found


def check_package(package: Path = PACKAGE) -> list[Violation]:
    known = known_modules(package)
    found: list[Violation] = []
    for file in sorted(package.rglob("*.py")):
        path = file.relative_to(package.parent).as_posix()
        found.extend(check_module(file.read_text(encoding="utf-8"), path, known))
    return found


# The tree ------------------------------------------------------------------------------------


def test_the_tree_follows_the_arrows_of_design_section_3() -> None:
    violations = sorted(check_package(), key=lambda v: (v.path, v.line, v.module))
    if violations:
        listing = "\n".join(str(v) for v in violations)
        pytest.fail(f"{len(violations)} import(s) against DESIGN.md §3:\n{listing}", pytrace=False)


def test_the_checker_reads_the_whole_package() -> None:
    known = known_modules()
    assert len(known) > 40
    assert {unit_of(m) for m in known} >= {"entry", "runner", "parsers", "stats", "store"}


# The checker ---------------------------------------------------------------------------------

KNOWN = frozenset(
    {
        "perfgate",
        "perfgate.app",
        "perfgate.app.gate",
        "perfgate.cli",
        "perfgate.stats",
        "perfgate.stats.x",
        "perfgate.stats.compare",
        "perfgate.models",
    }
)


def _rules(path: str, source: str) -> list[tuple[int, str]]:
    return [(v.line, v.module) for v in check_module(source, path, KNOWN)]


def test_an_upward_import_is_reported_with_file_line_module_and_rule() -> None:
    source = "from __future__ import annotations\n\nfrom perfgate.app import gate\n"
    (violation,) = check_module(source, "perfgate/stats/x.py", KNOWN)
    assert violation.path == "perfgate/stats/x.py"
    assert violation.line == 3
    assert violation.module == "perfgate.app.gate"
    assert "stats is below app" in violation.rule
    assert str(violation).startswith("perfgate/stats/x.py:3: imports perfgate.app.gate: ")


@pytest.mark.parametrize(
    ("path", "source", "expected"),
    [
        # relative, resolved against the module's package
        ("perfgate/stats/x.py", "from ..app import gate\n", [(1, "perfgate.app.gate")]),
        ("perfgate/stats/__init__.py", "from ..cli import main\n", [(1, "perfgate.cli")]),
        # a submodule imported by name from the package root
        ("perfgate/stats/x.py", "from perfgate import app\n", [(1, "perfgate.app")]),
        # inside a function and under TYPE_CHECKING
        (
            "perfgate/stats/x.py",
            "def f():\n    import perfgate.app.gate\n",
            [(2, "perfgate.app.gate")],
        ),
        (
            "perfgate/stats/x.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from perfgate.app import G\n",
            [(3, "perfgate.app")],
        ),
        ("perfgate/stats/x.py", "importlib.import_module('perfgate.app')\n", [(1, "perfgate.app")]),
        # sideways in the middle, and the base reaching up
        (
            "perfgate/stats/x.py",
            "from perfgate.parsers import read_profile\n",
            [(1, "perfgate.parsers")],
        ),
        ("perfgate/parsers/x.py", "import perfgate.store\n", [(1, "perfgate.store")]),
        (
            "perfgate/config.py",
            "from perfgate.workloads import CATALOGUE\n",
            [(1, "perfgate.workloads")],
        ),
        ("perfgate/cli/run.py", "from perfgate.store import open_store\n", [(1, "perfgate.store")]),
        # the API package from below
        ("perfgate/reporters/x.py", "from perfgate import gate\n", [(1, "perfgate")]),
        # third-party edges
        ("perfgate/parsers/x.py", "import torch\n", [(1, "torch")]),
        ("perfgate/app/x.py", "import click\n", [(1, "click")]),
        ("perfgate/reporters/x.py", "from urllib import request\n", [(1, "urllib.request")]),
        ("perfgate/advisor/x.py", "import requests\n", [(1, "requests")]),
        ("perfgate/stats/x.py", "from sqlalchemy import select\n", [(1, "sqlalchemy")]),
        # a module that has no place in the layout
        ("perfgate/ingest.py", "import json\n", [(0, "perfgate.ingest")]),
    ],
)
def test_the_checker_reports(path: str, source: str, expected: list[tuple[int, str]]) -> None:
    assert _rules(path, source) == expected


@pytest.mark.parametrize(
    ("path", "source"),
    [
        ("perfgate/__init__.py", "from perfgate.app import gate\n"),
        ("perfgate/__main__.py", "from perfgate.cli import main\n"),
        ("perfgate/cli/run.py", "from perfgate.app import gate\nimport click\n"),
        ("perfgate/cli/run.py", "from perfgate.reporters.markdown import render\n"),
        (
            "perfgate/app/gate.py",
            "from perfgate.stats import compare\nfrom perfgate.store import S\n",
        ),
        ("perfgate/stats/x.py", "from . import compare\nfrom perfgate.models import Direction\n"),
        ("perfgate/runner/x.py", "import torch\nfrom perfgate.parsers import read_profile\n"),
        ("perfgate/workloads/x.py", "import torch.nn\nfrom perfgate.runner import run\n"),
        ("perfgate/reporters/forges/github.py", "import urllib.request\nimport requests\n"),
        (
            "perfgate/reporters/x.py",
            "from urllib.parse import quote\nfrom urllib.error import URLError\n",
        ),
        (
            "perfgate/config.py",
            "from perfgate.metrics import CATALOGUE\nfrom perfgate.errors import E\n",
        ),
        ("perfgate/store/sql.py", "import sqlalchemy\nfrom perfgate.models import RunRecord\n"),
        ("perfgate/runner/fingerprint.py", "from perfgate import __version__\n"),
    ],
)
def test_the_checker_allows(path: str, source: str) -> None:
    assert _rules(path, source) == []


# cli reaching past app through app's re-exports --------------------------------------------------
#
# ``from perfgate.app import open_store`` is an import of app to the checker above, but the name
# is the store's: app/__init__ maps each name it exports to the module that defines it
# (``_NAMES``). A command calls use cases and renders; the store, the statistics, the parsers
# and the runner stay behind them, whichever module re-exports them.

BEHIND_APP = frozenset({"store", "stats", "parsers", "runner"})

THROUGH_APP_STRICT = (
    "perfgate/cli/gate.py",
    "perfgate/cli/base.py",
    "perfgate/cli/check.py",
    "perfgate/cli/history.py",
    "perfgate/cli/look.py",
    "perfgate/cli/run.py",
    "perfgate/cli/team.py",
)
"""The cli modules held to the rule now (issue 39: the other commands are being reshaped)."""

THROUGH_APP_KNOWN: dict[str, frozenset[str]] = {}
"""What the other cli modules still reach through app (to go with their use cases); a new
one of these fails."""


def app_exports(package: Path = PACKAGE) -> dict[str, str]:
    """app/__init__'s ``_NAMES``: each exported name and the module that defines it."""
    tree = ast.parse((package / "app" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        if any(isinstance(t, ast.Name) and t.id == "_NAMES" for t in node.targets):
            names = ast.literal_eval(node.value)
            assert isinstance(names, dict)
            return {str(k): str(v) for k, v in names.items()}
    raise AssertionError("perfgate/app/__init__.py has no _NAMES")


def through_app(source: str, path: str, exports: dict[str, str]) -> list[tuple[str, Violation]]:
    """The names ``source`` takes from ``perfgate.app`` (``from perfgate.app import X``, or
    ``app.X`` after ``from perfgate import app``) that app only
    re-exports from a unit behind it, each with the name."""
    tree = ast.parse(source, filename=path)
    aliases: set[str] = set()
    used: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "perfgate" and node.level == 0:
            aliases |= {a.asname or a.name for a in node.names if a.name == "app"}
        elif isinstance(node, ast.ImportFrom) and node.module == "perfgate.app":
            used += [(node.lineno, a.name) for a in node.names]
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
        ):
            used.append((node.lineno, node.attr))
    found = []
    for line, name in sorted(used):
        module = exports.get(name)
        unit = unit_of(module) if module else None
        if unit in BEHIND_APP:
            rule = f"cli reaches {unit} through app's re-export of {name}: call a use case"
            found.append((name, Violation(path, line, str(module), rule)))
    return found


def _through_app_of(path: str) -> list[tuple[str, Violation]]:
    source = (PACKAGE.parent / path).read_text(encoding="utf-8")
    return through_app(source, path, app_exports())


@pytest.mark.parametrize("path", THROUGH_APP_STRICT)
def test_these_commands_reach_no_store_or_statistics_through_app(path: str) -> None:
    violations = _through_app_of(path)
    assert not violations, "\n".join(str(v) for _, v in violations)
    # nor through cli/base's store opener: the use case opens the store it needs
    tree = ast.parse((PACKAGE.parent / path).read_text(encoding="utf-8"))
    opened = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and any(a.name == "_open_store" for a in node.names)
    ]
    assert not opened, f"{path}:{opened[0]}: opens the store itself; a use case does"


def test_no_other_command_reaches_further_through_app_than_it_did() -> None:
    new = []
    for file in sorted((PACKAGE / "cli").glob("*.py")):
        path = file.relative_to(PACKAGE.parent).as_posix()
        known = THROUGH_APP_KNOWN.get(path, frozenset())
        new += [v for name, v in _through_app_of(path) if name not in known]
    assert not new, "\n".join(str(v) for v in new)


def test_the_through_app_check_sees_both_spellings() -> None:
    exports = {
        "open_store": "perfgate.store",
        "deciding": "perfgate.stats.decide",
        "x": "perfgate.app.y",
    }
    source = (
        "from perfgate import app\nfrom perfgate.app import open_store, x\n"
        "def f():\n    return app.deciding, app.x\n"
    )
    found = through_app(source, "perfgate/cli/x.py", exports)
    assert [(v.line, v.module) for _, v in found] == [
        (2, "perfgate.store"),
        (4, "perfgate.stats.decide"),
    ]
