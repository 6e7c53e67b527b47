"""Shared fixtures and helpers for the microtab end-to-end tests.

Every number the CLI prints is checked against an independent oracle:
DuckDB reading the very same CSV, numpy/scipy, or values computed by hand in
the test.  See docs/CLI.md for the contract being tested.

Binary: $MICROTAB_BIN, default <repo>/target/release/microtab.
"""

from __future__ import annotations

import csv as csvmod
import json
import math
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("MICROTAB_BIN", REPO / "target" / "release" / "microtab"))

# The census both test folders share (tests/census_data.py).
sys.path.append(str(REPO / "tests"))
from census_data import census_dataset, duck_census, replicate_design, serve  # noqa: E402,F401

CENSUS_ROWS = 200_000
BIG_ROWS = 2_000_000
CENSUS_SEED = 7
INCTOT_NA = 9999999


# --------------------------------------------------------------------------
# running the CLI
# --------------------------------------------------------------------------

def pytest_sessionstart(session):  # noqa: D401 - pytest hook
    if not BIN.exists():
        pytest.exit(
            f"microtab binary not found at {BIN}; run `cargo build --release` "
            "or set MICROTAB_BIN",
            returncode=4,
        )


def run(*args, ok=True, timeout=300, input=None, cwd=None, env=None):
    """Run microtab with ``args``.

    ok=True: assert exit code 0; ok=False: assert non-zero; ok=None: no check.
    Returns the CompletedProcess (text; undecodable bytes are replaced).
    """
    cmd = [str(BIN), *[str(a) for a in args]]
    p = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        timeout=timeout,
        input=input,
        cwd=cwd,
        env=env,
    )
    where = f"\n$ {' '.join(cmd)}\nexit {p.returncode}\nstderr: {p.stderr}\nstdout: {p.stdout[:2000]}"
    if ok is True:
        assert p.returncode == 0, "command failed" + where
    elif ok is False:
        assert p.returncode != 0, "command unexpectedly succeeded" + where
    return p


def run_json(*args, **kw):
    """Run an analysis command with ``--format json`` and parse stdout."""
    p = run(*args, "--format", "json", **kw)
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError as e:  # pragma: no cover - diagnostic
        raise AssertionError(f"stdout is not JSON ({e}):\n{p.stdout[:2000]}") from e


def line_re(n: int) -> re.Pattern:
    """Regex that accepts the usual ways of naming line ``n`` in a message."""
    return re.compile(rf"(?:\bline\s*:?\s*{n}\b|:{n}(?::|\b))", re.I)


def assert_one_error(p, *needles, code=1, line=None):
    """Exit ``code``, exactly one stderr line, starting with ``error:`` and
    containing each needle (case-sensitive) and, if given, line number."""
    lines = p.stderr.splitlines()
    assert p.returncode == code, f"exit {p.returncode}, want {code}; stderr={p.stderr!r}"
    assert len(lines) == 1, f"want exactly one stderr line, got {lines!r}"
    msg = lines[0]
    assert msg.startswith("error:"), msg
    for n in needles:
        assert n in msg, f"{n!r} not in {msg!r}"
    if line is not None:
        assert line_re(line).search(msg), f"line {line} not named in {msg!r}"
    return msg


# --------------------------------------------------------------------------
# JSON helpers
# --------------------------------------------------------------------------

def disp(r):
    """The displayed value of a freq/tab/means entry: for string variables
    the string may be in ``label`` (with a code in ``value``) or in ``value``
    itself; numeric variables have ``label`` null and the value in ``value``."""
    lab = r.get("label")
    if isinstance(lab, str):
        return lab
    return r.get("value")


def control_value(t):
    c = t.get("control")
    if isinstance(c, dict):
        return c.get("value")
    return c


def write(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)
    return path


