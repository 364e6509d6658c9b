"""The Python API: ``perfgate`` re-exports app's use cases, lazily, and nothing else."""

from __future__ import annotations

import subprocess
import sys
from types import ModuleType

import pytest

import perfgate
import perfgate.app
import perfgate.parsers
import perfgate.stats


def test_every_public_name_resolves_to_the_app_function_the_cli_calls() -> None:
    for name in perfgate.__all__:
        assert getattr(perfgate, name) is not None, name
    assert perfgate.compare is perfgate.app.compare
    assert perfgate.gate_failed is perfgate.app.gate_failed
    for name in perfgate.app.__all__:
        assert getattr(perfgate.app, name) is not None, name


def test_importing_perfgate_loads_no_store_stats_or_torch() -> None:
    code = (
        "import sys, perfgate, perfgate.cli; "
        "heavy = [m for m in ('sqlalchemy', 'scipy', 'torch', 'perfgate.app.gate', "
        "'perfgate.store') if m in sys.modules]; print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("package", [perfgate.parsers, perfgate.stats], ids=lambda p: p.__name__)
def test_every_name_a_package_exports_lazily_resolves(package: ModuleType) -> None:
    # perfgate.lazy imports each from the module its table names: a moved name fails here,
    # not in the first command that needs it
    for name in package.__all__:
        assert getattr(package, name) is not None, name
    with pytest.raises(AttributeError, match="no_such_thing"):
        package.no_such_thing  # noqa: B018


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        perfgate.no_such_thing  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:
        raise AssertionError("perfgate.no_such_thing resolved")
