"""microtab's tables on a Dask cluster: each part of the data (a dataset,
or a range of records of one) is counted where it is, as the analysis
layer's exact partial result; the parts are merged in a tree on the
workers and the merged part is finished into the same result object as a
local query — replicate-weight standard errors included (replicate totals
merge exactly).

    from dask.distributed import Client
    import microtab.dask as mtd
    client = Client("scheduler:8786")
    parts = mtd.parts(["acs2019.mtab", "acs2020.mtab"])        # or mtd.split("big.mtab", 8)
    t = mtd.on(client, parts).tab("SEX", "EDUC", pct="col")     # a microtab.Crosstab

Without a client (``client=None``) the same parts are answered here, one
after another: the reference a cluster's answer must equal.

Taylor linearization designs are answered over parts too: over ranges of
one dataset (a PSU cut by a range's edge is merged by key before its total
is squared), and over datasets whose strata each lie within one of them;
a stratum in two datasets is refused with a clear error
(docs/DISTRIBUTED.md)."""

from __future__ import annotations

import glob as _glob
import json
import os
from dataclasses import dataclass
from typing import Iterable, Sequence

from . import QueryError, _Queries
from ._microtab import _MAX_ROUNDS, _catalog_parts, _check_values, _finish, _info, _merge, _partial

__all__ = ["Part", "parts", "split", "on", "partial", "merge", "step", "finish"]


@dataclass(frozen=True)
class Part:
    """One part of the data: a dataset directory (a path every worker can
    read: a shared file system), and optionally records ``start..end``."""

    path: str
    start: int | None = None
    end: int | None = None


def parts(paths: str | Sequence[str]) -> list[Part]:
    """Parts from dataset paths, one glob pattern (``"years/*.mtab"``,
    sorted) or a catalog of parts (``microtab split``, ``microtab import
    --parts``: its parts in record order); absolute paths, so workers
    elsewhere find them."""
    if isinstance(paths, os.PathLike):
        paths = os.fspath(paths)
    if isinstance(paths, str):
        catalog = _catalog_parts(paths)
        if catalog is not None:
            found = catalog
        else:
            found = sorted(_glob.glob(paths)) if any(c in paths for c in "*?[") else [paths]
    else:
        found = list(paths)
    if not found:
        raise QueryError(f"no dataset matches {paths!r}")
    return [Part(os.path.abspath(p)) for p in found]


def split(path: str, n: int) -> list[Part]:
    """``n`` parts of one dataset: contiguous ranges of records of about
    equal size."""
    if n < 1:
        raise ValueError("n must be at least 1")
    rows = json.loads(_info(os.fspath(path)))["rows"]
    path = os.path.abspath(path)
    edges = [rows * i // n for i in range(n + 1)]
    return [Part(path, a, b) for a, b in zip(edges, edges[1:]) if b > a] or [Part(path, 0, 0)]


def partial(part: Part, spec: str, round: bytes | None = None) -> bytes:
    """The exact partial result of a request (``spec``: JSON) over one part,
    in a further ``round`` that :func:`step` asked for (``None``: the first)."""
    return _partial(part.path, spec, part.start, part.end, round)


def merge(*ps: bytes) -> bytes:
    """Merges partial results (exact, in any order)."""
    return _merge(list(ps))


def step(p: bytes, spec: str) -> dict | bytes:
    """The answer (the analysis layer's JSON, as a dict) from a merged
    partial result, or the further round of partial results it needs
    (``bytes``: a model under a Taylor design sums its fit's scores over
    the parts; compute :func:`partial` of every part in that round, merge,
    and step again)."""
    out = _finish(p, spec)
    return out if isinstance(out, bytes) else json.loads(out)


def finish(p: bytes, spec: str) -> dict:
    """The answer (the analysis layer's JSON, as a dict) from a merged
    partial result of a request answered in one round."""
    out = step(p, spec)
    if isinstance(out, bytes):
        raise QueryError("this request needs another round of partial results: use step()")
    return out


def _check_disjoint(parts: list[Part]) -> None:
    """Refuses parts that name the same records twice (the same dataset,
    or overlapping ranges of one): their records would be counted twice."""
    by: dict[str, list[tuple[int, float, Part]]] = {}
    idents: dict[str, str] = {}
    for p in parts:
        if (p.start is not None and p.start < 0) or (p.end is not None and p.end < 0):
            raise ValueError(f"{p}: start and end are record numbers from 0")
        # By the dataset's id when it has one: a copied or hard-linked
        # directory is the same records under another path.
        if p.path not in idents:
            idents[p.path] = json.loads(_info(p.path)).get("id") or os.path.realpath(p.path)
        ident = idents[p.path]
        by.setdefault(ident, []).append((p.start or 0, float("inf") if p.end is None else p.end, p))
    for ranges in by.values():
        ranges.sort(key=lambda r: (r[0], r[1]))
        for (a0, a1, pa), (b0, b1, pb) in zip(ranges, ranges[1:]):
            if b0 < a1 and b1 > b0 and a1 > a0:
                raise QueryError(f"{pa} and {pb} overlap (the same records of {pa.path}"
                                 f"{'' if pa.path == pb.path else ', one dataset under two paths'}): "
                                 "their records would be counted twice")


class on(_Queries):
    """``freq``/``tab``/``means`` over ``parts`` on a Dask ``client`` (or,
    with ``client=None``, here). ``fan_in`` parts are merged per task of the
    tree; ``retries`` lets Dask recompute a part whose worker died."""

    def __init__(self, client, parts: Iterable[Part], *, fan_in: int = 8, retries: int = 3):
        self.client = client
        self.parts = list(parts)
        if not self.parts:
            raise QueryError("no parts to answer over")
        _check_disjoint(self.parts)
        self.fan_in = max(2, fan_in)
        self.retries = retries

    def _ask(self, spec: dict) -> dict:
        spec = json.dumps({k: v for k, v in spec.items() if v is not None})
        # A text value no part has is an error, judged here over all the
        # parts at once (each part alone may lack a value others have).
        _check_values(sorted({p.path for p in self.parts}), spec)
        round = None
        # A model takes a round for its cube, then maybe one for its scores
        # or the rank of its replicate weights; shares compared across
        # columns one more first, for the table's rows.
        for _ in range(_MAX_ROUNDS):
            out = step(self._merged(spec, round), spec)
            if not isinstance(out, bytes):
                return out
            round = out
        raise QueryError("the request took more rounds than it may")

    def _merged(self, spec: str, round: bytes | None) -> bytes:
        """Every part's partial result in ``round``, merged (in a tree of
        ``fan_in`` on the workers)."""
        if self.client is None:
            return merge(*(partial(p, spec, round) for p in self.parts))
        futures = [self.client.submit(partial, p, spec, round, pure=False, retries=self.retries)
                   for p in self.parts]
        while len(futures) > 1:
            futures = [self.client.submit(merge, *futures[i:i + self.fan_in], retries=self.retries)
                       if len(futures[i:i + self.fan_in]) > 1 else futures[i]
                       for i in range(0, len(futures), self.fan_in)]
        return futures[0].result()