def make_dataset(tmp: Path, name: str, csv_text, *import_args):
    """Write a CSV (str or bytes) and import it; returns (csv_path, ds_path)."""
    csv_path = write(tmp / f"{name}.csv", csv_text)
    ds = tmp / f"{name}.mtab"
    run("import", csv_path, ds, *import_args)
    return csv_path, ds


# --------------------------------------------------------------------------
# DuckDB oracle
# --------------------------------------------------------------------------

def module_dataset(csv_text, name="s"):
    """A module-scoped fixture: `csv_text` imported once; the dataset's path."""
    @pytest.fixture(scope="module")
    def dataset(tmp_path_factory):
        return make_dataset(tmp_path_factory.mktemp(name), name, csv_text)[1]
    return dataset


def _py(v):
    """DuckDB DECIMAL → float (JSON numbers parse to float), else unchanged."""
    if isinstance(v, Decimal):
        return float(v)
    return v


@dataclass
class Oracle:
    con: duckdb.DuckDBPyConnection
    table: str
    missing: dict  # var -> list of user-missing codes

    def q(self, sql, *params):
        return [tuple(_py(v) for v in r) for r in self.con.execute(sql, list(params)).fetchall()]

    def one(self, sql, *params):
        r = self.con.execute(sql, list(params)).fetchone()
        return None if r is None else tuple(_py(v) for v in r)

    def valid(self, var):
        """SQL condition: ``var`` is neither system- nor user-missing."""
        cond = f'"{var}" IS NOT NULL'
        codes = self.missing.get(var)
        if codes:
            cond += f' AND "{var}" NOT IN ({", ".join(map(str, codes))})'
        return f"({cond})"

    def where(self, *vars_, weight=None, extra=None):
        conds = [self.valid(v) for v in vars_]
        if weight:
            conds.append(self.valid(weight))
        if extra:
            conds.append(f"({extra})")
        return " AND ".join(conds) if conds else "TRUE"

    def freq(self, var, weight=None, extra=None):
        """[(value, count, weighted_or_None)] ordered by value."""
        w = f'sum("{weight}")::DOUBLE' if weight else "NULL"
        return self.q(
            f'SELECT "{var}", count(*), {w} FROM {self.table} '
            f"WHERE {self.where(var, weight=weight, extra=extra)} GROUP BY 1 ORDER BY 1"
        )

    def cells(self, row, col, weight=None, extra=None, control=None):
        """{(ctrl,row,col): (count, weighted)}"""
        cv = f'"{control}"' if control else "NULL"
        vars_ = [row, col] + ([control] if control else [])
        w = f'sum("{weight}")::DOUBLE' if weight else "NULL"
        res = self.q(
            f'SELECT {cv}, "{row}", "{col}", count(*), {w} FROM {self.table} '
            f"WHERE {self.where(*vars_, weight=weight, extra=extra)} GROUP BY ALL"
        )
        return {(c, r, k): (n, s) for c, r, k, n, s in res}


@pytest.fixture(scope="session")
def census(tmp_path_factory):
    """200k-row generated census CSV, imported with INCTOT=9999999 missing,
    plus a DuckDB oracle table ``census`` over the same CSV."""
    d = tmp_path_factory.mktemp("census")
    csv_path = d / "census.csv"
    ds = d / "census.mtab"
    run("gen", "census", "--rows", CENSUS_ROWS, "--seed", CENSUS_SEED, "--out", csv_path)
    run("import", csv_path, ds, "--missing", f"INCTOT={INCTOT_NA}")
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE census AS SELECT * FROM read_csv(?, header=true, "
        "sample_size=-1, types={'PERWT': 'DECIMAL(18,2)'})",
        [str(csv_path)],
    )
    o = Oracle(con, "census", {"INCTOT": [INCTOT_NA]})
    o.csv = csv_path
    o.ds = ds
    o.dir = d
    return o


