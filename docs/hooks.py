"""mkdocs hook: the statistical model page shows the module docstring of
``perfgate/stats/__init__.py`` itself, read without importing perfgate, so the site states
what the code states."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

MARKER = "<!-- perfgate:stats-model -->"
SOURCE = Path(__file__).resolve().parent.parent / "perfgate" / "stats" / "__init__.py"


def stats_model() -> str:
    doc = ast.get_docstring(ast.parse(SOURCE.read_text("utf-8")))
    if not doc:
        raise ValueError(f"{SOURCE}: no module docstring")
    # reST inline literals and roles read as Markdown code
    return doc.replace("``", "`").replace(":attr:", "").replace(":func:", "")


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, stats_model())
    return markdown
