"""The package's PEP 517 build backend: maturin, after building the executables.

One wheel carries the Python API (the extension module maturin builds) and
the ``microtab``, ``microtab-serve`` and ``microtab-arrow`` executables,
installed on the PATH as scripts (the wheel's ``microtab-<v>.data/scripts``,
as ruff and uv ship theirs). So ``pip install ./crates/python`` (and
``scripts/wheel.sh``) first runs ``cargo build --release`` for the three
executables, copies them into ``microtab.data/scripts`` beside
``pyproject.toml`` (the ``data`` directory maturin packs), then hands over to
maturin.

``MICROTAB_BINARIES=DIR`` packs the executables already built in DIR instead
(a release build that compiled them for another target);
``CARGO_BUILD_TARGET`` is honoured as cargo honours it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import maturin

HERE = Path(__file__).resolve().parent.parent
WORKSPACE = HERE.parent.parent
EXECUTABLES = ("microtab", "microtab-serve", "microtab-arrow")
EXE = ".exe" if sys.platform == "win32" else ""


def _built_dir() -> Path:
    """Where cargo puts the release executables."""
    target = Path(os.environ.get("CARGO_TARGET_DIR") or WORKSPACE / "target")
    triple = os.environ.get("CARGO_BUILD_TARGET")
    return target / triple / "release" if triple else target / "release"


def stage() -> Path:
    """Builds (unless MICROTAB_BINARIES names them) and stages the executables."""
    given = os.environ.get("MICROTAB_BINARIES")
    if given:
        src = Path(given)
    else:
        cmd = ["cargo", "build", "--release", "--workspace", "--bins"]
        print("microtab: building the executables (" + " ".join(cmd) + ")", file=sys.stderr, flush=True)
        subprocess.run(cmd, cwd=WORKSPACE, check=True)
        src = _built_dir()
    scripts = HERE / "microtab.data" / "scripts"
    if scripts.exists():
        shutil.rmtree(scripts)
    scripts.mkdir(parents=True)
    for name in EXECUTABLES:
        exe = src / (name + EXE)
        if not exe.is_file():
            raise FileNotFoundError(f"{exe}: the {name} executable was not built")
        shutil.copy2(exe, scripts / exe.name)
    return scripts


def _data_dir() -> None:
    """The data directory maturin requires, empty until staged (metadata needs no executables)."""
    (HERE / "microtab.data" / "scripts").mkdir(parents=True, exist_ok=True)


# The PEP 517 hooks: maturin's, with the executables staged first.
get_requires_for_build_wheel = maturin.get_requires_for_build_wheel
get_requires_for_build_sdist = maturin.get_requires_for_build_sdist


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _data_dir()
    return maturin.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_sdist(sdist_directory, config_settings=None):
    _data_dir()
    return maturin.build_sdist(sdist_directory, config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    stage()
    return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


get_requires_for_build_editable = maturin.get_requires_for_build_editable


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    stage()
    return maturin.build_editable(wheel_directory, config_settings, metadata_directory)


if __name__ == "__main__":
    # `python3 crates/python/build_backend/microtab_build.py` stages only,
    # for `maturin build` run by hand or by a release job.
    print(stage())
