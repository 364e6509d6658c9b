"""What the built distributions hold: the sdist is the whole project (tests with all their
data, benchmarks, CI templates, the action, the licence), the wheel the whole package (its
typing marker, migrations and data files). Built once with ``python -m build --no-isolation``
(a few seconds, no index needed); skipped where ``build`` is not installed."""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

import perfgate

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
SDIST_DIRS = ("tests", "bench", "ci", "baselines")
SDIST_FILES = ("LICENSE", "README.md", "action.yml", "pyproject.toml", "MANIFEST.in")


def _files(root: Path, top: str) -> set[str]:
    """Every file under ``root / top``, relative to ``root``, less byte-code."""
    return {
        p.relative_to(root).as_posix()
        for p in (root / top).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    pytest.importorskip("build")
    # The version from the metadata: importing setuptools here, after another test imported
    # distutils, trips setuptools' distutils shim.
    try:
        setuptools_version = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("needs setuptools to build without isolation")
    if int(setuptools_version.split(".")[0]) < 77:
        pytest.skip("needs setuptools >= 77 (license expressions) to build without isolation")
    out = tmp_path_factory.mktemp("dist")
    # From a copy of the project files alone: setuptools folds an existing *.egg-info/SOURCES.txt
    # (left by any earlier build or editable install) into the sdist, which would hide a
    # MANIFEST.in that misses files.
    src = tmp_path_factory.mktemp("src")
    for name in SDIST_FILES:
        shutil.copy2(ROOT / name, src / name)
    for name in ("perfgate", *SDIST_DIRS):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    # Without --sdist/--wheel, build makes the sdist and then the wheel *from the sdist*, so
    # a file the sdist lacks and the package needs fails the wheel too.
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(src)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (sdist,) = out.glob("perfgate-*.tar.gz")
    (wheel,) = out.glob("perfgate-*.whl")
    return src, sdist, wheel


def test_sdist_holds_the_tests_with_their_data_and_the_ci_files(
    dists: tuple[Path, Path, Path],
) -> None:
    src, sdist, _ = dists
    with tarfile.open(sdist) as tar:
        prefix = f"perfgate-{perfgate.__version__}/"
        names = {n.removeprefix(prefix) for n in tar.getnames()}
    wanted = set(SDIST_FILES).union(*(_files(src, d) for d in SDIST_DIRS))
    wanted |= {f for f in _files(src, "perfgate") if f.endswith(".py")}
    assert any(n.startswith("tests/data/ascend/") for n in wanted)  # the data is there to miss
    assert sorted(wanted - names) == []
    assert not [n for n in names if n.endswith(".pyc") or "__pycache__" in n]


def test_wheel_holds_the_whole_package_and_nothing_else(dists: tuple[Path, Path, Path]) -> None:
    src, _, wheel = dists
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
        meta = Parser().parsestr(
            whl.read(f"perfgate-{perfgate.__version__}.dist-info/METADATA").decode()
        )
    package = _files(src, "perfgate")
    assert "perfgate/py.typed" in package
    assert any("/migrations/versions/" in f for f in package)
    # Every module and every data file: py.typed, the migrations, perfgate/schemas/*.json.
    assert sorted(package - names) == []
    assert not [n for n in names if n.startswith("tests/")]
    assert f"perfgate-{perfgate.__version__}.dist-info/licenses/LICENSE" in names
    assert meta["Version"] == perfgate.__version__
    assert meta["License-Expression"] == "Apache-2.0"


def test_the_version_is_written_once() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert "version" not in project and "version" in project["dynamic"]
    # setuptools reads perfgate.__version__ from the source; with perfgate made unimportable
    # it still does, so building never imports perfgate (or anything it would pull in).
    read = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.modules['perfgate'] = None\n"
            "from setuptools.config.expand import read_attr\n"
            "print(read_attr('perfgate.__version__', root_dir=sys.argv[1]))",
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert read.returncode == 0, read.stderr
    assert read.stdout.strip() == perfgate.__version__


def test_licence_is_the_apache_2_text() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