@pytest.fixture(scope="session")
def big_census(tmp_path_factory):
    """A 2M-row generated census (big enough for several parallel chunks and
    for killing an import midway), imported with INCTOT=9999999 missing.
    ``import_seconds``: best of two full imports."""
    d = tmp_path_factory.mktemp("bigcensus")
    csv_path, ds = d / "big.csv", d / "big.mtab"
    run("gen", "census", "--rows", BIG_ROWS, "--seed", 5, "--out", csv_path, timeout=600)
    best = None
    for _ in range(2):
        t0 = time.monotonic()
        run("import", csv_path, ds, "--force", "--missing", f"INCTOT={INCTOT_NA}", timeout=600)
        dt = time.monotonic() - t0
        best = dt if best is None else min(best, dt)
    return SimpleNamespace(csv=csv_path, ds=ds, rows=BIG_ROWS, import_seconds=best)


def rscript(script, text, *args, out=None):
    """R as the oracle: `text` saved as `script` and run by Rscript with
    `args`; the rows of the CSV it writes to `out` (default: its second
    argument), as dicts."""
    script.write_text(text)
    p = subprocess.run(["Rscript", str(script), *map(str, args)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    with open(args[1] if out is None else out) as f:
        return list(csvmod.DictReader(f))


def r_design(api, kind, name, text, *args):
    """R as the oracle on the api data of design `kind` (`strat`, `clus`,
    `jk1`, `none`): `text` run as NAME.R with the data's CSV, an output
    NAME_KIND.csv, `kind` and `args`; the rows it writes, as dicts."""
    csv = api["dir"] / ("strat.csv" if kind in ("strat", "none") else "clus.csv")
    tag = f"_{abs(hash(args))}" if args else ""
    out = api["dir"] / f"{name}_{kind}{tag}.csv"
    return rscript(api["dir"] / f"{name}.R", text, csv, out, kind, *args)


def r_estimates(rows, cols=("est", "se", "lo", "hi"), na=("NA", "")):
    """{(what, key): (est, se, lo, hi)} of the rows an R script's `add()`
    wrote (`na`: R's missing, read as None)."""
    return {(r["what"], r["key"]): tuple(None if r[k] in na else float(r[k]) for k in cols)
            for r in rows}


def between(var, a, b, sql_more=""):
    """A range filter in microtab's syntax and DuckDB's: `VAR(a-b)` and
    `VAR BETWEEN a AND b` (plus `sql_more`, e.g. a missing code left out)."""
    return f"{var}({a}-{b})", f"{var} BETWEEN {a} AND {b}{sql_more}"


def answer_cells(res, kind):
    """{key: (count, weighted or mean)} from microtab's JSON of freq, tab
    (one table; cells with records) or means."""
    got = {}
    if kind == "means":
        for g in res["groups"]:
            got[tuple(b["value"] for b in g["by"])] = (g["n"], g["mean"])
    elif kind == "freq":
        for r in res["rows"]:
            got[(r["value"],)] = (r["count"], r["weighted"])
    else:
        for t in res["tables"]:
            for i, rv in enumerate(t["rows"]):
                for j, cv in enumerate(t["cols"]):
                    if t["counts"][i][j]:
                        w = t["weighted"][i][j] if t["weighted"] else None
                        got[(rv["value"], cv["value"])] = (t["counts"][i][j], w)
    return got


def approx(x, rel=1e-9, abs=None):
    return pytest.approx(x, rel=rel, abs=abs)


def same_dataset(got, ds):
    """The ``dataset`` field names the dataset (as given, or its base name)."""
    return got in (str(ds), Path(ds).name, str(Path(ds).resolve()))


def check_freq(res, exp, weighted, missing_rows=False):
    """Compare a freq JSON result's non-missing rows with oracle rows
    [(value, count, weighted)], including percent and totals.

    missing_rows=True (--include-missing): the contract does not say whether
    ``total`` then includes the missing categories; both are accepted."""
    rows = [r for r in res["rows"] if not r["missing"]]
    assert [disp(r) for r in rows] == [e[0] for e in exp]
    assert [r["count"] for r in rows] == [e[1] for e in exp]
    tot_n = sum(e[1] for e in exp)
    if missing_rows:
        all_n = sum(r["count"] for r in res["rows"])
        assert res["total"]["count"] in (tot_n, all_n)
        if weighted:
            all_w = sum(r["weighted"] for r in res["rows"])
            assert res["total"]["weighted"] in (approx(sum(e[2] for e in exp)), approx(all_w))
        else:
            assert res["total"]["weighted"] is None
        res = {**res, "total": {"count": tot_n, "weighted": sum(e[2] for e in exp) if weighted else None}}
    assert res["total"]["count"] == tot_n
    if weighted:
        tot_w = sum(e[2] for e in exp)
        for r, e in zip(rows, exp):
            assert r["weighted"] == approx(e[2])
            assert r["percent"] == approx(100.0 * e[2] / tot_w)
        assert res["total"]["weighted"] == approx(tot_w)
    else:
        for r, e in zip(rows, exp):
            assert r["weighted"] is None
            assert r["percent"] == approx(100.0 * e[1] / tot_n)
        assert res["total"]["weighted"] is None


# --------------------------------------------------------------------------
# Column files, read with numpy from the layout docs/FORMAT.md describes
# (not through microtab): an independent reader of plain and bit-packed files.
# --------------------------------------------------------------------------

COLUMN_DTYPES = {"u8": "<u1", "i8": "<i1", "u16": "<u2", "i16": "<i2", "u32": "<u4",
                 "i32": "<i4", "i64": "<i8", "f32": "<f4", "f64": "<f8"}


def read_column_file(path, var: dict, rows: int):
    """The stored values of a column file (see ``_read_column_file``); a
    version 4 file's zone map (after the stripe table: per stripe of 32768
    rows the smallest and largest value other than the null code, i64 LE,
    and a u64 whose bit 0 says the null code occurs) is checked against
    the values read, with its XXH3-64 in header bytes 64–71."""
    import numpy as np

    vals = _read_column_file(path, var, rows)
    data = Path(path).read_bytes()
    head = data[:4096]
    version = int.from_bytes(head[8:12], "little")
    zoned = version >= 4 and int.from_bytes(head[72:76], "little") == 1
    assert zoned == (version >= 4 and var["type"] not in ("f32", "f64"))
    if zoned:
        import xxhash

        n = -(-rows // 32768)
        z = data[len(data) - 24 * n:]
        assert int.from_bytes(head[64:72], "little") == xxhash.xxh3_64_intdigest(z)
        info = np.iinfo(vals.dtype)
        null = info.max if info.min == 0 else info.min
        for i in range(n):
            s = vals[i * 32768:(i + 1) * 32768].astype(np.int64)
            ok = s[s != null]
            lo, hi, flags = (int.from_bytes(z[24 * i + k:24 * i + k + 8], "little", signed=True) for k in (0, 8, 16))
            want = (int(ok.min()), int(ok.max())) if len(ok) else (2**63 - 1, -(2**63))
            assert (lo, hi, flags) == (*want, int(len(ok) < len(s))), (path, i)
    return vals


def _read_column_file(path, var: dict, rows: int):
    """The stored values of a column file as a numpy array of the manifest's
    type. Plain files are a numpy.memmap at offset 4096; bit-packed ones are
    unpacked here by exploding every bit (numpy.unpackbits) and regrouping
    the bits as the vertical layout says: a block of 1024 values of a W-bit
    type is W values deep in L = 1024 / W lanes; value k·L + j is bits
    k·bits … of lane j, whose word m is word m·L + j of the block.

    Version 3 files end in a table of XXH3-64 checksums, one per stripe of
    32768 rows; the header and that table carry checksums of their own.
    Every one of them is checked here with the ``xxhash`` package."""
    import numpy as np

    path = Path(path)
    data = path.read_bytes()
    head = data[:4096]
    assert head[:8] == b"MTABCOL\0"
    assert int.from_bytes(head[16:24], "little") == rows
    version = int.from_bytes(head[8:12], "little")
    dt = np.dtype(COLUMN_DTYPES[var["type"]])
    encoding = int.from_bytes(head[32:36], "little")
    packing = var.get("packing")
    bits = int.from_bytes(head[36:40], "little")
    if encoding == 0:
        stored, stripe = rows * dt.itemsize, 32768 * dt.itemsize
    else:
        stored, stripe = -(-rows // 1024) * 128 * bits, 32 * 128 * bits
    table = 0
    zone = 24 * -(-rows // 32768) if version >= 4 and int.from_bytes(head[72:76], "little") == 1 else 0
    data = data[:len(data) - zone]
    if version >= 3:
        import xxhash

        assert int.from_bytes(head[4088:4096], "little") == xxhash.xxh3_64_intdigest(head[:4088])
        assert int.from_bytes(head[52:56], "little") == 32768
        payload = data[4096:4096 + stored]
        sums = [xxhash.xxh3_64_intdigest(payload[i:i + stripe]) for i in range(0, stored, stripe)] if stripe else []
        table = 8 * len(sums)
        tbl = data[4096 + stored:]
        assert len(tbl) == table
        assert int.from_bytes(head[56:64], "little") == xxhash.xxh3_64_intdigest(tbl)
        assert [int.from_bytes(tbl[i:i + 8], "little") for i in range(0, table, 8)] == sums
        assert int.from_bytes(head[24:32], "little") == xxhash.xxh3_64_intdigest(payload)
        assert var["checksum"] == f"xxh3:{xxhash.xxh3_64_intdigest(payload):016x}"
    if encoding == 0:
        assert packing is None
        assert len(data) == 4096 + rows * dt.itemsize + table
        return np.array(np.memmap(path, dtype=dt, mode="r", offset=4096, shape=(rows,))) if rows else np.array([], dtype=dt)
    assert encoding == 1
    bits = int.from_bytes(head[36:40], "little")
    base = int.from_bytes(head[40:48], "little", signed=True)
    nulls = int.from_bytes(head[48:52], "little") & 1 == 1
    assert packing == ({"bits": bits, "base": base, "nulls": True} if nulls else {"bits": bits, "base": base})
    w = dt.itemsize * 8
    lanes = 1024 // w
    blocks = -(-rows // 1024)
    assert len(data) == 4096 + blocks * 128 * bits + table
    if bits == 0:
        packed = np.zeros(blocks * 1024, dtype=np.int64)
    else:
        raw = np.frombuffer(data, dtype=np.uint8, offset=4096, count=blocks * 128 * bits)
        # [block, word m, lane j, bit t of the word]
        b = np.unpackbits(raw.reshape(blocks, bits, lanes, dt.itemsize), axis=3, bitorder="little")
        b = b.reshape(blocks, bits, lanes, w)
        # each lane's bit stream: bit m·W + t
        stream = b.transpose(0, 2, 1, 3).reshape(blocks, lanes, bits * w)
        # value k of a lane: stream bits k·bits … k·bits + bits − 1
        vb = stream.reshape(blocks, lanes, w, bits).astype(np.int64)
        vals = (vb << np.arange(bits, dtype=np.int64)).sum(axis=3)  # [block, lane, k]
        packed = vals.transpose(0, 2, 1).reshape(-1)  # row k·L + j
    packed = packed[:rows]
    out = packed + base
    if nulls:
        # all ones: the type's null code (its maximum, or minimum if signed)
        info = np.iinfo(dt)
        out = np.where(packed == (1 << bits) - 1, info.max if info.min == 0 else info.min, out)
    return out.astype(dt)


# --------------------------------------------------------------------------
# R's api data under three designs (regress, ratio, corr)
# --------------------------------------------------------------------------

R_DATA = r"""
suppressMessages(library(survey))
data(api)
out <- commandArgs(trailingOnly=TRUE)[1]
prep <- function(s) {
  s$yes <- as.integer(s$sch.wide == "Yes")
  s$stype <- as.character(s$stype)
  s$stype_txt <- c(E="elem", H="high", M="middle")[s$stype]
  # Missing values: a missing-code on ell (999) in a few records.
  s$ell2 <- s$ell; s$ell2[seq(5, nrow(s), by=17)] <- 999
  s
}
s <- prep(apistrat)
keep <- c("snum","stype","stype_txt","dnum","fpc","pw","api00","api99","ell","ell2","meals",
          "mobility","enroll","yes")
write.csv(s[, keep], file.path(out, "strat.csv"), row.names=FALSE)
c1 <- prep(apiclus1)
d <- svydesign(ids=~dnum, fpc=~fpc, weights=~pw, data=c1)
jk <- as.svrepdesign(d, type="JK1")
r <- as.data.frame(weights(jk, "analysis")); names(r) <- paste0("R", seq_len(ncol(r)))
write.csv(cbind(c1[, keep], r), file.path(out, "clus.csv"), row.names=FALSE)
"""


@pytest.fixture(scope="session")
def api(tmp_path_factory):
    d = tmp_path_factory.mktemp("api")
    (d / "data.R").write_text(R_DATA)
    p = subprocess.run(["Rscript", str(d / "data.R"), str(d)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    strat, clus, jk1 = d / "strat.mtab", d / "clus.mtab", d / "jk1.mtab"
    for csv, ds in [(d / "strat.csv", strat), (d / "clus.csv", clus), (d / "clus.csv", jk1)]:
        run("import", csv, ds, "--missing", "ell2=999")
    run("design", strat, "--weight", "pw", "--strata", "stype", "--fpc", "fpc")
    run("design", clus, "--weight", "pw", "--cluster", "dnum", "--fpc", "fpc")
    run("design", jk1, "--weight", "pw", "--repweights", "R1-R15", "--type", "jk1", "--no-mse")
    return {"dir": d, "strat": strat, "clus": clus, "jk1": jk1}


R_DESIGNS = r"""
suppressMessages(library(survey))
a <- commandArgs(trailingOnly=TRUE)
data <- read.csv(a[1]); out <- a[2]; kind <- a[3]
d <- switch(kind,
  strat=svydesign(ids=~1, strata=~stype, fpc=~fpc, weights=~pw, data=data),
  clus=svydesign(ids=~dnum, fpc=~fpc, weights=~pw, data=data),
  jk1=svrepdesign(data=data, repweights="R[0-9]+", weights=~pw, type="JK1", scale=14/15,
                  combined.weights=TRUE, mse=FALSE))
"""


def close(a, b, rel=1e-6):
    if b is None or (isinstance(b, float) and math.isnan(b)):
        return a is None or (isinstance(a, float) and math.isnan(a))
    return a == pytest.approx(b, rel=rel, abs=1e-300)


def close_p(g, want):
    """A p-value: its relative error is the t's times about t², so it is
    compared to 1e-6·max(1, t²) (the t itself to 1e-6)."""
    return close(g["p"], want, rel=1e-6 * max(1.0, g["t"] ** 2))


def mutated(good, rng, k):
    """`good` (bytes) damaged as a hostile input test wants it, by kind
    `k % 3`: up to three bytes overwritten, the file cut short, or a few
    random bytes inserted (`rng` a numpy Generator)."""
    b = bytearray(good)
    how = k % 3
    if how == 0:
        for _ in range(rng.integers(1, 4)):
            b[rng.integers(0, len(b))] = int(rng.integers(0, 256))
    elif how == 1:
        b = b[:rng.integers(0, len(b))]
    else:
        at = int(rng.integers(0, len(b)))
        b[at:at] = bytes(rng.integers(0, 256, int(rng.integers(1, 9))).astype("uint8"))
    return bytes(b)
