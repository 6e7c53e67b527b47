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
(docs/DISTRIBUTED.md).

A request is checked here before anything is submitted (a part of no
records is answered on the client), so a refused one (an unknown
variable, medians over parts) fails at once with microtab's own error. On
the workers, each part is counted on the worker's share of its host's
cores (the host's cores divided by the worker processes on it), unless
``RAYON_NUM_THREADS`` is set there or ``threads=`` is given."""

from __future__ import annotations

import glob as _glob
import json
import os
from dataclasses import dataclass
from typing import Iterable, Sequence

from . import ArgumentError, QueryError, _design_spec, _Queries
from ._microtab import (_MAX_ROUNDS, _build_design, _catalog_parts, _check_values, _finish, _info, _merge,
                        _partial)

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


def partial(part: Part, spec: str, round: bytes | None = None, threads: int | dict | None = None) -> bytes:
    """The exact partial result of a request (``spec``: JSON) over one part,
    in a further ``round`` that :func:`step` asked for (``None``: the first),
    on ``threads`` threads (``None``: the process's pool; a dict of worker
    processes by host: the worker's share of its host's cores)."""
    if isinstance(threads, dict):
        threads = _share(threads)
    return _partial(part.path, spec, part.start, part.end, round, threads)


def _share(hosts: dict[str, int]) -> int | None:
    """On a Dask worker: its host's cores (those this process may run on)
    divided by the worker processes on the host (``hosts``), at least 1;
    ``None`` (the process's own pool) where ``RAYON_NUM_THREADS`` is set or
    off a worker."""
    if os.environ.get("RAYON_NUM_THREADS"):
        return None
    try:
        from distributed import get_worker

        w = get_worker()
    except (ImportError, ValueError):
        return None
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    host = _host(w.address)
    return max(1, cores // max(1, hosts.get(host, 1)))


def _host(address: str) -> str:
    """``tcp://10.0.0.5:38123`` -> ``10.0.0.5``."""
    rest = address.split("://", 1)[-1]
    return rest.rsplit(":", 1)[0]


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

    def __init__(self, client, parts: Iterable[Part], *, fan_in: int = 8, retries: int = 3,
                 threads: int | None = None):
        self.client = client
        self.parts = list(parts)
        if not self.parts:
            raise QueryError("no parts to answer over")
        _check_disjoint(self.parts)
        self.fan_in = max(2, fan_in)
        self.retries = retries
        if threads is not None and not 1 <= threads <= 1024:
            raise ValueError("threads must be 1 to 1024")
        self.threads = threads
        # A design held for these parts (with_design): each dataset's,
        # built on it, by path.
        self._held: dict[str, dict] | None = None

    def with_design(self, weight: str | None = None, *, repweights: str | Sequence[str] | None = None,
                    type: str = "sdr", rho: float | None = None, scale: float | None = None,  # noqa: A002
                    rscales: Sequence[float] | None = None, mse: bool = True, strata: str | None = None,
                    cluster: str | None = None, fpc: str | None = None,
                    lonely_psu: str = "fail") -> "on":
        """The parts under a survey design held by this object only (the
        arguments of :meth:`microtab.Dataset.design`), as
        :meth:`microtab.Dataset.with_design` holds one: checked and built
        here on each dataset the parts are of (the whole dataset for
        ranges of records), sent with each part's request, never written.
        Returns a new ``on`` whose queries use it."""
        import copy
        spec = json.dumps(_design_spec(weight, repweights, type, rho, scale, rscales, mse, strata,
                                       cluster, fpc, lonely_psu))
        held = {path: json.loads(_build_design(path, spec)) for path in dict.fromkeys(p.path for p in self.parts)}
        view = copy.copy(self)
        view._held = held
        return view

    def _spec(self, spec: dict, path: str) -> str:
        """The request as a part of the dataset at ``path`` is sent it."""
        if self._held is not None:
            spec = {**spec, "with_design": self._held[path]}
        return json.dumps({k: v for k, v in spec.items() if v is not None})

    def _ask(self, spec: dict) -> dict:
        f = spec.get("filter")
        if f is not None and not isinstance(f, str):
            raise ArgumentError(
                "filter: Dask's parts take a filter text, not a boolean mask (a mask would travel to "
                "every worker with each part); write its records as a dataset with "
                "ds.subset(out, filter=mask) and answer over mtd.split(out, n), or answer here with "
                "mt.open_many(...)")
        specs = {p.path: self._spec(spec, p.path) for p in self.parts}
        spec = specs[self.parts[0].path]
        # A text value no part has is an error, judged here over all the
        # parts at once (each part alone may lack a value others have).
        _check_values(sorted({p.path for p in self.parts}), spec)
        if self.client is not None:
            # Checked here, on a part of no records, before anything is
            # submitted: a refused request fails at once, not on a worker.
            partial(Part(self.parts[0].path, 0, 0), spec)
        round = None
        # A model takes a round for its cube, then maybe one for its scores
        # or the rank of its replicate weights; shares compared across
        # columns one more first, for the table's rows.
        for _ in range(_MAX_ROUNDS):
            out = step(self._merged(specs, round), spec)
            if not isinstance(out, bytes):
                return out
            round = out
        raise QueryError("the request took more rounds than it may")

    def _merged(self, specs: dict[str, str], round: bytes | None) -> bytes:
        """Every part's partial result in ``round`` (``specs``: the request
        as each dataset's parts are sent it), merged (in a tree of
        ``fan_in`` on the workers)."""
        if self.client is None:
            return merge(*(partial(p, specs[p.path], round) for p in self.parts))
        threads = self.threads
        if threads is None:
            # Worker processes by host: each counts on its share of the
            # host's cores.
            hosts: dict[str, int] = {}
            for w in self.client.scheduler_info().get("workers", {}):
                hosts[_host(w)] = hosts.get(_host(w), 0) + 1
            threads = hosts
        futures = [self.client.submit(partial, p, specs[p.path], round, threads, pure=False,
                                      retries=self.retries)
                   for p in self.parts]
        while len(futures) > 1:
            futures = [self.client.submit(merge, *futures[i:i + self.fan_in], retries=self.retries)
                       if len(futures[i:i + self.fan_in]) > 1 else futures[i]
                       for i in range(0, len(futures), self.fan_in)]
        return futures[0].result()
