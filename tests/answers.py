"""Answers compared across front ends and ways of computing them (one
dataset against its parts, the CLI against Python), shared by both test
folders (on sys.path as tests/census_data.py is)."""

from __future__ import annotations

import pytest


def same_answer(a, b, path=""):
    """Equal structure (but the dataset's name); numbers to 1e-9 relative
    (p-values, whose tails amplify F's and t's last digits — and Rao–Scott
    p-values, whose incomplete beta moves at 1e-9 between runs — to 1e-6):
    sums of parts are added in another order than the whole's."""
    if isinstance(a, dict):
        assert set(a) - {"dataset"} == set(b) - {"dataset"}, path
        for k in set(a) - {"dataset"}:
            same_answer(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same_answer(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        rel = 1e-6 if path.endswith(".p") else 1e-9
        assert a == pytest.approx(b, rel=rel, abs=1e-12, nan_ok=True), path
    else:
        assert a == b, path
