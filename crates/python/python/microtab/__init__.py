"""microtab from Python: weighted frequencies, crosstabs and means (with
survey standard errors when the dataset has a design) over microtab
datasets, as pandas frames, and columns as numpy arrays.

    import microtab as mt
    ds = mt.open("census.mtab")
    t = ds.tab("SEX", "EDUC", weight="PERWT", filter="AGE(25-64)", pct="row")
    t.to_pandas()                     # one row per cell
    ds.freq("EDUC").to_pandas()
    ds.means("INCTOT", by="EDUC", median=True).to_pandas()
    ds.column("AGE")                  # numpy: the stored codes
    ds.to_pandas(["AGE", "SEX"], labels=True)   # int64/float64 (Int64/Float64 with NAs)

Every answer comes from the same analysis layer as the command line
(`microtab tab …`), so the numbers are the CLI's to the last digit; the
query grammar (filters, temporary recodes such as
``AGE(r: 0-17; 18-64; 65-*)``) is the CLI's (docs/CLI.md).
"""

from __future__ import annotations

import html
import json
import math
import os
from typing import Any, Iterable, Sequence

import numpy as np
from importlib.metadata import PackageNotFoundError as _NotInstalled
from importlib.metadata import version as _version

from ._microtab import (
    ChangedError,
    CorruptError,
    InputError,
    LockedError,
    MicrotabError,
    QueryError,
    Snapshot as _Snapshot,
    TooLargeError,
    _catalog_parts,
    _import_text,
    _info,
    _query,
    _query_many,
    _set_design,
    _build_design,
    _set_labels,
    _set_about,
    _set_missing,
    _rename,
    _drop,
    _compute,
    _recode,
    _weight,
    _replicate,
    _subset,
    _split,
    _arrow_stream,
    _to_parquet,
    _to_stata,
    _import_parquet,
)

__all__ = [
    "Mask",
    "open",
    "open_many",
    "split",
    "Dataset",
    "Datasets",
    "Variable",
    "Frequencies",
    "Crosstab",
    "Means",
    "Regression",
    "Ratio",
    "Correlations",
    "MicrotabError",
    "QueryError",
    "TooLargeError",
    "CorruptError",
    "LockedError",
    "ChangedError",
    "ArgumentError",
    "InputError",
    "import_csv",
    "import_file",
    "import_xport",
    "import_dta",
    "import_sav",
    "import_por",
    "import_sas7bdat",
    "import_setup",
    "import_fixed",
    "import_parquet",
    "ImportNote",
    "RecodeNote",
    "ArrowStream",
]

try:
    __version__: str = _version("microtab")
    """The installed package's version (the executables print the same: ``microtab --version``)."""
except _NotInstalled:  # imported from a source tree, not installed
    __version__ = "0+unknown"

_DTYPES = {
    "u8": np.uint8, "i8": np.int8, "u16": np.uint16, "i16": np.int16, "u32": np.uint32,
    "i32": np.int32, "i64": np.int64, "f32": np.float32, "f64": np.float64,
}
#: Bytes before a column file's values (FORMAT.md).
_HEADER = 4096
#: Attempts of a read that a writer's new generation interrupts before it
#: has opened its files (each attempt reads one generation whole).
_TRIES = 3


class ArgumentError(QueryError, ValueError):
    """An argument's value that no call can take (a NaN or out-of-range
    ``level``, a non-finite ``rho``, an unknown ``dtypes``): checked in
    Python before anything is read, the message naming the argument. A
    ``ValueError``, and a :class:`QueryError` like the request errors the
    native side finds."""


def _retrying(read):
    """``read()``, again (up to ``_TRIES`` times) when it raises
    :class:`ChangedError` — a writer replaced the generation it had
    opened before it held its files; nothing was mixed and nothing was
    returned — then that error."""
    for i in range(_TRIES):
        try:
            return read()
        except ChangedError:
            if i == _TRIES - 1:
                raise


def _wide(dtypes: str | None) -> bool:
    """``dtypes``: ``"wide"`` (the default) or ``"stored"``."""
    if dtypes is None or dtypes == "wide":
        return True
    if dtypes == "stored":
        return False
    raise ArgumentError(f"dtypes={dtypes!r}: expected 'wide' (int64/float64, the default) or 'stored' "
                     "(the compact stored types: uint8, uint16 …, whose arithmetic wraps)")


def _number(name: str, x: Any) -> float:
    """``x`` as a finite float, or a ValueError naming the argument (a NaN
    would reach the native side as JSON it cannot parse)."""
    import math
    if isinstance(x, bool):
        raise ArgumentError(f"{name}={x!r}: expected a number")
    try:
        f = float(x)
    except (TypeError, ValueError):
        raise ArgumentError(f"{name}={x!r}: expected a number") from None
    if not math.isfinite(f):
        raise ArgumentError(f"{name}={x!r}: expected a finite number")
    return f


def _level(level: Any) -> float:
    """A confidence level: a probability strictly between 0 and 1."""
    import math
    try:
        f = float(level) if not isinstance(level, bool) else math.nan
    except (TypeError, ValueError):
        f = math.nan
    if not (0 < f < 1):
        hint = f"; for {f:g}% give level={f / 100:g}" if 1 <= f < 100 else ""
        raise ArgumentError(f"level={level!r}: the confidence level is a probability strictly between "
                         f"0 and 1, such as 0.95{hint}")
    return f


def _limits(max_cells: Any, allow_negative_weights: Any) -> dict:
    """The request's ``max_cells`` (a whole number above 0, checked here)
    and ``allow_negative_weights``."""
    if max_cells is not None and (isinstance(max_cells, bool) or not isinstance(max_cells, int)
                                  or max_cells < 1):
        raise ArgumentError(f"max_cells={max_cells!r}: expected a whole number of cells (1 or more)")
    return {"max_cells": max_cells, "allow_negative_weights": bool(allow_negative_weights)}


class Mask(np.ndarray):
    """A boolean mask over a dataset's records, as :meth:`Dataset.select`
    returns it: a numpy array (``&``, ``|``, ``~``, ``sum()`` as numpy's)
    that also remembers which import of the dataset it was computed on
    (``dataset_id``, the manifest's ``id``; labels, computed variables and
    other changes keep it, a new import does not). Passed back as
    ``filter=`` after the dataset was imported anew, it is refused: the
    same number of records may be other records."""

    dataset_id: str | None
    #: Over several datasets (:meth:`Datasets.select`): each one's import.
    dataset_ids: tuple | None

    def __array_finalize__(self, obj: Any) -> None:
        self.dataset_id = getattr(obj, "dataset_id", None)
        self.dataset_ids = getattr(obj, "dataset_ids", None)


def _mask(filter: Any, rows: int, ident: str | None = None) -> bytes | None:  # noqa: A002
    """A boolean mask given as ``filter=`` (a numpy array or a pandas
    Series of booleans, one per record) as the bitmap the native side
    reads (bit ``r % 8`` of byte ``r / 8``); ``None`` for a filter text
    or no filter. A mask of another length, of other values than booleans
    or (a pandas Series) with missing values raises ``ValueError``; so
    does a :class:`Mask` of another import of the dataset (``ident``, the
    manifest's ``id``)."""
    arr = _mask_values(filter, rows, ident)
    return None if arr is None else np.packbits(arr, bitorder="little").tobytes()


def _mask_values(filter: Any, rows: int, ident: str | None = None,  # noqa: A002
                 whose: str = "the dataset has") -> np.ndarray | None:
    """A boolean mask given as ``filter=`` checked (as :func:`_mask` says)
    and as a plain numpy ``bool`` array in record order."""
    if filter is None or isinstance(filter, str):
        return None
    made = getattr(filter, "dataset_id", None)
    if made is not None and ident is not None and made != ident:
        raise ArgumentError(
            "filter: the mask was computed by select() on another import of this dataset (it was "
            "imported anew since, so its records may be others); compute the mask again")
    what = type(filter).__name__
    na = getattr(filter, "isna", None)
    if na is not None and not isinstance(filter, np.ndarray):
        # A pandas Series (or Index): a missing value is neither in nor out.
        n_na = int(np.asarray(na()).sum())
        if n_na:
            raise ArgumentError(
                f"filter: the boolean Series has {n_na} missing value(s) (NA); say which records they "
                "are, e.g. filter=mask.fillna(False)")
        dtype = getattr(filter, "dtype", None)
        if dtype is not None and str(dtype) not in ("bool", "boolean"):
            raise ArgumentError(f"filter: a Series of {dtype}; expected booleans (one per record), "
                                "or a filter text such as 'AGE >= 25'")
        filter = np.asarray(_positional(filter, rows), dtype=bool)
    arr = np.asarray(filter)
    if arr.dtype != np.bool_ or arr.ndim != 1:
        raise ArgumentError(f"filter: a {what} of {arr.dtype} with shape {arr.shape}; expected a filter "
                            "text such as 'AGE >= 25' or a boolean mask with one value per record")
    if len(arr) != rows:
        raise ArgumentError(f"filter: the boolean mask has {len(arr):,} values; {whose} "
                            f"{rows:,} records (one value per record)")
    return arr.view(np.ndarray)


def _positional(series: Any, rows: int) -> Any:
    """A pandas Series mask in record order: its index names the records
    (0 … rows-1, the index ``to_pandas()`` gives), as pandas aligns a mask,
    so a mask built on a sorted or shuffled frame selects the records its
    index names. An index that is not such a permutation raises
    ``ArgumentError``."""
    index = getattr(series, "index", None)
    if index is None or len(series) != rows:
        return series  # the length check follows
    if index.equals(_range_index(rows)):
        return series
    ok = index.is_unique and str(index.dtype).startswith(("int", "uint", "Int", "UInt"))
    if ok and len(index) and (index.min() != 0 or index.max() != rows - 1):
        ok = False
    if not ok:
        raise ArgumentError(
            "filter: the boolean Series' index does not name the records 0 … "
            f"{rows - 1:,} (the index ds.to_pandas() gives), so which record each value is for is "
            "unknown; build the mask on a frame with that index, or pass mask.to_numpy() if its "
            "values are in record order")
    return series.sort_index()


def _pandas() -> Any:
    """pandas, or an error saying how to install it (an optional dependency)."""
    try:
        import pandas
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError(
            'this needs pandas, an optional dependency of microtab: pip install "microtab[pandas]" '
            "(or pip install pandas)", name="pandas") from e
    return pandas


def _range_index(rows: int) -> Any:
    pd = _pandas()

    return pd.RangeIndex(rows)


def _first(n: int, rows: int) -> bytes:
    """The bitmap of the first ``n`` records of ``rows``."""
    n = max(0, min(n, rows))
    b = bytearray((rows + 7) // 8)
    b[: n // 8] = b"\xff" * (n // 8)
    if n % 8:
        b[n // 8] = (1 << (n % 8)) - 1
    return bytes(b)


def _design_spec(weight, repweights, type, rho, scale, rscales, mse, strata,  # noqa: A002
                 cluster, fpc, lonely_psu) -> dict:
    """A design's arguments (as :meth:`Dataset.design` takes them) checked
    and as the native side reads them."""
    rho = None if rho is None else _number("rho", rho)
    scale = None if scale is None else _number("scale", scale)
    if rscales is not None:
        rscales = [_number("rscales", r) for r in rscales]
    if weight is None:
        raise QueryError("a design needs its full-sample weight: design(\"PERWT\", ...)")
    return {"weight": weight, "repweights": repweights if repweights is None or isinstance(repweights, str)
            else list(repweights), "type": type, "rho": rho, "scale": scale,
            "rscales": rscales, "mse": mse, "strata": strata, "cluster": cluster, "fpc": fpc,
            "lonely_psu": lonely_psu}


def _progress(progress, path) -> tuple[Any, Any]:
    """An import's progress callback and its closer: ``progress=True`` or,
    by default, when stderr is a terminal or the code runs in Jupyter, a
    bar (tqdm's when installed, else a line of text on stderr); a callable
    gets ``(bytes done, bytes total)``; ``False`` shows nothing."""
    import sys
    if callable(progress):
        return progress, lambda: None
    if progress is False or (progress is None and not (sys.stderr.isatty() or "ipykernel" in sys.modules)):
        return None, lambda: None
    name = os.path.basename(os.fspath(path))
    try:
        from tqdm.auto import tqdm
    except ImportError:
        tqdm = None
    if tqdm is not None:
        bar = tqdm(desc=f"importing {name}", unit="B", unit_scale=True, leave=False)

        def cb(done, total):
            bar.total = total
            bar.n = done
            bar.refresh()
        return cb, bar.close

    def cb(done, total):
        pct = 100 * done / total if total else 100
        sys.stderr.write(f"\rimporting {name}: {pct:5.1f}% ({done / 1e6:,.0f} of {total / 1e6:,.0f} MB)")
        sys.stderr.flush()
    return cb, lambda: (sys.stderr.write("\r" + " " * 60 + "\r"), sys.stderr.flush())


def open(path: str | os.PathLike) -> "Dataset":  # noqa: A001 - the package's verb
    """Opens the dataset directory ``path`` (reads its manifest only).

    A file (a CSV, a ``.dta`` …) is not a dataset: import it first
    (:func:`import_file`, :func:`import_csv`), then open what it wrote.

    >>> ds = mt.open("census.mtab")
    >>> ds.shape
    (2000000, 26)
    """
    return Dataset(path)


def __dir__() -> list[str]:
    # What tab completion offers: the package's own names, not the
    # modules it imports (np, json, os …).
    return sorted(__all__ + ["dask", "__version__"])


class RecodeNote(UserWarning):
    """Something about a recode's rules the result alone would not show:
    rules that take the same values (the first of them gives its code
    there), or rules after a ``*`` that take nothing. Issued as a warning
    by :meth:`Dataset.recode`; the variable is written all the same."""


class ImportNote(UserWarning):
    """Something about how an import read its input (a column read as
    text and why, a detected delimiter, codes made missing …), with the
    keyword that would read it otherwise: issued as a warning by the
    import functions."""


def _typed(x: Any) -> str:
    """A value as a user types it: ``1`` for ``1`` or ``1.0``, ``1.5``,
    a text as it is."""
    if isinstance(x, bool):
        return str(int(x))
    if isinstance(x, (float, np.floating)) and float(x).is_integer():
        return str(int(x))
    return str(x)


def _pairs(labels: dict | None) -> list:
    """Value labels ``{value: label}`` as (value as typed, label) pairs."""
    return [(_typed(k), str(v)) for k, v in (labels or {}).items()]


def _codes(missing: dict | None) -> dict:
    return {k: [str(x) for x in (v if isinstance(v, (list, tuple)) else [v])]
            for k, v in (missing or {}).items()}


def _imported(summary: str, out) -> "Dataset":
    """Issues an import's notes as :class:`ImportNote` warnings and opens
    the dataset."""
    import warnings
    for note in json.loads(summary).get("notes", []):
        warnings.warn(note, ImportNote, stacklevel=3)
    return Dataset(out)


def import_csv(path: str | os.PathLike, out: str | os.PathLike, *, missing: dict | None = None,
               types: dict | None = None, na: Sequence[str] | None = None,
               na_text: Sequence[str] | None = None, delimiter: str | None = None,
               encoding: str | None = None, plain: bool = False, infer_rows: int | str | None = None,
               ddi: str | os.PathLike | None = None, keep_niu: bool = False,
               vars: str | Sequence[str] | None = None, filter: str | None = None,  # noqa: A002
               force: bool = False, decimal_comma: bool = False,
               progress: Any = None) -> "Dataset":
    """Imports a CSV file (plain or gzip) as the dataset ``out``, as
    ``microtab import`` does, and opens it. The options take the words
    of ``microtab import``'s flags (docs/CLI.md): ``missing={"INCTOT":
    [9999999]}`` declares user-missing codes, ``types={"ZIP": "string"}``
    forces types (``int``, ``float``, ``string``), ``na``/``na_text`` the
    texts read as missing (``na_text=[]`` keeps every text as a value),
    ``encoding="latin1"``, ``infer_rows=`` a number or ``"all"``; ``ddi``
    reads an IPUMS codebook for the columns (and sets the design its
    replicate weights imply), ``keep_niu=True`` keeps its not-in-universe
    codes as values; ``decimal_comma=True`` reads numbers written with a
    decimal comma (``1,5``), as ``microtab import --decimal-comma``. What is worth knowing about how the file was read is
    issued as :class:`ImportNote` warnings. Bad input raises
    :class:`InputError` naming the file, line and field (and the keyword
    that would read it); a failed import leaves ``out`` as it was.
    ``progress``: a bar in a terminal or notebook (default), ``False`` for
    none, or a callable getting ``(bytes done, bytes total)``.

    Every import function takes ``vars=`` (a list of names, or one string
    of names separated by commas or spaces) and ``filter=`` (SDA-style,
    ``"AGE(18-64) SEX=2"``) to keep only those variables and the records
    that pass, as ``microtab import --vars/--filter`` does: the file is
    imported whole into a staging dataset beside ``out`` (removed
    afterwards), so an unknown name or a bad filter raises
    :class:`QueryError` naming it and leaves an existing ``out`` as it
    was (``force=True`` too). The filter sees the labels and missing codes
    the import gives."""
    if infer_rows is not None and (isinstance(infer_rows, bool) or not isinstance(infer_rows, (int, str))):
        raise ArgumentError(f"infer_rows={infer_rows!r}: expected a number of records or 'all'")
    spec = {"missing": _codes(missing),
            "types": {k: str(v) for k, v in (types or {}).items()},
            "na": list(na) if na is not None else None,
            "na_text": list(na_text) if na_text is not None else None,
            "delimiter": delimiter, "encoding": encoding, "plain": plain,
            "infer_rows": str(infer_rows) if infer_rows is not None else None,
            "ddi": os.fspath(ddi) if ddi else None, "keep_niu": keep_niu,
            "decimal_comma": decimal_comma}
    return _import_file("csv", path, out, force, spec, progress, vars, filter)


def import_fixed(data: str | os.PathLike, ddi: str | os.PathLike, out: str | os.PathLike, *,
                 missing: dict | None = None, rectype: str | None = None, keep_niu: bool = False,
                 plain: bool = False,
                 vars: str | Sequence[str] | None = None, filter: str | None = None,  # noqa: A002
                 force: bool = False, progress: Any = None) -> "Dataset":
    """Imports a fixed-width file (an IPUMS ``.dat`` or ``.dat.gz``) with
    its DDI codebook as the dataset ``out`` — labels, missing codes,
    implied decimals, and the survey design its replicate weights imply —
    and opens it (``progress`` and notes as for :func:`import_csv`).
    ``rectype`` chooses the record type that becomes a row of a
    hierarchical file; ``keep_niu=True`` keeps the codes the codebook
    names not-in-universe or missing only in labels or text as values."""
    spec = {"missing": _codes(missing), "rectype": rectype, "keep_niu": keep_niu, "plain": plain,
            "ddi": os.fspath(ddi)}
    return _import_file("fixed", data, out, force, spec, progress, vars, filter)


def import_setup(data: str | os.PathLike, setup: str | os.PathLike | list, out: str | os.PathLike, *,
                 missing: dict | None = None, encoding: str | None = None, keep_niu: bool = False,
                 rectype: str | None = None, plain: bool = False,
                 vars: str | Sequence[str] | None = None, filter: str | None = None,  # noqa: A002
                 force: bool = False, progress: Any = None) -> "Dataset":
    """Imports text data described by setup files — a Stata dictionary
    (``.dct``) or do-file (``.do``), SPSS syntax (``.sps``) or a SAS program
    (``.sas``), as IPUMS, ICPSR, NBER, DHS and MEPS publish them and as
    ``microtab subset`` writes them — as the dataset ``out``, and opens it.
    ``setup`` is one file or a list (a ``.dct`` for the columns and a
    ``.do`` for the labels, say). The setup gives each variable's columns
    (fixed-width data, plain or gzip-compressed) or the header of a
    delimited file, its type and implied decimals, variable and value
    labels, and missing values (SPSS ranges included); statements that
    change values are not run, and each is named in the notes. Records of
    several lines (``RECORDS=``, ``#2``, ``_line(2)``) are joined; records
    of several types (``FILE TYPE MIXED``, SAS ``IF RECTYPE = 'P' THEN
    DO``, IPUMS's hierarchical do-files) give a row per person record
    with its household's variables, as a hierarchical DDI extract does
    (``rectype="H"``: a row per household record). A number field holding
    other text is missing, as the packages read it, and counted in a note.

    >>> ds = mt.import_setup("cps_00006.dat.gz", "cps_00006.sps", "cps.mtab")  # doctest: +SKIP
    """
    files = [setup] if isinstance(setup, (str, os.PathLike)) else list(setup)
    spec = {"setup": [os.fspath(f) for f in files], "missing": _codes(missing), "encoding": encoding,
            "keep_niu": keep_niu, "rectype": rectype, "plain": plain}
    return _import_file("setup", data, out, force, spec, progress, vars, filter)


def import_xport(path: str | os.PathLike, out: str | os.PathLike, *, encoding: str | None = None,
                 plain: bool = False,
                 vars: str | Sequence[str] | None = None, filter: str | None = None,  # noqa: A002
                 force: bool = False, progress: Any = None) -> "Dataset":
    """Imports a SAS transport file (XPORT version 5 or 8, ``.xpt``: NHANES
    publishes its data so) as the dataset ``out`` and opens it, as
    ``microtab import`` does: variable names and labels kept, numbers
    stored as (scaled) integers where they are exact, ``.A``–``.Z`` and
    ``._`` kept as labelled user-missing codes, dates, datetimes and
    times (by their SAS format) as ISO 8601 text, text without its
    trailing blanks (blank is missing). Its first member is read; a note
    names any other. ``encoding="latin1"`` (or ``"windows-1252"``) reads
    text that is not UTF-8 (the format does not say). ``progress`` and
    notes as for :func:`import_csv`; bad input raises
    :class:`InputError` naming the file and byte offset (and the record
    and variable), and leaves ``out`` as it was."""
    spec = {"encoding": encoding, "plain": plain}
    return _import_file("xport", path, out, force, spec, progress, vars, filter)


def import_dta(path: str | os.PathLike, out: str | os.PathLike, *, encoding: str | None = None,
               plain: bool = False,
               vars: str | Sequence[str] | None = None, filter: str | None = None,  # noqa: A002
               force: bool = False, progress: Any = None) -> "Dataset":
    """Imports a Stata file (``.dta``, releases 104 to 119: Stata 4 to 19)
    as the dataset ``out`` and opens it, as ``microtab import`` does:
    variable names and labels and value labels kept; ``byte``, ``int`` and
    ``long`` as integers, ``float`` and ``double`` as (scaled) integers
    where they are exact, else doubles; the extended missing values
    ``.a``–``.z`` as labelled user-missing codes (Stata's own codes in
    integer columns, Stata's ``double`` codes in the others); ``%td`` dates
    and ``%tc`` datetimes as ISO 8601 text; empty text missing. Text is
    read as UTF-8 from release 118 and Windows-1252 before;
    ``encoding="latin1"`` (or ``"utf-8"``, ``"windows-1252"``) overrides.
    ``progress`` and notes as for :func:`import_csv`; bad input raises
    :class:`InputError` naming the file and byte offset (and the record
    and variable), and leaves ``out`` as it was."""
    spec = {"encoding": encoding, "plain": plain}
    return _import_file("dta", path, out, force, spec, progress, vars, filter)


def import_sav(path: str | os.PathLike, out: str | os.PathLike, *, encoding: str | None = None,
               plain: bool = False,
               vars: str | Sequence[str] | None = None, filter: str | None = None,  # noqa: A002
               force: bool = False, progress: Any = None) -> "Dataset":
    """Imports an SPSS system file (``.sav``: uncompressed or
    bytecode-compressed; ``.zsav``: zlib) as the dataset ``out`` and opens
    it, as ``microtab import`` does: variable names (long names), labels
    and value labels kept; numbers as (scaled) integers where they are
    exact, else doubles; discrete user-missing values as missing codes, a
    range as the codes of the values the data hold in it; ``DATE``-like
    formats as ISO dates, ``DATETIME`` as ISO datetimes, ``TIME`` as
    ``HH:MM:SS``; very long strings joined; empty text missing. Text is
    read in the encoding the file names (any code page);
    ``encoding=`` overrides. ``progress`` and notes as for
    :func:`import_csv`; bad input raises :class:`InputError` naming the
    file and byte offset, and leaves ``out`` as it was."""
    spec = {"encoding": encoding, "plain": plain}
    return _import_file("sav", path, out, force, spec, progress, vars, filter)


def import_por(path: str | os.PathLike, out: str | os.PathLike, *, encoding: str | None = None,
               plain: bool = False,
               vars: str | Sequence[str] | None = None, filter: str | None = None,  # noqa: A002
               force: bool = False, progress: Any = None) -> "Dataset":
    """Imports an SPSS portable file (``.por``: the text format SPSS and
    PSPP export, in lines of 80 columns, with a character table of its
    own) as the dataset ``out`` and opens it, as ``microtab import``
    does, with what :func:`import_sav` keeps: variable names, labels and
    value labels (a set labelling several variables copied to each);
    numbers as (scaled) integers where they are exact, else the doubles
    nearest their base-30 digits; discrete user-missing values as missing
    codes, a range as the codes of the values the data hold in it;
    ``DATE``-like formats as ISO dates, ``DATETIME`` as ISO datetimes,
    ``TIME`` as ``HH:MM:SS``; empty text missing, text longer than its
    width cut (a note counts them). Characters pass through the file's
    table; bytes beyond ASCII the table does not name are read as
    Windows-1252 (a note counts the texts holding them):
    ``encoding="utf-8"`` reads the files PSPP writes. ``progress`` and
    notes as for :func:`import_csv`; bad input raises
    :class:`InputError` naming the file and byte offset (and the record
    and variable), and leaves ``out`` as it was."""
    spec = {"encoding": encoding, "plain": plain}
    return _import_file("por", path, out, force, spec, progress, vars, filter)


def import_sas7bdat(path: str | os.PathLike, out: str | os.PathLike, *,
                    catalog: str | os.PathLike | None = None, encoding: str | None = None,
                    plain: bool = False,
                    vars: str | Sequence[str] | None = None, filter: str | None = None,  # noqa: A002
                    force: bool = False, progress: Any = None) -> "Dataset":
    """Imports a SAS data set (``.sas7bdat``: uncompressed, RLE or RDC
    compressed, 32- or 64-bit, either byte order) as the dataset ``out``
    and opens it, as ``microtab import`` does: variable names and labels
    kept; numbers as (scaled) integers where they are exact, else
    doubles; ``.`` missing, the special ``.A``-``.Z`` and ``._`` as
    distinct missing codes labelled ``.A``…; date, datetime and time
    formats as ISO text; blank text missing; records SAS marks as deleted
    left out. ``catalog`` names a format catalog (``.sas7bcat``) whose
    formats give value labels. Text is read in the encoding the file names
    (any code page); ``encoding=`` overrides. ``progress`` and notes as for
    :func:`import_csv`; bad input raises :class:`InputError` naming the
    file, and leaves ``out`` as it was."""
    spec = {"encoding": encoding, "plain": plain,
            "catalog": os.fspath(catalog) if catalog is not None else None}
    return _import_file("sas7bdat", path, out, force, spec, progress, vars, filter)


def import_file(path: str | os.PathLike, out: str | os.PathLike, *, encoding: str | None = None,
                catalog: str | os.PathLike | None = None,
                plain: bool = False,
                vars: str | Sequence[str] | None = None, filter: str | None = None,  # noqa: A002
                force: bool = False, progress: Any = None) -> "Dataset":
    """Imports ``path`` in the format its content shows — a SAS transport
    file (:func:`import_xport`), a Stata file (:func:`import_dta`), an SPSS
    system file (:func:`import_sav`) or portable file
    (:func:`import_por`), a SAS data set
    (:func:`import_sas7bdat`, with its format ``catalog``), else CSV
    (:func:`import_csv` with its defaults) — as ``microtab import FILE
    OUT`` does, and opens it."""
    spec = {"encoding": encoding, "plain": plain,
            "catalog": os.fspath(catalog) if catalog is not None else None}
    return _import_file("auto", path, out, force, spec, progress, vars, filter)


def _import_file(format: str, path, out, force: bool, spec: dict, progress: Any,
                 vars: Any = None, filter: str | None = None) -> "Dataset":  # noqa: A002
    """Imports the file ``path`` (``format``: ``csv``, ``fixed``, ``setup``, ``xport``, ``dta``, ``sav``, ``por``, ``sas7bdat`` or ``auto``)
    with the options ``spec`` (``None`` values left out) as the dataset
    ``out``, showing ``progress``, and opens it. ``vars`` (a list of names,
    or one string of names separated by commas or spaces) and ``filter``
    (SDA-style) keep those variables and the records that pass: the file
    is imported beside ``out`` first, so a bad name or filter raises and
    leaves an existing ``out`` as it was."""
    if vars is not None:
        if isinstance(vars, str):
            vars = [vars]
        elif not all(isinstance(v, str) for v in vars):
            raise ArgumentError(f"vars={vars!r}: expected variable names (a list, or one string "
                                "of names separated by commas or spaces)")
        spec = {**spec, "vars": list(vars)}
    if filter is not None:
        if not isinstance(filter, str):
            raise ArgumentError(f"filter={filter!r}: expected an SDA-style filter such as "
                                "'AGE(18-64) SEX=2'")
        spec = {**spec, "filter": filter}
    spec = {k: v for k, v in spec.items() if v is not None}
    cb, done = _progress(progress, path)
    try:
        summary = _import_text(format, os.fspath(path), os.fspath(out), force, json.dumps(spec), cb)
    finally:
        done()
    return _imported(summary, out)


def import_parquet(path: str | os.PathLike, out: str | os.PathLike, *, ddi: str | os.PathLike | None = None,
                   keep_niu: bool = False, plain: bool = False, force: bool = False) -> "Dataset":
    """Imports a Parquet file (from microtab, DuckDB, pyarrow, Polars,
    ipumspy …) as the dataset ``out`` and opens it. A file written by
    ``Dataset.to_parquet``/``microtab export`` gets back its labels,
    missing codes, implied decimals and design; ``ddi`` takes them from an
    IPUMS codebook instead (``keep_niu`` as for :func:`import_fixed`).
    Integers, decimals, floats, booleans, text and dates (as ISO text) are
    imported; other types raise :class:`InputError` naming the column."""
    spec = {"ddi": os.fspath(ddi) if ddi else None, "keep_niu": keep_niu, "plain": plain}
    return _imported(_import_parquet(os.fspath(path), os.fspath(out), force, json.dumps(spec)), out)


class ArrowStream:
    """Records of a dataset as Arrow record batches, decoded on every core
    as a consumer reads them: an object with ``__arrow_c_stream__``, so
    ``pyarrow.table(s)``, ``polars.DataFrame(s)`` and
    ``duckdb.sql("SELECT … FROM s")`` read it without copies. Values as
    :meth:`Dataset.to_pandas` gives them: implied decimals applied (or
    exact decimals), missing codes and empty values as nulls (or the codes
    kept), text as dictionary arrays, labels on request; the variables'
    metadata and the design are JSON under the schema's ``b"microtab"``
    key. Integers come as ``int64`` and floats as ``float64`` (no
    arithmetic wraps), or with ``dtypes="stored"`` in the compact stored
    types (``uint8``, ``uint16`` …, handed over without a conversion).

    Each ``__arrow_c_stream__`` call starts a new pass over the dataset as
    it is then, and reads one generation of it whole: its columns, their
    dictionaries and the filter's records are opened from one manifest
    before the first batch, and a dataset replaced meanwhile (``import
    --force``) is read again from its new generation, or
    :class:`ChangedError` is raised — never a mix of the two."""

    def __init__(self, path: str, spec: dict, dataset: "Dataset | None" = None):
        self._path = path
        self._spec = {k: v for k, v in spec.items() if v is not None}
        _wide(self._spec.get("dtypes"))
        # A boolean mask as filter= (checked against the dataset's import
        # at each pass, as a Mask is).
        self._dataset = dataset
        if not isinstance(self._spec.get("filter"), str):
            self._mask_filter = self._spec.pop("filter", None)
        else:
            self._mask_filter = None
        if self._mask_filter is not None and dataset is not None:
            dataset._export_mask(self._mask_filter)

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        spec = json.dumps(self._spec)
        if self._mask_filter is None or self._dataset is None:
            return _retrying(lambda: _arrow_stream(self._path, spec))
        mask = self._dataset._export_mask(self._mask_filter)
        return _retrying(lambda: _arrow_stream(self._path, spec, mask))

    def to_arrow(self):
        """A ``pyarrow.Table``."""
        import pyarrow as pa
        return pa.table(self)

    def to_polars(self):
        """A ``polars.DataFrame``."""
        import polars as pl
        return pl.DataFrame(self)

    def __repr__(self) -> str:
        return f"<microtab.ArrowStream of {self._path!r}: {self._spec}>"


class _Queries:
    """freq, tab and means over one dataset or several as one."""

    def _ask(self, spec: dict) -> dict:
        raise NotImplementedError

    def freq(self, var: str, *, weight: str | None = None, filter: str | None = None,  # noqa: A002
             include_missing: bool = False, design: bool = True, level: float = 0.95,
             max_cells: int | None = None, allow_negative_weights: bool = False) -> "Frequencies":
        """Frequencies of ``var`` (a name or a temporary recode), counts,
        weighted counts and percentages; SEs and CIs under a design
        (``level``: the intervals' confidence, a probability strictly
        between 0 and 1; NaN, infinities and percentages such as 95 raise
        ``ValueError`` naming it). ``max_cells``: the most cells a result
        may have (larger ones raise :class:`TooLargeError`);
        ``allow_negative_weights=True`` accepts a weight that is negative in
        some records (replicate weights can be), refused otherwise.

        Parameters
        ----------
        var : str
            A variable, or a temporary recode (``"AGE(r: 0-17; 18-*)"``).
        weight : str, optional
            The weight (the design's when the dataset has one).
        filter : str or boolean mask, optional
            A filter text (``"AGE >= 25 and SEX = 2"``, ``"AGE(25-64)"``;
            the grammar of docs/CLI.md's Filters: ``and``/``&``,
            ``or``/``|``, ``not``, ``between``, ``in``, parentheses; a
            missing value fails a comparison) or a boolean numpy array /
            pandas Series with one value per record (``ValueError`` for
            another length, or a Series with ``<NA>``).

        Returns
        -------
        Frequencies

        Examples
        --------
        >>> ds.freq("EDUC", weight="PERWT", filter="AGE >= 25").to_pandas()   # doctest: +SKIP
        """
        return Frequencies(self._ask({"analysis": "freq", "var": var, "weight": weight, "filter": filter,
                                      "include_missing": include_missing, "design": design,
                                      "level": _level(level), **_limits(max_cells, allow_negative_weights)}))

    def tab(self, row: str, col: str, *, control: str | None = None, weight: str | None = None,
            filter: str | None = None, pct: str | Sequence[str] | None = None,  # noqa: A002
            stats: bool = False,
            include_missing: bool = False, design: bool = True, level: float = 0.95,
            pct_ci: str | None = None, z: bool = False, max_cells: int | None = None,
            allow_negative_weights: bool = False, diff: Any = None) -> "Crosstab":
        """Crosstab of ``row`` by ``col`` (one table per category of
        ``control``); ``pct`` is ``"row"``, ``"col"`` or ``"total"``, or
        several (``"col,row,total"`` or ``["col", "row"]``: each cell has
        each of them with its SE, in that order);
        ``stats`` adds chi-square (Rao–Scott under a design) and the
        association measures; ``z`` each cell's z-statistic (its column
        percentage, row percentage with ``pct="row"`` — with several, the
        first decides — less the whole table's, over the design-based SE of the difference); ``level``,
        ``max_cells`` and ``allow_negative_weights`` as for :meth:`freq`.
        ``diff=BASE`` (no ``control``) compares the columns with the column
        ``BASE``: each row category's share in each column minus its share
        in the base column, with the design-based SE, t, p and interval
        (:meth:`Crosstab.differences`; R ``svyby`` + ``svycontrast``).

        Parameters
        ----------
        row, col : str
            Variables or temporary recodes.
        control : str, optional
            One table per category of it.
        weight : str, optional
        filter : str or boolean mask, optional
            As for :meth:`freq`.
        pct : {"row", "col", "total"}, a text of several separated by commas, or a list of them, optional

        Returns
        -------
        Crosstab
            ``print(t)`` shows the table; ``t.to_pandas(wide=True)`` is it
            rows × columns.

        Examples
        --------
        >>> t = ds.tab("SEX", "RACE", weight="PERWT", pct="row")   # doctest: +SKIP
        >>> t.to_pandas(wide=True)["pct"]                         # doctest: +SKIP
        """
        if pct_ci is not None and pct_ci not in ("logit", "korn-graubard", "beta"):
            raise ArgumentError(f"pct_ci={pct_ci!r}: expected 'logit' or 'korn-graubard'")
        if pct is not None and not isinstance(pct, str):
            pct = list(pct)
            if not all(isinstance(p, str) for p in pct):
                raise ArgumentError(f"pct={pct!r}: expected 'row', 'col' or 'total', or a list of them")
        t = Crosstab(self._ask({"analysis": "tab", "row": row, "col": col, "control": control,
                                   "weight": weight, "filter": filter, "pct": pct, "stats": stats,
                                   "include_missing": include_missing, "design": design,
                                   "level": _level(level), "pct_ci": pct_ci, "z": z,
                                   "diff": None if diff is None else str(diff),
                                   **_limits(max_cells, allow_negative_weights)}))
        # Whether the test was asked for (printed as "not defined" when it
        # cannot be computed).
        t._asked_stats = bool(stats)
        return t

    def means(self, var: str, by: str | Sequence[str] = (), *, weight: str | None = None,
              filter: str | None = None, median: bool = False,  # noqa: A002
              percentiles: Iterable[float] = (), design: bool = True, level: float = 0.95,
              max_cells: int | None = None, allow_negative_weights: bool = False,
              diff: Any = None, test_mean: float | None = None) -> "Means":
        """Weighted mean, SD, N and sum of weights of ``var`` per group of
        ``by`` (one name, or a list of names: each is one variable or
        recode, whatever characters it holds; none: of all the records, as
        R's ``svymean(~x, design)``), with medians/percentiles on
        request (``percentiles`` in percent, 1 to 99; ``level``,
        ``max_cells`` and ``allow_negative_weights`` as for :meth:`freq`; a
        NaN or a non-number raises ``ValueError`` naming the argument).
        ``diff=BASE`` (one ``by`` variable) also compares each group with
        the group whose value is ``BASE``: its mean minus the base's with
        the design-based SE of the difference, t, p and interval
        (:meth:`Means.differences`; R ``svyttest``, ``svycontrast``).
        ``test_mean=VALUE`` tests each group's mean, and the total's,
        against ``VALUE`` (:meth:`Means.tests`; R's one-sample ``svyttest``
        of each group's domain, on its degrees of freedom less one).

        Parameters
        ----------
        var : str
            The analysis variable.
        by : str or list of str, optional
            Grouping variables (or recodes), outermost first; none: one
            row, the mean of all the records.
        weight : str, optional
        filter : str or boolean mask, optional
            As for :meth:`freq`.
        median : bool, default False
        percentiles : list of float
            In percent (10 for the 10th).

        Returns
        -------
        Means
            ``to_pandas()``: one row per group, each quantile with its SE
            and interval under a design.

        Examples
        --------
        >>> ds.means("INCTOT", by="SEX", median=True, filter="AGE >= 25").to_pandas()   # doctest: +SKIP
        """
        by = [by] if isinstance(by, str) else list(by or ())
        level = _level(level)
        pct = [_number("percentiles", p) for p in percentiles]
        if any(not (1 <= p < 100) for p in pct):
            raise ArgumentError(f"percentiles={pct}: give them in percent, from 1 to 99 (10 for the 10th); "
                             "median=True for the median")
        q = sorted({*(0.5 for _ in [0] if median), *(p / 100 for p in pct)})
        return Means(self._ask({"analysis": "means", "var": var, "by": by, "weight": weight,
                                "filter": filter, "design": design, "level": level,
                                "quantiles": q, "diff": None if diff is None else str(diff),
                                "test_mean": None if test_mean is None else _number("test_mean", test_mean),
                                **_limits(max_cells, allow_negative_weights)}))

    def regress(self, formula: str, *, family: str = "gaussian", weight: str | None = None,
                filter: str | None = None, design: bool = True,  # noqa: A002
                level: float = 0.95, max_cells: int | None = None,
                allow_negative_weights: bool = False) -> "Regression":
        """A regression model with design-based standard errors (R
        ``svyglm``): ``formula`` as R writes it (``"INCTOT ~ AGE +
        factor(SEX) + factor(EDUC)"``; ``factor(V, base=K)``, ``A:B``,
        ``A*B``, ``- 1``, temporary recodes inside ``factor()``, a condition
        such as ``"EMPSTAT(1)"`` as a binary outcome); ``family`` one of
        ``"gaussian"``, ``"logit"``, ``"probit"``, ``"poisson"``. Under the
        dataset's design the SEs are its replicate refits or its Taylor
        linearization; ``design=False`` gives model-based SEs (unweighted)
        or the sandwich (HC0, with a ``weight``). The other arguments as
        for :meth:`freq`. Returns a :class:`Regression`."""
        if family not in ("gaussian", "linear", "normal", "logit", "logistic", "binomial",
                          "quasibinomial", "probit", "poisson", "quasipoisson"):
            raise ArgumentError(f"family={family!r}: expected 'gaussian', 'logit', 'probit' or 'poisson'")
        return Regression(self._ask({"analysis": "regress", "formula": formula, "family": family,
                                     "weight": weight, "filter": filter, "design": design,
                                     "level": _level(level),
                                     **_limits(max_cells, allow_negative_weights)}))


    def ratio(self, numerator: str, denominator: str, by: str | Sequence[str] = (), *,
              weight: str | None = None, filter: str | None = None,  # noqa: A002
              design: bool = True, level: float = 0.95, max_cells: int | None = None,
              allow_negative_weights: bool = False) -> "Ratio":
        """The ratio of the weighted totals of ``numerator`` and
        ``denominator`` (income per person), overall and per group of
        ``by``, with its design-based SE and interval (R ``svyratio``;
        records missing either variable are left out). Without a design
        each record is its own PSU (R ``svydesign(ids = ~1)``). The other
        arguments as for :meth:`means`. Returns a :class:`Ratio`."""
        by = [by] if isinstance(by, str) else list(by or ())
        return Ratio(self._ask({"analysis": "ratio", "numerator": numerator,
                                "denominator": denominator, "by": by, "weight": weight,
                                "filter": filter, "design": design, "level": _level(level),
                                **_limits(max_cells, allow_negative_weights)}))

    def corr(self, *vars: str, weight: str | None = None,  # noqa: A002
             filter: str | None = None, design: bool = True,  # noqa: A002
             level: float = 0.95, allow_negative_weights: bool = False) -> "Correlations":
        """Weighted Pearson correlations of two or more numeric variables
        (SDA CORRTAB) over the records with a value of each, with
        design-based SEs, t tests and intervals (replicate correlations, or
        the linearization over the design's PSUs); unweighted without a
        design, Pearson's test (``scipy.stats.pearsonr``). ``corr("A",
        "B", "C")`` or ``corr(["A", "B", "C"])``. Returns a
        :class:`Correlations`."""
        names = list(vars[0]) if len(vars) == 1 and not isinstance(vars[0], str) else list(vars)
        if len(names) < 2:
            raise ArgumentError(f"corr needs two or more variables, got {names}")
        return Correlations(self._ask({"analysis": "corr", "vars": names, "weight": weight,
                                       "filter": filter, "design": design, "level": _level(level),
                                       **_limits(None, allow_negative_weights)}))


class Variable:
    """One variable's metadata: ``name``, ``label``, ``kind`` (``"int"``,
    ``"float"`` or ``"string"``), ``type`` (stored numpy type name),
    ``decimals`` (implied), ``missing_codes`` (as stored: integers times
    ``10**decimals``, dictionary positions for text), ``missing_values``
    (as users see them), ``value_labels`` (``{"1": "Male"}``),
    ``min``/``max`` (as users see them, as ``microtab info`` shows them:
    implied decimals applied, a text variable's text), ``nulls``,
    ``description``. All of the generation of the dataset it was read
    from; what is shown comes from the same description as ``info()``,
    ``microtab info`` and the HTTP API."""

    def __init__(self, entry: dict, state: Any = None):
        self._e = entry
        # The generation this entry belongs to: its description (values as
        # shown, text from its dictionary) is read from it, never from a
        # newer one whose codes differ.
        self._state = state
        self.name: str = entry["name"]
        self.label: str | None = entry.get("label")
        self.description: str | None = entry.get("description")
        self.kind: str = entry["kind"]
        self.type: str = entry["type"]
        self.decimals: int = entry.get("decimals", 0)
        self.missing_codes: list[float] = list(entry.get("missing_codes", []))
        self.value_labels: dict[str, str] = dict(entry.get("value_labels", {}))
        self.nulls: int = entry.get("nulls", 0)

    def info(self) -> dict:
        """The variable as every front end describes it (an entry of
        ``Dataset.info()["variables"]``, of ``microtab info --format
        json`` and of ``GET /api/v1/datasets/NAME``)."""
        if self._state is None:
            return {}
        return self._state.described()["by_name"][self.name]

    def _shown(self, x: Any) -> Any:
        # Implied decimals as exact decimals with all their places (the
        # JSON number is the shortest text of the value: its digits).
        if x is not None and self.kind == "int" and self.decimals:
            from decimal import Decimal
            return Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-self.decimals))
        return x

    @property
    def min(self) -> Any:
        """The smallest value, as shown (``None`` when every value is empty)."""
        return self.info().get("min")

    @property
    def max(self) -> Any:
        """The largest value, as shown."""
        return self.info().get("max")

    @property
    def missing_values(self) -> list:
        """The user-missing codes as users see them: ``9999999``,
        ``99.99`` with two implied decimals (a ``Decimal``), the text of a
        text code."""
        if not self.missing_codes:
            return []
        return [self._shown(x) for x in self.info().get("missing_codes", [])]

    def __repr__(self) -> str:
        return f"Variable({self.name!r}, kind={self.kind!r}, type={self.type!r}, label={self.label!r})"


class _State:
    """One generation of a dataset as this process sees it: the native
    snapshot (the manifest read once; every read through it is of that
    generation or raises :class:`ChangedError`), the manifest as a dict,
    its variables, and (when first asked) its description."""

    __slots__ = ("snap", "m", "vars", "by_name", "stamp", "path", "_described")

    def __init__(self, snap: Any, stamp: Any, path: str = ""):
        self.snap = snap
        self.stamp = stamp
        self.path = path
        self._described = None
        self.m = json.loads(snap.info())
        self.vars = [Variable(v, self) for v in self.m["variables"]]
        self.by_name = {v.name.lower(): v for v in self.vars}

    def described(self) -> dict:
        """The analysis layer's description of this generation (the
        dictionaries of text variables are read for it, so not before it
        is needed)."""
        d = self._described
        if d is None:
            d = json.loads(self.snap.describe(self.path))
            d["by_name"] = {v["name"]: v for v in d["variables"]}
            self._described = d
        return d

    def variable(self, name: str, path: str = "") -> "Variable":
        try:
            return self.by_name[name.lower()]
        except (KeyError, AttributeError):
            known = ", ".join(v.name for v in self.vars)
            raise QueryError(f"unknown variable {name!r} in {path or 'the dataset'} (variables: {known})") from None


class Dataset(_Queries):
    """A microtab dataset. Queries return result objects with
    ``to_pandas()`` and ``to_dict()``; they release the GIL while they scan.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        if os.path.isfile(self.path):
            stem = os.path.splitext(os.path.basename(self.path.removesuffix(".gz")))[0]
            raise NotADirectoryError(
                20, f"{self.path} is a file, not a microtab dataset (a directory of one file per variable): "
                f"import it first, e.g. mt.import_file({self.path!r}, {stem + '.mtab'!r}), then open "
                f"{stem + '.mtab'!r}", self.path)
        self._state: _State | None = None
        # A design held by this object only (with_design), not stored.
        self._held: dict | None = None
        self._current()

    def _current(self, force: bool = False) -> "_State":
        """The dataset's current generation: the state read before, or a
        new one when the dataset has changed on disk (a new import, labels,
        a computed variable) or ``force``. One call works from one state
        (its metadata and its native snapshot, read together), so metadata
        and data always come from the same generation."""
        try:
            st = os.stat(os.path.join(self.path, "manifest.json"))
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = None
        state = self._state
        if force or state is None or stamp is None or stamp != state.stamp:
            # One assignment, so that threads see one state or the other.
            state = self._state = _State(_Snapshot(self.path), stamp, self.path)
        return state

    def _read(self, read):
        """``read(state)`` on the current generation; when a writer
        replaces it before ``read`` holds its files, on the new one."""
        for i in range(_TRIES):
            state = self._current(force=i > 0)
            try:
                return read(state)
            except ChangedError:
                if i == _TRIES - 1:
                    raise

    def _refresh(self) -> None:
        self._current()

    # The current generation's manifest and variables.
    @property
    def _m(self) -> dict:
        return self._current().m

    @property
    def _vars(self) -> list["Variable"]:
        return self._current().vars

    @property
    def rows(self) -> int:
        """Number of records."""
        return int(self._current().m["rows"])

    @property
    def variables(self) -> list[str]:
        """The variables' names, in order."""
        return [v.name for v in self._current().vars]

    @property
    def columns(self) -> list[str]:
        """The variables' names, in order (as a pandas frame's columns)."""
        return self.variables

    @property
    def title(self) -> str | None:
        """The dataset's title (a Stata dataset label, an SPSS file label,
        a DDI codebook's study title, or set by :meth:`set_title`);
        ``None`` when it has none."""
        return self._m.get("title")

    @property
    def description(self) -> str | None:
        """The dataset's description (a DDI codebook's abstract or extract
        description, or set by :meth:`set_title`); ``None`` when it has
        none."""
        return self._m.get("description")

    @property
    def shape(self) -> tuple[int, int]:
        """(records, variables), as a pandas frame's ``shape``; one
        generation of the dataset."""
        st = self._current()
        return int(st.m["rows"]), len(st.vars)

    def design(self, weight: str | None = None, *, repweights: str | Sequence[str] | None = None,
               type: str = "sdr", rho: float | None = None, scale: float | None = None,  # noqa: A002
               rscales: Sequence[float] | None = None, mse: bool = True, strata: str | None = None,
               cluster: str | None = None, fpc: str | None = None, lonely_psu: str = "fail",
               clear: bool = False) -> dict | None:
        """The dataset's survey design; with arguments, sets it (stored in
        the dataset, so every later query — from Python or the CLI — gives
        design-based SEs) and returns it.

        - Replicate weights: ``ds.design("PERWT", repweights="REPWTP1-REPWTP80")``
          (``type`` ``"sdr"`` — scale 4/R, ACS/CPS —, ``"brr"``, ``"fay"``
          with ``rho``, ``"jk1"``, ``"jkn"`` with ``rscales``,
          ``"bootstrap"``, ``"other"`` with ``scale``; ``mse=False``
          centres on the replicates' mean, R survey's default).
        - Taylor linearization: ``ds.design("WT", strata="STRATUM",
          cluster="PSU", fpc=None, lonely_psu="fail")``; a weight alone
          makes every record its own PSU.
        - ``ds.design(clear=True)`` removes it.

        :meth:`with_design` takes the same arguments and holds the design
        in a new object instead of writing it.
        """
        given = weight is not None or repweights is not None or strata is not None or \
            cluster is not None or fpc is not None or rho is not None or scale is not None or \
            rscales is not None
        if self._held is not None and (clear or given):
            raise QueryError("this Dataset holds a design of its own (with_design): change the stored one "
                             "on mt.open(path), or call with_design(...) again")
        if clear:
            if given:
                raise QueryError("design(clear=True) takes no other argument")
            _set_design(self.path, "null")
        elif given:
            spec = _design_spec(weight, repweights, type, rho, scale, rscales, mse, strata, cluster, fpc,
                                lonely_psu)
            d = json.loads(_set_design(self.path, json.dumps(spec)))
            t = d.get("taylor") or {}
            if t and not t.get("contiguous", True):
                import warnings
                warnings.warn("the records of a PSU are not stored together; queries keep every PSU's "
                              "totals in memory until the end (sorting the data by PSU makes them faster)",
                              stacklevel=2)
        self._refresh()
        if self._held is not None:
            return self._held
        return self._m.get("design")

    def with_design(self, weight: str | None = None, *, repweights: str | Sequence[str] | None = None,
                    type: str = "sdr", rho: float | None = None, scale: float | None = None,  # noqa: A002
                    rscales: Sequence[float] | None = None, mse: bool = True, strata: str | None = None,
                    cluster: str | None = None, fpc: str | None = None,
                    lonely_psu: str = "fail") -> "Dataset":
        """The dataset under a survey design held by the object only, as R's
        ``svydesign``, samplics and Stata's ``svyset`` set one for the
        analysis at hand: nothing is written, and the stored design (if
        any) is left as it is for every other user of the dataset.

        Parameters
        ----------
        weight : str
            The full-sample weight.
        repweights, type, rho, scale, rscales, mse
            Replicate weights, as for :meth:`design`.
        strata, cluster, fpc, lonely_psu
            A Taylor linearization design, as for :meth:`design`.

        Returns
        -------
        Dataset
            A new object over the same files whose queries (``freq``,
            ``tab``, ``means``, ``regress``, ``ratio``, ``corr``) use this
            design (``design=False`` in a query ignores it, as it ignores a
            stored one); its :meth:`design` returns it. The design is
            checked and built now, as :meth:`design` would store it.

        Examples
        --------
        >>> d = ds.with_design("WT", strata="STRATUM", cluster="PSU")   # doctest: +SKIP
        >>> d.means("INC", by="SEX").to_pandas()[["SEX", "mean", "mean_se"]]   # doctest: +SKIP
        >>> ds.design() is None          # the file is unchanged            # doctest: +SKIP
        True
        """
        import copy
        spec = _design_spec(weight, repweights, type, rho, scale, rscales, mse, strata, cluster, fpc,
                            lonely_psu)
        held = json.loads(_build_design(self.path, json.dumps(spec)))
        view = copy.copy(self)
        view._held = held
        return view

    def info(self) -> dict:
        """The dataset as every front end describes it — the same object
        as ``microtab info --format json`` and ``GET /api/v1/datasets/NAME``:
        ``dataset`` (the path), ``rows``, ``bytes``, ``generation``,
        ``source``, ``design`` and ``design_summary``, ``io_settings``
        (the I/O settings queries from this process read with) and
        ``variables`` (name, label, type, kind, decimals, bytes, packing,
        bits, min, max, nulls, missing_codes as shown, file, description,
        value_labels)."""
        d = dict(self._current().described())
        d.pop("by_name", None)
        return d

    def variable(self, name: str) -> Variable:
        """A variable's metadata (names match case-insensitively)."""
        return self._current().variable(name, self.path)

    def _ask(self, spec: dict) -> dict:
        st = self._current()
        mask = _mask(spec.get("filter"), int(st.m["rows"]), st.m.get("id"))
        if mask is not None:
            spec = {**spec, "filter": None}
        if self._held is not None:
            spec = {**spec, "with_design": self._held}
        spec = json.dumps({k: v for k, v in spec.items() if v is not None})
        return json.loads(_retrying(lambda: _query(self.path, spec, mask)))

    def __len__(self) -> int:
        return self.rows

    def _repr_html_(self) -> str:
        """In Jupyter: the dataset's size, design and variables."""
        st = self._current()
        info = st.described()
        shown = {v.name: v.missing_values for v in st.vars}
        rows = "".join(
            f"<tr><td>{html.escape(v['name'])}</td><td>{html.escape(v['label'] or '')}</td><td>{v['kind']}</td>"
            f"<td>{v['type']}</td><td>{v['decimals'] or ''}</td>"
            f"<td>{html.escape(', '.join(map(str, shown[v['name']])))}</td>"
            f"<td>{len(v['value_labels']) or ''}</td></tr>" for v in info["variables"])
        design = html.escape(info.get("design_summary") or "none")
        return (f"<p><b>{html.escape(self.path)}</b>: {int(info['rows']):,} records, {len(st.vars)} variables; "
                f"survey design: {design}</p><table><thead><tr><th>variable</th><th>label</th><th>kind</th>"
                f"<th>type</th><th>decimals</th><th>missing codes</th><th>value labels</th></tr></thead>"
                f"<tbody>{rows}</tbody></table>")

    def __repr__(self) -> str:
        st = self._current()
        return f"<microtab.Dataset {self.path!r}: {int(st.m['rows']):,} records, {len(st.vars)} variables>"

    # ---------------------------------------------------------------- data
    #
    # Every read of records below is one generation of the dataset: one
    # native call over one snapshot (the manifest read once) opens all its
    # columns, reads their dictionaries and the filter's records before it
    # decodes anything, so a frame is never of two versions of a dataset
    # that `import --force` replaces meanwhile; a generation replaced
    # before the call held its files is read again from the new one (or
    # raises ChangedError).

    def arrow(self, columns: Sequence[str] | None = None, *, filter: Any = None,  # noqa: A002
              labels: bool = False, keep_missing_codes: bool = False,
              exact_decimals: bool = False, dtypes: str = "wide") -> ArrowStream:
        """The variables (default all) of the records that pass ``filter``
        (a filter text, or a boolean mask with one value per record as
        :meth:`to_pandas` takes it, checked again at each pass) as an
        Arrow stream (:class:`ArrowStream`): hand it to pyarrow,
        Polars or DuckDB (``v = ds.arrow(["AGE", "INCTOT"]);
        duckdb.sql("SELECT avg(INCTOT) FROM v")``). ``labels`` writes
        labelled variables as their labels; ``keep_missing_codes`` keeps
        user-missing codes as values (they are nulls by default, so that
        no reader averages a 9999999); ``exact_decimals`` gives implied
        decimals as ``decimal128`` instead of ``float64``. ``dtypes``:
        ``"wide"`` (default) gives integers as ``int64`` and floats as
        ``float64``, as ``polars.read_csv`` and ``pyarrow.csv`` read the
        same CSV, so no arithmetic wraps; ``"stored"`` the compact stored
        types (``uint8``, ``uint16`` …: ``AGE**2`` wraps at 256 there),
        handed over as built. Each pass reads one generation whole."""
        if isinstance(columns, str):
            columns = [columns]
        _wide(dtypes)
        return ArrowStream(self.path, {"columns": None if columns is None else list(columns),
                                       "filter": filter, "labels": labels,
                                       "keep_missing_codes": keep_missing_codes,
                                       "exact_decimals": exact_decimals, "dtypes": dtypes}, self)

    def _export_mask(self, filter: Any) -> bytes | None:  # noqa: A002
        """A boolean mask given to an export as the bitmap the native side
        reads, checked against the dataset as it is now (its length, and a
        :class:`Mask`'s import); ``None`` for a filter text or none."""
        st = self._current()
        return _mask(filter, int(st.m["rows"]), st.m.get("id"))

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        """Every variable as an Arrow C stream (see :meth:`arrow`)."""
        return self.arrow().__arrow_c_stream__(requested_schema)

    def to_arrow(self, columns: Sequence[str] | None = None, **options):
        """The variables as a ``pyarrow.Table`` (options as :meth:`arrow`:
        ``int64``/``float64`` by default, ``dtypes="stored"`` for the
        stored types), of one generation of the dataset."""
        return self.arrow(columns, **options).to_arrow()

    def to_polars(self, columns: Sequence[str] | None = None, **options):
        """The variables as a ``polars.DataFrame`` (options as
        :meth:`arrow`: ``Int64``/``Float64`` by default, as
        ``polars.read_csv`` gives them; ``dtypes="stored"`` for the stored
        types), of one generation of the dataset."""
        return self.arrow(columns, **options).to_polars()

    def to_parquet(self, path: str | os.PathLike, columns: Sequence[str] | None = None, *,
                   filter: Any = None, labels: bool = False,  # noqa: A002
                   keep_missing_codes: bool = False, exact_decimals: bool = False,
                   compression: str = "snappy", force: bool = False) -> dict:
        """Writes the variables (default all) of the records that pass
        ``filter`` (a filter text, or a boolean mask with one value per
        record as :meth:`to_pandas` takes it) as a Parquet file, as ``microtab export`` does (values
        as :meth:`arrow` gives them, in the stored types; labels, missing
        codes, decimals and the design in the file's metadata, so
        :func:`import_parquet` gets them back); written beside ``path`` and
        renamed into place. Returns what was written."""
        if isinstance(columns, str):
            columns = [columns]
        mask = self._export_mask(filter)
        spec = {"columns": None if columns is None else list(columns),
                "filter": filter if isinstance(filter, str) else None,
                "labels": labels, "keep_missing_codes": keep_missing_codes,
                "exact_decimals": exact_decimals, "compression": compression, "force": force}
        spec = json.dumps({k: v for k, v in spec.items() if v is not None})
        return json.loads(_retrying(lambda: _to_parquet(self.path, os.fspath(path), spec, mask)))

    def to_stata(self, path: str | os.PathLike, columns: Sequence[str] | None = None, *,
                 filter: Any = None, labels: bool = True,  # noqa: A002
                 force: bool = False) -> dict:
        """Writes the variables (default all) of the records that pass
        ``filter`` (a filter text, or a boolean mask with one value per
        record as :meth:`to_pandas` takes it) as a Stata file (release 118), as ``microtab export
        DS OUT.dta`` does: integers as ``byte``/``int``/``long`` where they
        fit, decimals and floats as ``double``, text as ``strN``/``strL``;
        user-missing codes as ``.a``, ``.b`` … labelled; variable and value
        labels; names made valid for Stata. ``labels=False`` (``--no-labels``)
        writes the codes without value-label sets (variable labels and
        missing letters stay); unlike :meth:`to_parquet`'s ``labels``, the
        values are codes either way. Written beside ``path`` and renamed
        into place. Returns what was written, its ``notes`` among it
        (renamed variables, labels left out)."""
        if isinstance(columns, str):
            columns = [columns]
        mask = self._export_mask(filter)
        spec = {"columns": None if columns is None else list(columns),
                "filter": filter if isinstance(filter, str) else None, "labels": labels, "force": force}
        spec = json.dumps({k: v for k, v in spec.items() if v is not None})
        return json.loads(_retrying(lambda: _to_stata(self.path, os.fspath(path), spec, mask)))

    def to_spss(self, path: str | os.PathLike, columns: Sequence[str] | None = None, *,
                filter: Any = None, labels: bool = True,  # noqa: A002
                force: bool = False) -> dict:
        """Writes the variables (default all) of the records that pass
        ``filter`` (a filter text, or a boolean mask with one value per
        record as :meth:`to_pandas` takes it) as an SPSS system file (bytecode-compressed, UTF-8), as
        ``microtab export DS OUT.sav`` does: numbers with their decimals,
        text as strings (very long ones too), dates as ``DATE``/``DATETIME``;
        up to three user-missing values (or a range); variable and value
        labels; names made valid for SPSS. ``labels=False`` (``--no-labels``)
        writes no value labels (variable labels and missing values stay).
        Written beside ``path`` and renamed into place. Returns what was
        written, its ``notes`` among it."""
        if isinstance(columns, str):
            columns = [columns]
        mask = self._export_mask(filter)
        spec = {"columns": None if columns is None else list(columns),
                "filter": filter if isinstance(filter, str) else None, "labels": labels, "force": force,
                "format": "sav"}
        spec = json.dumps({k: v for k, v in spec.items() if v is not None})
        return json.loads(_retrying(lambda: _to_stata(self.path, os.fspath(path), spec, mask)))

    def column(self, name: str) -> np.ndarray:
        """The stored values of a variable as a numpy array: a read-only
        memory map of the file for a plain column, the decoded values of a
        bit-packed one. These are stored codes in the stored type:
        implied decimals not applied, missing codes and the null code as
        stored, text as dictionary positions (``to_pandas`` gives values
        as users see them, in types that do not wrap)."""
        def read(st: _State) -> np.ndarray:
            v = st.variable(name, self.path)
            rows = int(st.m["rows"])
            dtype = _DTYPES[v.type]
            e = v._e
            if not e.get("packing") and e.get("bytes", 0) == rows * np.dtype(dtype).itemsize and rows:
                try:
                    return np.memmap(os.path.join(self.path, e["file"]), dtype=dtype, mode="r",
                                     offset=_HEADER, shape=(rows,))
                except FileNotFoundError:
                    # Files carry their generation in their names: gone
                    # means replaced, never another generation's values.
                    raise ChangedError(f"{self.path} was changed by another process while it was "
                                       "read; run the call again") from None
            data, ty = st.snap.column(v.name)
            return np.frombuffer(data, dtype=_DTYPES[ty])
        return self._read(read)

    def select(self, filter: str) -> "Mask":  # noqa: A002
        """The records that pass a filter (``"AGE(25-64) SEX(2)"``, ``"AGE
        >= 25 and SEX = 2"``), as a boolean mask over the records.

        Returns
        -------
        Mask
            A numpy ``bool`` array, one per record: pass it back as
            ``filter=`` (combined with ``&``, ``|``, ``~`` as numpy's masks
            are); refused after the dataset is imported anew.

        Examples
        --------
        >>> m = ds.select("AGE >= 25")                          # doctest: +SKIP
        >>> ds.freq("SEX", filter=m & ds.select("RACE = 1"))    # doctest: +SKIP
        """
        def read(st: _State) -> Mask:
            bits, _ = st.snap.select(filter)
            rows = int(st.m["rows"])
            m = np.unpackbits(np.frombuffer(bits, dtype=np.uint8), bitorder="little")[:rows].astype(bool)
            m = m.view(Mask)
            m.dataset_id = st.m.get("id")
            return m
        return self._read(read)

    def codebook(self):
        """One row per variable (a pandas DataFrame): the variables of
        :meth:`info` — name, label, type, kind, decimals, min, max, nulls,
        missing codes (as shown), value labels, description … — as
        ``microtab info`` and ``microtab codebook`` describe them."""
        pd = _pandas()
        return pd.DataFrame(self.info()["variables"])

    def to_pandas(self, columns: Sequence[str] | None = None, *, filter: Any = None,  # noqa: A002
                  labels: bool = False, dtypes: str = "wide"):
        """The variables (default all) as a pandas DataFrame, values as
        users see them: implied decimals applied, missing codes and empty
        values as NA, text as strings (``string``); with ``labels`` value
        labels as categoricals (codes without a label keep their value as
        text); with ``filter`` only the records that pass it.

        ``dtypes="wide"`` (the default) gives the types ``pandas.read_csv``
        gives the same CSV, in which no arithmetic wraps: ``int64`` for
        integers, ``float64`` for floats and implied decimals — and, for a
        column that has missing values among the frame's records,
        pandas' nullable ``Int64``/``Float64`` with ``<NA>`` (where
        ``read_csv`` would turn integers into floats; these are the types
        of ``read_csv(..., dtype_backend="numpy_nullable")``).
        ``dtypes="stored"`` keeps the compact stored types as nullable
        arrays (``UInt8``, ``UInt16``, ``Int32``, ``Float32`` …: a fifth
        of the memory, handed over without a conversion, but
        ``df.AGE ** 2`` wraps at 256 there).

        The frame is one generation of the dataset: its columns, text
        dictionaries and the filter's records are read from one snapshot
        (a dataset replaced meanwhile by ``import --force`` is read again
        from its new generation, or :class:`ChangedError` is raised), never
        a mix. Values and masks are decoded by Rust on every core and
        handed to pandas without a copy.

        Parameters
        ----------
        columns : str or list of str, optional
            The variables (default all), names matched case-insensitively.
        filter : str or boolean mask, optional
            A filter text (``"AGE >= 25 and SEX = 2"``, the grammar of
            ``docs/CLI.md``'s Filters) or a boolean numpy array / pandas
            Series with one value per record (``ds.select(...)``, or a
            mask computed in pandas); a Series with missing values, or a
            mask of another length, raises ``ValueError``.
        labels : bool, default False
            Value labels as ordered categoricals.
        dtypes : {"wide", "stored"}, default "wide"

        Returns
        -------
        pandas.DataFrame

        Examples
        --------
        >>> ds.to_pandas(["AGE", "SEX"], filter="AGE >= 25")      # doctest: +SKIP
        >>> ds.to_pandas(["AGE"], filter=ds.select("SEX = 2"))    # doctest: +SKIP
        """

        return self._frame(columns, filter, labels, dtypes, None)

    def _frame(self, columns, filter, labels, dtypes, rows_mask):  # noqa: A002
        """:meth:`to_pandas`, of the records ``rows_mask(rows)`` chooses
        (a bitmap's bytes) when given."""
        pd = _pandas()

        wide = _wide(dtypes)
        if isinstance(columns, str):
            columns = [columns]

        def read(st: _State):
            names = [st.variable(n, self.path).name for n in columns] if columns is not None else \
                [v.name for v in st.vars]
            rows = int(st.m["rows"])
            mask = rows_mask(rows) if rows_mask is not None else _mask(filter, rows, st.m.get("id"))
            got, n = st.snap.frame(names, filter if isinstance(filter, str) else None, wide, mask)
            cols = {}
            for name, buf, ty, mbuf, missing, dictionary in got:
                v = st.by_name[name.lower()]
                raw = np.frombuffer(buf, dtype=_DTYPES[ty])
                miss = np.frombuffer(mbuf, dtype=np.bool_)
                if v.kind == "string":
                    d = np.array((dictionary or []) + [""], dtype=object)
                    idx = np.where(miss, len(d) - 1, raw.astype(np.int64))
                    s = pd.Series(d[idx], dtype="string")
                    s[miss] = pd.NA
                elif wide and missing == 0:
                    # read_csv's int64/float64, owned by Rust, no copy.
                    s = pd.Series(raw, copy=False)
                elif raw.dtype.kind == "f":
                    # Values and mask owned by Rust, shared without a copy.
                    s = pd.Series(pd.arrays.FloatingArray(raw, miss), copy=False)
                else:
                    s = pd.Series(pd.arrays.IntegerArray(raw, miss), copy=False)
                if labels and v.value_labels:
                    s = self._labelled(v, s)
                cols[v.name] = s
            return pd.DataFrame(cols, index=pd.RangeIndex(n), copy=False)

        return self._read(read)

    def head(self, n: int = 5, *, labels: bool = False, dtypes: str = "wide"):
        """The first ``n`` records as a ``pandas.DataFrame``, as
        :meth:`to_pandas` gives them (the same types); only the stripes
        holding them are read.

        Parameters
        ----------
        n : int, default 5
            Records (fewer when the dataset has fewer).
        labels, dtypes
            As for :meth:`to_pandas`.

        Returns
        -------
        pandas.DataFrame

        Examples
        --------
        >>> ds.head(3)                    # doctest: +SKIP
        """
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise ArgumentError(f"n={n!r}: expected a whole number of records")
        n = int(n)
        return self._frame(None, None, labels, dtypes, lambda rows: _first(n, rows))

    def __getitem__(self, key):
        """``ds["AGE"]``: the variable as a ``pandas.Series`` named
        ``AGE`` (``int64``/``float64``, or ``Int64``/``Float64`` with
        ``<NA>`` for missing values, as :meth:`to_pandas` gives it);
        ``ds[["AGE", "SEX"]]``: a ``pandas.DataFrame`` of them.

        Examples
        --------
        >>> ds["AGE"].mean()              # doctest: +SKIP
        >>> ds[["AGE", "SEX"]].head()     # doctest: +SKIP
        """
        if isinstance(key, str):
            return self.to_pandas([key])[self.variable(key).name]
        if isinstance(key, (list, tuple)) and all(isinstance(k, str) for k in key):
            return self.to_pandas(list(key))
        raise TypeError(f"ds[{key!r}]: give a variable name or a list of names")

    def __iter__(self):
        """The variables' names, as iterating a pandas frame gives its
        columns."""
        return iter(self.columns)

    def __contains__(self, name: object) -> bool:
        """Whether the dataset has a variable of that name (any case)."""
        return isinstance(name, str) and name.lower() in self._current().by_name

    # ------------------------------------------------------------ changes
    #
    # The dataset-changing commands of the CLI (label, missing, compute,
    # recode, rename, drop, subset), through the same library functions
    # and checks. Each is one atomic change of the dataset (writers wait
    # for each other; readers keep the generation they opened).

    def label(self, var: str, labels: dict | None = None, *, var_label: str | None = None,
              clear: bool = False) -> "Variable":
        """Sets value labels and the variable label of ``var``, as
        ``microtab label`` does (a metadata-only change; the column is
        untouched).

        Parameters
        ----------
        var : str
            The variable.
        labels : dict, optional
            ``{value: label}``, values as displayed (``1``, ``"01"``,
            ``1.5``, a text); a label ``None`` (or ``""``) removes the
            value's label. A value that is not one of the variable's
            (``"x"`` for a number) raises :class:`QueryError`.
        var_label : str, optional
            The variable label (``""`` removes it).
        clear : bool, default False
            Remove every value label first.

        Returns
        -------
        Variable
            The variable as stored now.

        Examples
        --------
        >>> ds.label("SEX", {1: "Male", 2: "Female"}, var_label="Sex")   # doctest: +SKIP
        """
        pairs = [(_typed(k), None if v is None or v == "" else str(v)) for k, v in (labels or {}).items()]
        if not pairs and var_label is None and not clear:
            raise ArgumentError("nothing to do: give labels={value: label}, var_label= or clear=True")
        _set_labels(self.path, var, pairs, var_label, bool(clear))
        return self.variable(var)

    def set_title(self, title: str | None = None, *, description: str | None = None) -> "Dataset":
        """Sets the dataset's title and description, as ``microtab label
        DS --title TEXT --description TEXT`` does (metadata only). ``None``
        leaves one as it is, ``""`` removes it; surrounding blanks are
        dropped. ``microtab info``, the analysis page and exports to Stata
        (dataset label) and SPSS (file label) show the title.

        Returns the dataset (its :attr:`title` and :attr:`description` as
        stored now).

        Examples
        --------
        >>> ds.set_title("CPS 2004", description="March supplement, Minnesota")   # doctest: +SKIP
        """
        if title is None and description is None:
            raise ArgumentError("nothing to do: give a title, description= or both")
        for what, x in (("title", title), ("description", description)):
            if x is not None and not isinstance(x, str):
                raise ArgumentError(f"{what} must be a str, not {type(x).__name__}")
        _set_about(self.path, title, description)
        self._refresh()
        return self

    def missing(self, var: str, codes: Any = None, *, clear: bool = False) -> "Variable":
        """Sets the user-missing codes of ``var``, replacing its current
        ones, as ``microtab missing`` does (metadata only).

        Parameters
        ----------
        var : str
            The variable.
        codes : value or list of values, optional
            The codes as displayed (``9999999``, ``99.5``, a text); each
            must occur in the data.
        clear : bool, default False
            Without ``codes``: remove every missing code.

        Returns
        -------
        Variable
            The variable as stored now (``missing_values`` shows the codes).

        Examples
        --------
        >>> ds.missing("INCTOT", [9999999, 9999998])     # doctest: +SKIP
        >>> ds.missing("INCTOT", clear=True)            # doctest: +SKIP
        """
        if codes is None:
            codes = []
        elif isinstance(codes, (str, int, float, np.integer, np.floating)):
            codes = [codes]
        codes = [_typed(c) for c in codes]
        if not codes and not clear:
            raise ArgumentError("give the missing codes (codes=[9999999]), or clear=True to remove them")
        _set_missing(self.path, var, codes)
        return self.variable(var)

    def compute(self, name: str, expr: str | None = None, *, label: str | None = None,
                value_labels: dict | None = None, replace: bool = False) -> "Variable":
        """A new variable computed from an expression, written as a new
        column (a new generation of the dataset), as ``microtab compute``
        does.

        Parameters
        ----------
        name : str
            The new variable's name, or the whole ``"NAME = EXPRESSION"``.
        expr : str, optional
            The expression (docs/CLI.md lists the operators and
            functions): ``"INCTOT * PERWT"``, ``"AGE >= 18"``.
        label : str, optional
            The variable label.
        value_labels : dict, optional
            ``{value: label}``.
        replace : bool, default False
            Overwrite an existing variable of that name (never one the
            design uses).

        Returns
        -------
        Variable

        Examples
        --------
        >>> ds.compute("ADULT = AGE >= 18", value_labels={0: "No", 1: "Yes"})   # doctest: +SKIP
        >>> ds.compute("INCPW", "INCTOT * PERWT")                              # doctest: +SKIP
        """
        if expr is None:
            spec = name
            at = next((i for i, c in enumerate(spec) if c == "=" and not spec[i + 1:].startswith("=")), None)
            if at is None:
                raise ArgumentError(f"expected NAME = EXPRESSION, e.g. ds.compute(\"INCPW = INCTOT * PERWT\"), "
                                    f"got {spec!r}")
            name, expr = spec[:at].strip(), spec[at + 1:].strip()
        if not expr.strip():
            raise ArgumentError(f"no expression after '{name} ='")
        v = _compute(self.path, name.strip(), expr, label, _pairs(value_labels), bool(replace))
        return self.variable(json.loads(v)["name"])

    def recode(self, name: str, source: str | Sequence[str], rules: str | Sequence[str], *,
               other: Any = None, missing: Any = None, label: str | None = None,
               value_labels: dict | None = None, replace: bool = False) -> "Variable":
        """A new variable from rules over one to six input variables,
        written as a new column, as ``microtab recode`` does.

        Parameters
        ----------
        name : str
            The new variable.
        source : str or list of str
            The input variables.
        rules : str or list of str
            ``[CODE =] CONDITION ["label"]``, separated by ``;`` (or given
            as a list): ``'0-17 "Child"; 18-64 "Adult"; 65-* "Senior"'``,
            ``'1 = AGE(18-34) SEX(1) "Young men"; 9 = *'``.
        other : code or variable name, optional
            What records no rule matches get (default missing).
        missing : code, optional
            The code of records with a missing input (kept as a missing
            code of the new variable; default system-missing).
        label, value_labels, replace
            As for :meth:`compute`.

        Warns
        -----
        RecodeNote
            For rules that take the same values (the first gives its code
            there) and rules after a ``*``.

        Returns
        -------
        Variable

        Examples
        --------
        >>> ds.recode("AGEGRP", "AGE", '0-17 "Child"; 18-64 "Adult"; 65-* "Senior"')   # doctest: +SKIP
        """
        src = [source] if isinstance(source, str) else list(source)
        text = rules if isinstance(rules, str) else "; ".join(rules)
        v = _recode(self.path, name, src, text, None if other is None else _typed(other),
                    None if missing is None else _typed(missing), label, _pairs(value_labels),
                    bool(replace))
        out = json.loads(v)
        import warnings
        for note in out["notes"]:
            warnings.warn(note, RecodeNote, stacklevel=2)
        return self.variable(out["name"])

    def weight(self, name: str, *, totals: Any = None, poststrata: str | Sequence[str] | None = None,
               rake: str | Sequence[str] | None = None, calibrate: str | Sequence[str] | None = None,
               distance: str = "linear", bounds: tuple[float, float] | None = None,
               trim: tuple[float, float] | None = None, source: str | None = None,
               allow_missing_cells: bool = False, tolerance: float = 1e-10,
               max_iterations: int | None = None, replace: bool = False) -> dict:
        """Makes a weight, as ``microtab weight`` does: post-stratifies,
        rakes or calibrates a weight to population totals (and each of its
        replicate weights the same way), or trims it; writes ``name`` (and
        ``name_1 … name_R``) in a new generation of the dataset and sets
        the design to it. docs/WEIGHTING.md has the methods and what is
        refused.

        Parameters
        ----------
        name : str
            The new weight.
        totals : path, DataFrame or list of (variable, value, total)
            The population totals: a CSV file with the columns
            ``variable,value,total``, a DataFrame with those columns, or
            the rows. Crossed variables are ``"A*B"`` with the value
            ``"a*b"``; a numeric variable's value is ``""``; the row
            ``("(Intercept)", "", N)`` gives the population size. An error
            names a row as a CSV file's line (the header is line 1).
        poststrata : str or list of str
            One variable or several crossed: ``"AGEGRP*SEX"`` or
            ``["AGEGRP", "SEX"]``.
        rake : str or list of str
            Margins: ``"AGEGRP; SEX"`` or ``["AGEGRP", "SEX", "A*B"]``.
        calibrate : str or list of str
            A model's terms: ``"AGE + factor(SEX)"`` or ``["AGE", "SEX"]``
            (a variable with totals by value is categorical).
        distance : {"linear", "raking", "logit"}
            Calibration's distance (R's ``calfun``).
        bounds : (float, float), optional
            Bounds on ``g = new / old`` (calibration; logit needs them).
        trim : (float, float), optional
            Trim the new weights to these bounds (alone: trim ``source``).
        source : str, optional
            The weight adjusted (default: the design's weight).
        allow_missing_cells : bool, default False
            Records outside the totals' categories keep their weight;
            categories with a total but no records are left out.
        tolerance, max_iterations
            Convergence: the largest ``|achieved - total| / (1 + |total|)``
            accepted, and the Newton steps (100) or raking cycles (1000)
            allowed. A weight that does not converge is an error.
        replace : bool, default False
            Overwrite existing variables of the new names.

        Returns
        -------
        dict
            The report: ``achieved`` (each target's ``total``, ``before``
            and ``achieved``), ``iterations``, ``worst_misfit``, ``before``
            and ``after`` (``min``, ``max``, ``sum``, ``kish_deff``),
            ``replicates``, ``outside``, ``notes`` …

        Examples
        --------
        >>> ds.weight("RAKED", rake=["AGEGRP", "SEX"], totals="totals.csv")       # doctest: +SKIP
        >>> ds.weight("CAL", calibrate="AGE + SEX", totals=df, distance="logit",
        ...           bounds=(0.5, 2.0))                                         # doctest: +SKIP
        """
        chosen = [(k, v) for k, v in (("poststrata", poststrata), ("rake", rake),
                                      ("calibrate", calibrate)) if v is not None]
        if len(chosen) > 1:
            raise ArgumentError("give one of poststrata=, rake= and calibrate=")
        if not chosen and trim is None:
            raise ArgumentError("say how to weight: poststrata=, rake= or calibrate= with totals=, "
                                "or trim=(low, high)")
        how, spec = chosen[0] if chosen else ("trim", "")
        if not isinstance(spec, str):
            spec = {"poststrata": "*", "rake": "; ", "calibrate": " + "}[how].join(spec)
        rows: list = []
        path = None
        if chosen:
            if totals is None:
                raise ArgumentError("totals= is needed: a CSV file, a DataFrame or rows of "
                                    "(variable, value, total)")
            if isinstance(totals, (str, os.PathLike)):
                path = os.fspath(totals)
            else:
                if hasattr(totals, "to_dict") and hasattr(totals, "columns"):
                    cols = [str(c).lower() for c in totals.columns]
                    if cols[:3] != ["variable", "value", "total"]:
                        raise ArgumentError("a totals DataFrame has the columns variable, value, total")
                    totals = totals.itertuples(index=False, name=None)
                for r in totals:
                    var, val, tot = r[:3]
                    val = "" if val is None or (isinstance(val, float) and math.isnan(val)) else val
                    rows.append((str(var), _typed(val) if val != "" else "", float(tot)))
        b = None if bounds is None else (float(bounds[0]), float(bounds[1]))
        t = None if trim is None else (float(trim[0]), float(trim[1]))
        out = json.loads(_weight(self.path, name, how, spec, rows, path, distance, b, source, t,
                                 bool(allow_missing_cells), float(tolerance), max_iterations,
                                 bool(replace)))
        self._refresh()
        return out

    def replicate(self, type: str, *, replicates: int | None = None, seed: int | None = None,  # noqa: A002
                  prefix: str | None = None, rho: float | None = None, replace: bool = False) -> dict:
        """Builds replicate weights from the stored Taylor design (its
        weight, strata, first-stage PSUs and FPC), as ``microtab
        replicate`` does: writes ``{prefix}1 … {prefix}R`` (default
        ``{WEIGHT}_REP``) in a new generation and sets the replicate design,
        so a public-use file can carry replicate weights instead of strata
        and PSU codes. docs/SURVEY.md describes each type.

        Parameters
        ----------
        type : {"jk1", "jkn", "brr", "fay", "bootstrap", "sdr"}
            The replication method (as R's ``as.svrepdesign``; the bootstrap
            is Rao–Wu's).
        replicates : int, optional
            How many (bootstrap and SDR; default 80).
        seed : int, optional
            The bootstrap's seed (default 1: the same seed, the same
            weights).
        prefix : str, optional
            The names' prefix.
        rho : float, optional
            Fay's coefficient (type ``"fay"``; default 0.5).
        replace : bool, default False
            Overwrite existing variables of those names.

        Returns
        -------
        dict
            ``type``, ``replicates`` (the names), ``scale``, ``rscales``,
            ``psus``, ``strata``, ``seed``, ``notes`` …

        Examples
        --------
        >>> ds.design("PERWT", strata="STRATA", cluster="SERIAL")   # doctest: +SKIP
        >>> ds.replicate("bootstrap", replicates=80)                 # doctest: +SKIP
        """
        out = json.loads(_replicate(self.path, type, replicates, seed, prefix, rho, bool(replace)))
        self._refresh()
        return out

    def rename(self, old: str, new: str) -> "Variable":
        """Renames a variable (its labels, missing codes and the design's
        use of it follow), as ``microtab rename`` does (metadata only).

        Returns
        -------
        Variable
            The variable under its new name.

        Examples
        --------
        >>> ds.rename("INCTOT", "INCOME")     # doctest: +SKIP
        """
        _, new_name = _rename(self.path, old, new)
        return self.variable(new_name)

    def drop(self, *names: str | Sequence[str]) -> list[str]:
        """Removes variables, as ``microtab drop`` does (refused for one the
        survey design uses, or for every variable).

        Returns
        -------
        list of str
            The names removed.

        Examples
        --------
        >>> ds.drop("SERIAL", "PERNUM")       # doctest: +SKIP
        """
        flat = [x for n in names for x in ([n] if isinstance(n, str) else list(n))]
        if not flat:
            raise ArgumentError("drop: give the variables to remove")
        try:
            return _drop(self.path, flat)
        except QueryError as e:
            if "part of the survey design" in str(e):
                raise QueryError(f"{e} (ds.design(clear=True), or set another)") from None
            raise

    def subset(self, out: str | os.PathLike, columns: Sequence[str] | None = None, *,
               filter: Any = None, force: bool = False) -> "Dataset":  # noqa: A002
        """The variables (default all) of the records that pass ``filter``
        as a new dataset at ``out`` (same labels, missing codes and
        decimals; the design carried over where it still holds), as
        ``microtab subset`` does, and opens it.

        Parameters
        ----------
        out : path
            The new dataset's directory.
        columns : list of str, optional
        filter : str or boolean mask, optional
            As for :meth:`to_pandas`.
        force : bool, default False
            Replace an existing ``out``.

        Returns
        -------
        Dataset

        Examples
        --------
        >>> adults = ds.subset("adults.mtab", ["AGE", "SEX"], filter="AGE >= 18")   # doctest: +SKIP
        """
        if isinstance(columns, str):
            columns = [columns]
        st = self._current()
        mask = _mask(filter, int(st.m["rows"]), st.m.get("id"))
        _subset(self.path, os.fspath(out), list(columns or []),
                filter if isinstance(filter, str) else None, mask, bool(force))
        return Dataset(out)

    @staticmethod
    def _labelled(v: Variable, s):
        """A categorical of value labels (a value without one keeps its
        text), categories in code order and every labelled value among
        them, as Stata and ipumspy order them."""
        pd = _pandas()

        if v.kind == "string":
            text = s
            keys = sorted(set(v.value_labels) | set(text.dropna().unique()))
        else:
            vals = s.dropna().unique()
            def shown(x):
                return f"{x:.{v.decimals}f}" if v.decimals and v.kind == "int" else (
                    str(int(x)) if float(x).is_integer() else repr(float(x)))
            text = s.map(lambda x: shown(x) if x is not pd.NA else pd.NA).astype("string")
            def num(k):
                try:
                    return float(k)
                except ValueError:
                    return float("inf")
            keys = sorted(set(v.value_labels) | {shown(x) for x in vals}, key=num)
        cats = list(dict.fromkeys(v.value_labels.get(k, k) for k in keys))
        out = text.map(lambda x: v.value_labels.get(x, x) if x is not pd.NA else None)
        return pd.Series(pd.Categorical(out, categories=cats, ordered=True), index=s.index)

    @staticmethod
    def _null_code(v: Variable) -> int | None:
        return v._e.get("null_code")


def open_many(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> "Datasets":
    """Several datasets with the same variables (one per year or state,
    parts of one file), answered as one: a pattern (``"years/*.mtab"``),
    a catalog of parts (:func:`split`, ``microtab split``) or a list of
    paths. Each query computes an exact partial result per dataset and
    merges them, so the answer — survey SEs included — is the one a
    single dataset of all their records would give."""
    import glob
    if isinstance(paths, (str, os.PathLike)):
        text = os.fspath(paths)
        catalog = _catalog_parts(text)
        if catalog is not None:
            found = catalog
        elif any(c in text for c in "*?["):
            found = sorted(p for p in glob.glob(text) if os.path.isdir(p))
        else:
            found = [text]
    else:
        found = [os.fspath(p) for p in paths]
    if not found:
        raise FileNotFoundError(f"no dataset matches {paths!r}")
    seen = {}
    for p in found:
        real = os.path.realpath(p)
        if real in seen:
            raise QueryError(f"{p} and {seen[real]} are the same dataset; its rows would be counted twice")
        seen[real] = p
    datasets = [Dataset(p) for p in found]
    # A copied or hard-linked directory has another path but the same
    # dataset id (docs/FORMAT.md): the same records twice.
    ids = {}
    for d in datasets:
        i = d._m.get("id")
        if i is not None and i in ids:
            raise QueryError(f"{d.path} and {ids[i]} are the same dataset (id {i}: a copy of one "
                             "directory); its rows would be counted twice")
        ids.setdefault(i, d.path)
    return Datasets(datasets)


def split(path: str | os.PathLike, out: str | os.PathLike, parts: int, force: bool = False,
          design: bool = True) -> dict:
    """Cuts the dataset at ``path`` into ``parts`` datasets of consecutive
    records under the catalog directory ``out`` (as ``microtab split``):
    :func:`open_many` and ``microtab.dask.parts`` take ``out`` for all of
    them. A replicate design goes to every part; a Taylor design is set
    on each part's own records when its strata are runs of records (the
    cuts move to the next change of stratum); otherwise the split is
    refused, unless ``design=False`` writes the parts without it (their
    queries are then unweighted unless they name a weight). Written beside
    ``out`` and renamed into place; an existing ``out`` is replaced only
    with ``force=True``. Returns the catalog (its parts, their first record
    and size)."""
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
        raise ValueError(f"parts must be a whole number of at least 1, not {parts!r}")
    return json.loads(_split(os.fspath(path), os.fspath(out), parts, bool(force), not design))


class Datasets(_Queries):
    """Datasets answered as one (:func:`open_many`): ``freq``, ``tab``,
    ``means`` as on a :class:`Dataset`; ``datasets`` lists them. A boolean
    mask as ``filter=`` has one value per record of all of them, in their
    order (:meth:`select` gives one); :meth:`with_design` holds a design
    for their queries."""

    def __init__(self, datasets: list[Dataset]):
        self.datasets = datasets
        # A design held by this object only (with_design): each dataset's,
        # built on it.
        self._held: list[dict] | None = None

    @property
    def rows(self) -> int:
        """Records in all of them."""
        return sum(d.rows for d in self.datasets)

    def design(self) -> dict | None:
        """The design their queries use: the one held (:meth:`with_design`,
        as built on the first dataset), else the first dataset's stored
        one."""
        if self._held is not None:
            return self._held[0]
        return self.datasets[0].design()

    def with_design(self, weight: str | None = None, *, repweights: str | Sequence[str] | None = None,
                    type: str = "sdr", rho: float | None = None, scale: float | None = None,  # noqa: A002
                    rscales: Sequence[float] | None = None, mse: bool = True, strata: str | None = None,
                    cluster: str | None = None, fpc: str | None = None,
                    lonely_psu: str = "fail") -> "Datasets":
        """The datasets under a survey design held by the object only (the
        arguments of :meth:`Dataset.design`), as :meth:`Dataset.with_design`
        holds one: checked and built on each dataset now (as ``design``
        would store it on each), sent with each dataset's request, never
        written. Returns a new :class:`Datasets` whose queries use it
        (``design=False`` ignores it)."""
        import copy
        spec = json.dumps(_design_spec(weight, repweights, type, rho, scale, rscales, mse, strata,
                                       cluster, fpc, lonely_psu))
        held = [json.loads(_build_design(d.path, spec)) for d in self.datasets]
        view = copy.copy(self)
        view._held = held
        return view

    def select(self, filter: str) -> "Mask":  # noqa: A002
        """The records that pass a filter, as a boolean mask over all the
        datasets' records in their order (each dataset's
        :meth:`Dataset.select`, one after another). It remembers each
        dataset's import: passed back as ``filter=`` after any of them was
        imported anew, it is refused."""
        parts = [d.select(filter) for d in self.datasets]
        m = np.concatenate([np.asarray(p) for p in parts]).view(Mask)
        m.dataset_id = None
        m.dataset_ids = tuple(p.dataset_id for p in parts)
        return m

    def _masks(self, filter: Any) -> list[np.ndarray]:  # noqa: A002
        """A boolean mask over all the datasets' records, checked, cut into
        each dataset's share."""
        states = [d._current() for d in self.datasets]
        ids = tuple(st.m.get("id") for st in states)
        made = getattr(filter, "dataset_ids", None)
        # A one-dataset mask (Dataset.select) names one import.
        one = getattr(filter, "dataset_id", None)
        if made is None and one is not None:
            made = (one,)
        if made is not None and tuple(made) != ids:
            raise ArgumentError(
                "filter: the mask was computed by select() on other imports of these datasets (one "
                "was imported anew since, so its records may be others); compute the mask again")
        rows = [int(st.m["rows"]) for st in states]
        whole = _mask_values(filter, sum(rows), None, whose="the datasets have")
        edges = np.cumsum([0, *rows])
        return [whole[a:b] for a, b in zip(edges, edges[1:])]

    def _ask(self, spec: dict) -> dict:
        filt = spec.get("filter")
        masks = None if filt is None or isinstance(filt, str) else self._masks(filt)
        if len(self.datasets) == 1:
            if masks is not None:
                spec = {**spec, "filter": masks[0]}
            if self._held is not None:
                spec = {**spec, "with_design": self._held[0]}
            return self.datasets[0]._ask(spec)
        if masks is not None:
            spec = {**spec, "filter": None}
            masks = [np.packbits(m, bitorder="little").tobytes() for m in masks]
        designs = None if self._held is None else json.dumps(self._held)
        spec = json.dumps({k: v for k, v in spec.items() if v is not None})
        paths = [d.path for d in self.datasets]
        return json.loads(_retrying(lambda: _query_many(paths, spec, masks, designs)))

    def __repr__(self) -> str:
        return f"<microtab.Datasets: {len(self.datasets)} datasets, {self.rows:,} records>"


# -------------------------------------------------------------------- results


class _Result:
    def __init__(self, d: dict):
        self._d = d

    def to_dict(self) -> dict:
        """The answer as the CLI's JSON (`--format json`) gives it."""
        return self._d

    def to_arrow(self):
        """The tidy frame of :meth:`to_pandas` as a ``pyarrow.Table``."""
        import pyarrow as pa
        return pa.Table.from_pandas(self.to_pandas(), preserve_index=False)

    def to_polars(self):
        """The tidy frame of :meth:`to_pandas` as a ``polars.DataFrame``."""
        import polars as pl
        return pl.DataFrame(self.to_arrow())

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        """The tidy frame as an Arrow C stream (DuckDB, Polars, pyarrow)."""
        return self.to_arrow().__arrow_c_stream__(requested_schema)

    def _repr_html_(self) -> str:
        try:
            return self.to_pandas()._repr_html_()
        except ImportError:
            return "<pre>" + html.escape(json.dumps(self._d, indent=1)) + "</pre>"


def _member(key: str, doc: str) -> property:
    """A result's property that is the member ``key`` of its JSON."""
    return property(lambda self: self._d[key], doc=doc)


def _se_cols(prefix: str, u: dict | None) -> dict:
    if not u:
        return {}
    return {f"{prefix}_{k}": u.get(k) for k in ("se", "lo", "hi", "cv", "deff", "deft", "unreliable")}


def _fmt_sig(x: float, sig: int) -> str:
    """``x`` as ``microtab`` prints numbers (``fmt_sig``): ``sig``
    significant digits (never fewer than the whole integer part),
    thousands separators, no trailing zeros after the point."""
    import math
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    if not -9 <= mag < 15:
        return f"{x:.{max(sig - 1, 0)}e}"
    s = f"{x:,.{max(sig - 1 - mag, 0)}f}"
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return s


def _exp(x: float) -> str:
    """``x`` in scientific notation with 4 decimals, as Rust's ``{:.4e}``
    writes it (``2.6582e-1``)."""
    m, e = f"{x:.4e}".split("e")
    return f"{m}e{int(e)}"


def _se_text(u: dict, f) -> str:
    """A standard error as the CLI shows it: ``*`` when unreliable, ``†``
    when replicates were left out."""
    return f"{f(u['se'])}{'*' if u.get('unreliable') else ''}{'†' if u.get('replicates_dropped') else ''}"


def _category(c: dict) -> str:
    """A category as the CLI's tables show it: its value and label
    (``1 Male``), ``(missing)`` for the empty value."""
    v = c.get("value")
    if v is None:
        return "(missing)"
    shown = str(v)
    label = c.get("label")
    return f"{shown} {label}" if label is not None and label != shown else shown


def _text_table(head: list[str], rows: list[list[str]], left: int = 1) -> str:
    """An aligned text table as the CLI's (the first ``left`` columns
    left, the others right, a rule under the header)."""
    n = len(head)
    w = [max(len(r[i]) if i < len(r) else 0 for r in [head, *rows]) for i in range(n)]

    def line(r):
        cells = []
        for i in range(n):
            c = r[i] if i < len(r) else ""
            cells.append(c.ljust(w[i]) if i < left else c.rjust(w[i]))
        return "  ".join(cells).rstrip() + "\n"
    return line(head) + "-" * (sum(w) + 2 * (n - 1)) + "\n" + "".join(line(r) for r in rows)


def _caption(title: str, d: dict) -> str:
    """A table's title line as the CLI writes it: the variable's label,
    the weight and the filter."""
    s = title
    if d.get("label"):
        s += f" — {d['label']}"
    if d.get("weight"):
        s += f"  (weighted by {d['weight']})"
    if d.get("filter"):
        s += f"  [filter: {d['filter']}]"
    return s + "\n"


def _heading(title: str, d: dict) -> str:
    """A model's, ratio's or correlation's title as the CLI writes it:
    the filter and weight on their own lines, then a blank line."""
    s = title + "\n"
    if d.get("filter"):
        s += f"filter: {d['filter']}\n"
    if d.get("weight"):
        s += f"weight: {d['weight']}\n"
    return s + "\n"


def _num(x: float | None) -> str:
    """A number as the CLI's models print one (6 significant digits)."""
    import math
    if x is None:
        return "–"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    if math.isnan(x):
        return "NaN"
    return _fmt_sig(x, 6)


def _pval(p: float | None) -> str:
    """A p-value as R prints small ones."""
    import math
    if p is None or math.isnan(p):
        return "NaN" if p is not None else "–"
    return "<2e-16" if p < 2e-16 else _fmt_sig(p, 3)


def _ci_text(u: dict | None, digits: int) -> str:
    """An interval as the CLI shows it, ``[lo, hi]`` with ``digits``
    decimals (``-`` without one)."""
    if not u or u.get("lo") is None or u.get("hi") is None:
        return "-"
    return f"[{u['lo']:.{digits}f}, {u['hi']:.{digits}f}]"


def _se_or_dash(u: dict | None, f) -> str:
    return "-" if u is None else _se_text(u, f)


def _html_table(title: str, head: list[str], rows: list[list[str]], notes: str = "") -> str:
    """A printed table as HTML for Jupyter: its title, its cells, its notes."""
    esc = html.escape
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    hd = "".join(f"<th>{esc(h)}</th>" for h in head)
    out = (f"<p><b>{esc(title.strip())}</b></p><table><thead><tr>{hd}</tr></thead>"
           f"<tbody>{body}</tbody></table>")
    return out + "".join(f"<p>{esc(x)}</p>" for x in notes.splitlines() if x.strip())


class Frequencies(_Result):
    """A frequency table: ``rows`` (value, label, missing, count, weighted,
    percent and, under a design, their SEs), ``total``."""

    rows = _member("rows", "The categories, in value order (a list of dicts).")
    total = _member("total", "All rows counted: ``count`` and ``weighted``.")

    def to_pandas(self):
        """One row per category as a ``pandas.DataFrame``: ``value``,
        ``label``, ``missing``, ``count``, ``weighted``, ``percent`` and,
        under a design, ``weighted_se``, ``weighted_lo``, ``weighted_hi``,
        ``weighted_cv``, ``weighted_deff``, ``weighted_deft``,
        ``weighted_unreliable`` and the same of ``percent``.

        Returns
        -------
        pandas.DataFrame

        Examples
        --------
        >>> ds.freq("RACE").to_pandas()[["value", "label", "count"]]   # doctest: +SKIP
        """
        pd = _pandas()
        recs = []
        for r in self._d["rows"]:
            rec = {k: r.get(k) for k in ("value", "label", "missing", "count", "weighted", "percent")}
            rec.update(_se_cols("weighted", r.get("weighted_se")))
            rec.update(_se_cols("percent", r.get("percent_se")))
            recs.append(rec)
        return pd.DataFrame(recs, columns=None if recs else
                            ["value", "label", "missing", "count", "weighted", "percent"])

    def _layout(self) -> tuple[list[str], list[list[str]]]:
        """The table as ``microtab freq`` prints it: header and rows."""
        d = self._d
        weighted = d["total"].get("weighted") is not None
        se = d.get("design") is not None
        level = 100 * (d.get("design") or {}).get("level", 0.95)
        head = [d["variable"], "count"]
        if weighted:
            head += ["weighted", *(["SE"] if se else [])]
        head.append("percent")
        if se:
            head += ["SE", f"{_fmt_sig(level, 4)}% CI"]
        rows = []
        for r in d["rows"]:
            line = [_category(r), f"{r['count']:,}"]
            if r.get("weighted") is not None:
                line.append(_fmt_sig(r["weighted"], 7))
                if se:
                    line.append(_se_or_dash(r.get("weighted_se"), lambda v: _fmt_sig(v, 4)))
            line.append("-" if r.get("percent") is None else f"{r['percent']:.1f}")
            if se:
                line.append(_se_or_dash(r.get("percent_se"), lambda v: f"{v:.2f}"))
                line.append(_ci_text(r.get("percent_se"), 1))
            rows.append(line)
        t = ["Total", f"{d['total']['count']:,}"]
        if weighted:
            t.append(_fmt_sig(d["total"]["weighted"], 7))
            if se:
                t.append("")
        t.append("100.0" if any(r.get("percent") is not None for r in d["rows"]) else "-")
        if se:
            t += ["", ""]
        rows.append(t)
        return head, rows

    def __str__(self) -> str:
        """The table ``microtab freq`` prints (its notes aside)."""
        head, rows = self._layout()
        return _caption(self._d["variable"], self._d) + _text_table(head, rows)

    def __repr__(self) -> str:
        return self.__str__()

    def _repr_html_(self) -> str:
        head, rows = self._layout()
        return _html_table(_caption(self._d["variable"], self._d), head, rows)


class Crosstab(_Result):
    """Crosstabs: ``tables`` (one per control category), each with row and
    column categories, ``counts``, ``weighted``, ``pct`` (nested lists, as
    ``counts[i][j]``), totals and ``stats``.

    ``print(t)`` shows the tables as ``microtab tab`` prints them (rows ×
    columns, standard errors in parentheses under their estimates); in
    Jupyter each cell shows its estimates with their SEs, such as
    ``32.3% (1.52)``. :meth:`to_pandas` gives one row per cell, or with
    ``wide=True`` rows × columns."""

    tables = _member("tables", "The tables, one per control category (a list of dicts).")

    def counts(self, table: int = 0) -> np.ndarray:
        """The counts of one table as a rows × columns array.

        Parameters
        ----------
        table : int
            Which table (one per control category), 0 the first.

        Returns
        -------
        numpy.ndarray
            ``int64``, rows × columns.
        """
        return np.asarray(self.tables[table]["counts"], dtype=np.int64)

    def weighted(self, table: int = 0) -> np.ndarray | None:
        """The weighted counts of one table as a rows × columns ``float64``
        array (``None`` unweighted)."""
        w = self.tables[table].get("weighted")
        return None if w is None else np.asarray(w, dtype=np.float64)

    def _percentages(self, t: dict) -> list:
        """A table's percentages as (name, {pct, pct_se}): ``pct`` for one
        base, ``pct_col``, ``pct_row``, ``pct_total`` (in the order asked)
        for several."""
        several = t.get("percentages")
        if several:
            return [(f"pct_{base}", several[base]) for base in self._d.get("pcts", several)]
        if t.get("pct") is not None:
            return [("pct", {"pct": t["pct"], "pct_se": t.get("pct_se")})]
        return []

    def _cells(self):
        """Each cell's record: control, row and column (values and labels),
        then its statistics in the long frame's names."""
        for t in self._d["tables"]:
            ctl = t.get("control") or {}
            for i, r in enumerate(t["rows"]):
                for j, c in enumerate(t["cols"]):
                    rec = {"control": ctl.get("value"), "control_label": ctl.get("label"),
                           "row": r["value"], "row_label": r.get("label"),
                           "col": c["value"], "col_label": c.get("label"),
                           "count": t["counts"][i][j]}
                    if t.get("weighted") is not None:
                        rec["weighted"] = t["weighted"][i][j]
                    pcts = self._percentages(t)
                    for name, p in pcts:
                        rec[name] = p["pct"][i][j]
                    se = t.get("weighted_se")
                    if se is not None:
                        rec.update(_se_cols("weighted", se[i][j]))
                    for name, p in pcts:
                        if p.get("pct_se") is not None:
                            rec.update(_se_cols(name, p["pct_se"][i][j]))
                    if t.get("z") is not None:
                        rec["z"] = t["z"][i][j]
                    yield rec

    def to_pandas(self, wide: bool = False, labels: bool = True):
        """The tables as a ``pandas.DataFrame``.

        Parameters
        ----------
        wide : bool, default False
            ``False``: one row per cell — ``control``, ``control_label``
            (with a control variable), ``row``, ``row_label``, ``col``,
            ``col_label``, ``count``, ``weighted``, ``pct``, under a design
            ``weighted_se``, ``weighted_lo``, ``weighted_hi``,
            ``weighted_cv``, ``weighted_deff``, ``weighted_deft``,
            ``weighted_unreliable`` and the same of ``pct``, and ``z``
            when asked for. With several percentages (``pct="col,row"``)
            each has its columns: ``pct_col``, ``pct_row``, ``pct_total``
            and ``pct_col_se`` … instead of ``pct``. ``True``: rows × columns, as
            ``pandas.crosstab`` lays a table out — the index the row
            categories (the control category outermost), the columns a
            MultiIndex of (statistic, column category) with every
            statistic of the long frame that is present.
        labels : bool, default True
            ``wide=True`` only: categories shown by their labels (as the
            long frame's ``row_label``), their value where they have none;
            ``False``: by their values.

        Returns
        -------
        pandas.DataFrame

        Examples
        --------
        >>> t = ds.tab("SEX", "RACE", weight="PERWT", pct="row")   # doctest: +SKIP
        >>> t.to_pandas(wide=True)["pct"]                         # doctest: +SKIP
        RACE    White  Black  Other
        SEX
        Male     32.3   35.1   32.6
        Female   33.4   31.8   34.8
        """
        pd = _pandas()
        recs = list(self._cells())
        ids = ["control", "control_label", "row", "row_label", "col", "col_label"]
        df = pd.DataFrame(recs, columns=None if recs else [*ids, "count"])
        has_control = self._d.get("control_var") is not None
        if not wide:
            if not has_control:
                df = df.drop(columns=["control", "control_label"])
            return df
        stats = [c for c in df.columns if c not in ids]

        def shown(kind):
            if not labels:
                return df[kind]
            lab = df[f"{kind}_label"]
            out = lab.where(lab.notna(), df[kind])
            # Codes sharing a shown name (several codes labelled "NIU")
            # would merge their cells: those names get their code first,
            # as the printed table shows them ("1 NIU").
            text = out.astype(str)
            pairs = pd.DataFrame({"code": df[kind].astype(str), "text": text}).drop_duplicates()
            shared = set(pairs["text"][pairs["text"].duplicated(keep=False)])
            if shared:
                clash = text.isin(shared)
                out = out.where(~clash, df[kind].astype(str) + " " + text)
            return out

        rv, cv = self._d.get("row_var"), self._d.get("col_var")
        keys = {"__row": shown("row"), "__col": shown("col")}
        index = ["__row"]
        if has_control:
            keys["__control"] = shown("control")
            index = ["__control", "__row"]
        long = df.assign(**keys)
        # Categories in the table's order, not sorted.
        order = {k: list(dict.fromkeys(long[k])) for k in keys}
        out = long.pivot(index=index, columns="__col", values=stats)
        out = out.reindex(columns=pd.MultiIndex.from_product([stats, order["__col"]]))
        if has_control:
            out = out.reindex(pd.MultiIndex.from_tuples(
                list(dict.fromkeys(zip(long["__control"], long["__row"])))))
            out.index.names = [self._d["control_var"], rv]
        else:
            out = out.reindex(order["__row"])
            out.index.name = rv
        out.columns.names = [None, cv]
        for c in stats:
            # The cells' types as in the long frame (pivot makes objects
            # of mixed columns); a cell a control category's table lacks
            # is <NA> in a nullable column.
            kind = df[c].dtype.kind
            if kind in "iub" and out[c].isna().any().any():
                out[c] = out[c].astype("Int64" if kind in "iu" else "boolean")
            elif df[c].dtype != object:
                out[c] = out[c].astype(df[c].dtype)
        return out

    def totals(self):
        """The margins of every table as a ``pandas.DataFrame``: one row
        per row category (``margin`` ``"row"``), column category
        (``"col"``) and table (``"total"``): ``control``, ``margin``,
        ``value``, ``label``, ``count``, ``weighted``.

        Returns
        -------
        pandas.DataFrame
        """
        pd = _pandas()
        recs = []
        for t in self.tables:
            ctl = (t.get("control") or {}).get("value")
            for margin, cats, key in (("row", t["rows"], "row_totals"), ("col", t["cols"], "col_totals")):
                m = t[key]
                for i, c in enumerate(cats):
                    w = m.get("weighted")
                    recs.append({"control": ctl, "margin": margin, "value": c["value"],
                                 "label": c.get("label"), "count": m["counts"][i],
                                 "weighted": None if w is None else w[i]})
            recs.append({"control": ctl, "margin": "total", "value": None, "label": None,
                         "count": t["total"]["count"], "weighted": t["total"].get("weighted")})
        df = pd.DataFrame(recs, columns=["control", "margin", "value", "label", "count", "weighted"])
        if self._d.get("control_var") is None:
            df = df.drop(columns=["control"])
        return df

    def _layout(self, t: dict) -> tuple[list[str], list[list[str]], str]:
        """One table as ``microtab tab`` prints it: header, rows (SEs,
        percentages and z on the lines under each row's estimates, as the
        CLI sets them) and the note on the cells."""
        weighted = t.get("weighted") is not None
        m = t["weighted"] if weighted else t["counts"]
        fmt = (lambda v: _fmt_sig(v, 6)) if weighted else (lambda v: f"{int(v):,}")
        head = [f"{self._d['row_var']} \\ {self._d['col_var']}", *(_category(c) for c in t["cols"]), "Total"]

        def se_line(s, i, f):
            return ["", *("" if u is None else f"({_se_text(u, f)})" for u in s[i])]

        rows = []
        for i, r in enumerate(t["rows"]):
            rows.append([_category(r), *(fmt(v) for v in m[i]), fmt(sum(m[i]))])
            if t.get("weighted_se") is not None:
                rows.append(se_line(t["weighted_se"], i, lambda v: _fmt_sig(v, 4)))
            for _, p in self._percentages(t):
                rows.append(["", *("" if v is None else f"{v:.1f}%" for v in p["pct"][i])])
                if p.get("pct_se") is not None:
                    rows.append(se_line(p["pct_se"], i, lambda v: f"{v:.2f}"))
            if t.get("z") is not None:
                rows.append(["", *("" if v is None else f"z={v:.2f}" for v in t["z"][i])])
        ct = t["col_totals"]
        cs = ct["weighted"] if ct.get("weighted") is not None else ct["counts"]
        rows.append(["Total", *(fmt(v) for v in cs), fmt(sum(cs))])
        note = ""
        if weighted:
            se = ", standard errors in parentheses" if t.get("weighted_se") is not None else ""
            note = f"(cells: weighted counts{se}; unweighted N = {t['total']['count']:,})\n"
        if len(self._d.get("pcts") or []) > 1:
            note += f"(percentages under each cell: {', '.join(self._d['pcts'])}, in that order)\n"
        return head, rows, note

    def _stats_lines(self, t: dict) -> list[str]:
        asked = getattr(self, "_asked_stats", False) or t.get("stats") or t.get("rao_scott")
        return self._stats_text(t).splitlines() if asked else []

    def _stats_text(self, t: dict) -> str:
        """A table's test as ``microtab tab --stats`` prints it."""
        design = self._d.get("design") is not None
        if design:
            r = t.get("rao_scott")
            if r is None:
                return ("Rao–Scott test: not defined (fewer than two rows or columns, a degenerate design "
                        "covariance, or, under a Taylor design, tables of more than 2,048 planned cells)\n")
            dropped = r.get("replicates_dropped") or 0
            extra = (f"; {dropped} replicates without weight in the table left out, as R does"
                     if dropped > 0 else "")
            return (f"Rao–Scott F = {_fmt_sig(r['f'], 6)}, df = {_fmt_sig(r['ndf'], 4)}, "
                    f"{_fmt_sig(r['ddf'], 4)}, p = {_exp(r['p'])} (design-based, second order; first-order "
                    f"p = {_exp(r['p_first_order'])}; Pearson X² = {_fmt_sig(r['chi2'], 6)} on the table "
                    f"scaled to N = {int(r['n']):,}){extra}\n")
        st = t.get("stats")
        if st is None:
            return "Chi-square: not defined (fewer than two rows or columns)\n"
        out = (f"Chi-square = {_fmt_sig(st['chi2'], 6)}, df = {st['df']}, p = {_exp(st['p'])}, "
               f"Cramer's V = {_fmt_sig(st['cramers_v'], 4)}\n")
        a = t.get("association")
        if a:
            f = lambda x: "-" if x is None else f"{x:.4f}"  # noqa: E731
            out += (f"Likelihood-ratio chi-square = {_fmt_sig(a['lr_chi2'], 6)}, p = {_exp(a['lr_p'])}\n"
                    f"Gamma = {f(a['gamma'])}, Kendall's tau-b = {f(a['tau_b'])}, tau-c = {f(a['tau_c'])}, "
                    f"Somers' d (col|row) = {f(a['somers_d_col'])}, (row|col) = {f(a['somers_d_row'])}\n"
                    f"Lambda (col|row) = {f(a['lambda_col'])}, (row|col) = {f(a['lambda_row'])}, "
                    f"symmetric = {f(a['lambda'])}; Pearson's r = {f(a['pearson_r'])}, Spearman's rho = "
                    f"{f(a['spearman_rho'])}, eta (col|row) = {f(a['eta_col'])}, (row|col) = {f(a['eta_row'])}\n")
        return out

    def _title(self, t: dict) -> str:
        title = f"{self._d['row_var']} by {self._d['col_var']}"
        if self._d.get("control_var") is not None and t.get("control") is not None:
            title += f", {self._d['control_var']} = {_category(t['control'])}"
        if self._d.get("weight"):
            title += f"  (weighted by {self._d['weight']})"
        if self._d.get("filter"):
            title += f"  [filter: {self._d['filter']}]"
        return title

    def __str__(self) -> str:
        out = []
        for t in self.tables:
            head, rows, note = self._layout(t)
            asked = getattr(self, "_asked_stats", False) or t.get("stats") or t.get("rao_scott")
            stats = self._stats_text(t) if asked else ""
            out.append(self._title(t) + "\n" + _text_table(head, rows) + note + stats)
        return "\n".join(out)

    def __repr__(self) -> str:
        return self.__str__()

    def _repr_html_(self) -> str:
        """In Jupyter: each table rows × columns, a cell's estimates with
        their standard errors in parentheses (``49,124 (2,298)``, ``32.3%
        (1.52)``)."""
        parts = []
        for t in self.tables:
            weighted = t.get("weighted") is not None
            m = t["weighted"] if weighted else t["counts"]
            fmt = (lambda v: _fmt_sig(v, 6)) if weighted else (lambda v: f"{int(v):,}")
            esc = html.escape
            head = "".join(f"<th>{esc(_category(c))}</th>" for c in t["cols"])
            body = []
            for i, r in enumerate(t["rows"]):
                cells = []
                for j in range(len(t["cols"])):
                    lines = [fmt(m[i][j])]
                    se = t.get("weighted_se")
                    if se is not None and se[i][j] is not None:
                        lines[0] += f" ({_se_text(se[i][j], lambda v: _fmt_sig(v, 4))})"
                    several = len(self._d.get("pcts") or []) > 1
                    for name, ps in self._percentages(t):
                        if ps["pct"][i][j] is None:
                            continue
                        p = f"{ps['pct'][i][j]:.1f}%"
                        pse = ps.get("pct_se")
                        if pse is not None and pse[i][j] is not None:
                            p += f" ({_se_text(pse[i][j], lambda v: f'{v:.2f}')})"
                        lines.append(p + (f" {name[4:]}" if several else ""))
                    if t.get("z") is not None and t["z"][i][j] is not None:
                        lines.append(f"z={t['z'][i][j]:.2f}")
                    cells.append("<td>" + "<br>".join(esc(x) for x in lines) + "</td>")
                body.append(f"<tr><th>{esc(_category(r))}</th>{''.join(cells)}<td>{fmt(sum(m[i]))}</td></tr>")
            ct = t["col_totals"]
            cs = ct["weighted"] if ct.get("weighted") is not None else ct["counts"]
            body.append("<tr><th>Total</th>" + "".join(f"<td>{fmt(v)}</td>" for v in cs)
                        + f"<td>{fmt(sum(cs))}</td></tr>")
            corner = esc(f"{self._d['row_var']} \\ {self._d['col_var']}")
            _, _, note = self._layout(t)
            parts.append(f"<p><b>{esc(self._title(t))}</b></p><table><thead><tr><th>{corner}</th>{head}"
                         f"<th>Total</th></tr></thead><tbody>{''.join(body)}</tbody></table>"
                         + (f"<p>{esc(note.strip())}</p>" if note else "")
                         + "".join(f"<p>{esc(x)}</p>" for x in self._stats_lines(t)))
        return "".join(parts)

    def tests(self):
        """The tables' tests (``stats=True``) as a ``pandas.DataFrame``,
        one row per table (``control``, ``control_label`` with a control
        variable): ``test`` (``"pearson"``, ``"rao-scott"`` under a design,
        ``None`` where not defined: fewer than two rows or columns),
        ``statistic`` (Pearson's X², or Rao–Scott's F), ``df`` (its
        numerator df), ``ddf`` (Rao–Scott's denominator df), ``p``; then
        Pearson's ``cramers_v`` and the association measures (``lr_chi2``,
        ``lr_p``, ``gamma``, ``tau_b``, ``tau_c``, ``somers_d_col``,
        ``somers_d_row``, ``lambda_col``, ``lambda_row``, ``lambda``,
        ``pearson_r``, ``spearman_rho``, ``eta_col``, ``eta_row``), or
        Rao–Scott's ``p_first_order``, ``chi2`` (Pearson's X² on the table
        scaled to ``n``), ``n`` and ``replicates_dropped``. The same
        fields as dicts: ``to_dict()["tables"][k]["stats"]``,
        ``["association"]`` and ``["rao_scott"]``.

        Returns
        -------
        pandas.DataFrame

        Examples
        --------
        >>> ds.tab("SEX", "RACE", control="REGION", stats=True).tests()   # doctest: +SKIP
        """
        pd = _pandas()
        if not getattr(self, "_asked_stats", True):
            raise QueryError("no tests: ask for them with tab(..., stats=True)")
        has_control = self._d.get("control_var") is not None
        recs = []
        for t in self.tables:
            rec = {}
            if has_control:
                c = t.get("control") or {}
                rec.update({"control": c.get("value"), "control_label": c.get("label")})
            r, st = t.get("rao_scott"), t.get("stats")
            if r is not None:
                rec.update({"test": "rao-scott", "statistic": r["f"], "df": r["ndf"], "ddf": r["ddf"],
                            "p": r["p"], "p_first_order": r.get("p_first_order"), "chi2": r.get("chi2"),
                            "n": r.get("n"), "replicates_dropped": r.get("replicates_dropped")})
            elif st is not None:
                rec.update({"test": "pearson", "statistic": st["chi2"], "df": st["df"], "ddf": None,
                            "p": st["p"], "cramers_v": st.get("cramers_v")})
                rec.update(t.get("association") or {})
            else:
                rec.update({"test": None, "statistic": None, "df": None, "ddf": None, "p": None})
            recs.append(rec)
        ids = ["control", "control_label"] if has_control else []
        cols = [*ids, "test", "statistic", "df", "ddf", "p"]
        df = pd.DataFrame(recs)
        rest = [c for c in df.columns if c not in cols]
        return df.reindex(columns=cols + rest)

    @property
    def comparisons(self) -> list | None:
        """With ``diff=``: per row category (``row``, ``label``), the base
        column, the row's share in it (``base_estimate``), each other
        column's difference (``differences``: ``group``, ``estimate``,
        ``se``, ``t``, ``p``, ``lo``, ``hi``), the df and the Wald test."""
        return self._d.get("comparisons")

    def differences(self):
        """With ``diff=``: a ``pandas.DataFrame``, one row per row category
        and column: the row's share in the column minus its share in the
        base column (``row``, ``col``, ``estimate``, ``se``, ``t``, ``p``,
        ``lo``, ``hi``)."""
        pd = _pandas()
        cs = self.comparisons
        if cs is None:
            raise QueryError("no comparison: ask for one with tab(..., diff=BASE)")
        recs = [{"row": c["row"], "col": d["group"], **{k: d[k] for k in ("estimate", "se", "t", "p", "lo", "hi")}}
                for c in cs for d in c["differences"]]
        return pd.DataFrame(recs, columns=["row", "col", "estimate", "se", "t", "p", "lo", "hi"])



class Means(_Result):
    """Means by group: ``groups`` (mean, sd, n, sum_weights, by, and SEs,
    medians and percentiles when asked for), ``total``."""

    groups = _member("groups", "The groups that have records, in category order (a list of dicts).")
    total = _member("total", "Over all groups: ``mean``, ``sd``, ``n``, ``sum_weights``.")

    def to_pandas(self, total: bool = False):
        """One row per group as a ``pandas.DataFrame``: each grouping
        variable's value and label (``SEX``, ``SEX_label``), ``mean``,
        ``sd``, ``n``, ``sum_weights``; under a design the mean's
        ``mean_se``, ``mean_lo``, ``mean_hi``, ``mean_cv``, ``mean_deff``,
        ``mean_deft``, ``mean_unreliable``; each quantile asked for as
        ``p50`` (the median), ``p10`` …, with its Woodruff interval and SE
        under a design (``p50_se``, ``p50_lo``, ``p50_hi``, ``p50_cv``,
        ``p50_unreliable`` …).

        Parameters
        ----------
        total : bool, default False
            Also a last row for all groups together (``"Total"`` in the
            first grouping column): ``to_dict()``'s ``total``,
            ``total_se`` and ``total_quantiles`` (without ``by`` the one
            row is the total already).

        Returns
        -------
        pandas.DataFrame

        Examples
        --------
        >>> m = ds.means("INCTOT", by="SEX", weight="PERWT", median=True)  # doctest: +SKIP
        >>> m.to_pandas(total=True)[["SEX", "mean", "p50", "p50_se"]]      # doctest: +SKIP
        """
        pd = _pandas()
        by = self._d.get("by", [])

        def record(g, quantiles, se):
            rec = {}
            if g is None:
                for i, name in enumerate(by):
                    rec[name] = "Total" if i == 0 else None
                    rec[f"{name}_label"] = None
                g = self._d["total"]
            else:
                for name, b in zip(by, g["by"]):
                    rec[name] = b["value"]
                    rec[f"{name}_label"] = b.get("label")
            for k in ("mean", "sd", "n", "sum_weights"):
                rec[k] = g.get(k)
            rec.update(_se_cols("mean", se))
            for q in quantiles or []:
                name = f"p{q['p'] * 100:g}"
                rec[name] = q.get("value")
                rec.update(_se_cols(name, q.get("se")))
            return rec

        recs = [record(g, g.get("quantiles"), g.get("mean_se")) for g in self._d["groups"]]
        if total and by:
            # (Without groups the one row is the total.)
            recs.append(record(None, self._d.get("total_quantiles"), self._d.get("total_se")))
        return pd.DataFrame(recs, columns=None if recs else
                            [*by, *(f"{b}_label" for b in by), "mean", "sd", "n", "sum_weights"])

    @property
    def comparison(self) -> dict | None:
        """With ``diff=``: the base, its estimate, each group's difference
        (``estimate``, ``se``, ``t``, ``p``, ``lo``, ``hi``), the df and the
        Wald test that every group equals the base."""
        return self._d.get("comparison")

    def differences(self):
        """With ``diff=``: a ``pandas.DataFrame`` of each group's mean
        minus the base's (``group``, ``estimate``, ``se``, ``t``, ``p``,
        ``lo``, ``hi``)."""
        pd = _pandas()
        c = self.comparison
        if c is None:
            raise QueryError("no comparison: ask for one with means(..., diff=BASE)")
        return pd.DataFrame(c["differences"], columns=["group", "estimate", "se", "t", "p", "lo", "hi"])

    @property
    def test(self) -> dict | None:
        """With ``test_mean=``: the value, each group's test and the
        total's (``mean``, ``df``, and the mean less the value as
        ``estimate`` with ``se``, ``t``, ``p``, ``lo``, ``hi``), ``method``."""
        return self._d.get("test")

    def tests(self):
        """With ``test_mean=``: a ``pandas.DataFrame``, one row per group
        and one for the total (``Total`` in the first grouping column):
        ``mean``, ``estimate`` (the mean less the value), ``se``, ``t``,
        ``df``, ``p``, ``lo``, ``hi``."""
        pd = _pandas()
        t = self.test
        if t is None:
            raise QueryError("no test: ask for one with means(..., test_mean=VALUE)")
        by = self._d.get("by", [])
        cols = ["mean", "estimate", "se", "t", "df", "p", "lo", "hi"]
        recs = []
        # Without groups, the one test is the total's.
        for g in [*(t["groups"] if by else []), t["total"]]:
            rec = {name: (b["value"] if g["by"] else None) for name, b in
                   zip(by, g["by"] or [{}] * len(by))}
            if not g["by"] and by:
                rec[by[0]] = "Total"
            rec.update({k: g.get(k) for k in cols})
            recs.append(rec)
        return pd.DataFrame(recs, columns=[*by, *cols])

    def _layout(self) -> tuple[list[str], list[list[str]]]:
        """The table as ``microtab means`` prints it: header and rows (the
        groups, then the total; without groups the total alone)."""
        import math
        d = self._d
        by = d.get("by", [])
        design = d.get("design")
        level = None if design is None else _fmt_sig(100 * design.get("level", 0.95), 4)
        ps = [q["p"] for q in d.get("total_quantiles") or []]
        head = [*by, "mean"]
        if level is not None:
            head += ["SE", f"{level}% CI"]
        for p in ps:
            head.append("median" if p == 0.5 else f"p{_fmt_sig(100 * p, 6)}")
            if level is not None:
                head += ["SE", f"{level}% CI"]
        head += ["sd", "N", "sum of weights"]

        def digits(u, floor=False):
            if not u:
                return 0
            x = abs(u["se"])
            if x != x:      # NaN, as Rust's casts and max read it
                return 6 if floor else 3
            x = max(x, 1e-300) if floor else x
            if x == 0:
                return 0
            return min(max(3 - math.floor(math.log10(x)), 0), 6)

        def row(first, st, u, qs):
            r = list(first)
            r.append("-" if st.get("mean") is None else _fmt_sig(st["mean"], 6))
            if level is not None:
                r.append(_se_or_dash(u, lambda v: _fmt_sig(v, 4)))
                r.append(_ci_text(u, digits(u)))
            for q in qs or []:
                r.append("-" if q.get("value") is None else _fmt_sig(q["value"], 6))
                if level is not None:
                    r.append(_se_or_dash(q.get("se"), lambda v: _fmt_sig(v, 4)))
                    r.append(_ci_text(q.get("se"), digits(q.get("se"), True)))
            r.append("-" if st.get("sd") is None else _fmt_sig(st["sd"], 6))
            r.append(f"{st['n']:,}")
            r.append(_fmt_sig(st["sum_weights"], 7))
            return r

        rows = [row([_category(b) for b in g["by"]], g, g.get("mean_se"), g.get("quantiles"))
                for g in (d["groups"] if by else [])]
        first = ["Total", *[""] * (len(by) - 1)] if by else []
        rows.append(row(first, d["total"], d.get("total_se"), d.get("total_quantiles")))
        return head, rows

    def __str__(self) -> str:
        """The table ``microtab means`` prints (its notes aside)."""
        head, rows = self._layout()
        return (_caption(f"Mean of {self._d['variable']}", self._d)
                + _text_table(head, rows, left=len(self._d.get("by", []))))

    def __repr__(self) -> str:
        return self.__str__()

    def _repr_html_(self) -> str:
        head, rows = self._layout()
        return _html_table(_caption(f"Mean of {self._d['variable']}", self._d), head, rows)


class Ratio(_Result):
    """Ratios of totals (:meth:`Dataset.ratio`): ``groups`` and ``total``
    (each with ``by``, ``n``, ``numerator_total``, ``denominator_total``,
    and the ratio as ``estimate`` with ``se``, ``t``, ``p``, ``lo``,
    ``hi``), ``df``, ``method``."""

    groups = _member("groups", "The groups that have records (a list of dicts; none without by).")
    total = _member("total", "All groups together (a dict).")
    df = _member("df", "Degrees of freedom of the intervals.")
    method = _member("method", "How the standard errors were computed.")

    def to_pandas(self):
        """One row per group, then the total (``Total`` in the first
        grouping column): n, the totals, ratio, se, t, p, lo, hi, cv, the
        unreliable flag (fewer than 30 records, or a CV above 30%) and the
        replicates left out of the variance.

        Returns
        -------
        pandas.DataFrame
        """
        pd = _pandas()
        by = self._d.get("by", [])
        cols = ["n", "numerator_total", "denominator_total", "ratio", "se", "t", "p", "lo", "hi", "cv",
                "unreliable", "replicates_dropped"]
        recs = []
        for g in [*self.groups, self.total]:
            rec = {name: b["value"] for name, b in zip(by, g["by"])}
            if not g["by"] and by:
                rec[by[0]] = "Total"
            rec.update({"n": g["n"], "numerator_total": g["numerator_total"],
                        "denominator_total": g["denominator_total"], "ratio": g.get("estimate"),
                        "se": g.get("se"), "t": g.get("t"), "p": g.get("p"), "lo": g.get("lo"),
                        "hi": g.get("hi"), "cv": g.get("cv"), "unreliable": g.get("unreliable"),
                        "replicates_dropped": g.get("replicates_dropped")})
            recs.append(rec)
        return pd.DataFrame(recs, columns=[*by, *cols])

    def _layout(self) -> tuple[str, list[str], list[list[str]], str]:
        """As ``microtab ratio`` prints it: title, header, rows, notes."""
        import math
        d = self._d
        by = d.get("by", [])
        level = _fmt_sig(d.get("level", 0.95) * 100, 4)
        head = [" × ".join(by) if by else "", "n", f"{d['numerator']} total",
                f"{d['denominator']} total", "ratio", "se", f"{level}% CI low", "high"]
        rows = []
        for g in [*d["groups"], d["total"]]:
            name = " × ".join(_category(c) for c in g["by"]) if g["by"] else "Total"
            vals = [g["n"], g["numerator_total"], g["denominator_total"], g.get("estimate"),
                    g.get("se"), g.get("lo"), g.get("hi")]
            v = [name, *("–" if x is None or not math.isfinite(x) else _num(float(x)) for x in vals)]
            if g.get("unreliable"):
                v[4] += "*"
            rows.append(v)
        notes = f"df of the intervals: {_num(d['df'])}   standard errors: {d['method']}\n"
        if any(g.get("unreliable") for g in [*d["groups"], d["total"]]):
            notes += ("* unreliable: fewer records than --min-n, or a coefficient of variation "
                      "above --max-cv\n")
        notes += "".join(f"note: {n}\n" for n in d.get("notes") or [])
        title = _heading(f"Ratio of the totals of {d['numerator']} to {d['denominator']}", d)
        return title, head, rows, notes

    def __str__(self) -> str:
        """The table ``microtab ratio`` prints."""
        title, head, rows, notes = self._layout()
        return title + _text_table(head, rows) + notes

    def __repr__(self) -> str:
        return self.__str__()

    def _repr_html_(self) -> str:
        title, head, rows, notes = self._layout()
        return _html_table(title, head, rows, notes)


class Correlations(_Result):
    """A correlation matrix (:meth:`Dataset.corr`): ``matrix`` and
    ``covariance`` (DataFrames indexed by variable), ``pairs`` (each pair's
    ``a``, ``b``, ``estimate``, ``se``, ``t``, ``p``, ``lo``, ``hi``),
    ``n``, ``weighted_n``, ``means``, ``sds``, ``df``, ``method``."""

    variables = _member("variables", "The variables, in the order given.")
    n = _member("n", "Records with a value of every variable.")
    weighted_n = _member("weighted_n", "Their weight.")
    df = _member("df", "Degrees of freedom of the t tests.")
    method = _member("method", "How the standard errors were computed.")
    pairs = _member("pairs", "Each pair once (a list of dicts).")

    @property
    def matrix(self):
        """The correlations as a ``pandas.DataFrame`` indexed by variable."""
        pd = _pandas()
        v = self.variables
        return pd.DataFrame(self._d["matrix"], index=v, columns=v)

    @property
    def covariance(self):
        """The covariances (R ``svyvar``) indexed by variable."""
        pd = _pandas()
        v = self.variables
        return pd.DataFrame(self._d["covariance"], index=v, columns=v)

    @property
    def moments(self):
        """Each variable's weighted ``mean`` and ``sd`` over the records
        used (``to_dict()``'s ``means`` and ``sds``), indexed by variable."""
        pd = _pandas()
        return pd.DataFrame({"mean": self._d["means"], "sd": self._d["sds"]}, index=self.variables)

    def to_pandas(self):
        """One row per pair: a, b, r, se, t, p, lo, hi."""
        pd = _pandas()
        recs = [{"a": p["a"], "b": p["b"], "r": p.get("estimate"),
                 **{k: p.get(k) for k in ("se", "t", "p", "lo", "hi")}} for p in self.pairs]
        return pd.DataFrame(recs, columns=["a", "b", "r", "se", "t", "p", "lo", "hi"])

    def _tables(self) -> tuple[str, list, str]:
        """As ``microtab corr`` prints it: the title, the three tables
        (matrix, pairs, moments) as (header, rows), the line between."""
        import math
        d = self._d
        v = d["variables"]
        mat = ([""] + v, [[a, *("–" if not math.isfinite(x) else f"{x:.4f}" for x in d["matrix"][i])]
                          for i, a in enumerate(v)])
        level = _fmt_sig(d.get("level", 0.95) * 100, 4)
        ph = ["pair", "estimate", "se", "t", "p", f"{level}% CI low", "high"]
        prs = []
        for p in d["pairs"]:
            name = f"{p['a']} × {p['b']}"
            if p.get("estimate") is None:
                prs.append([name, *["–"] * 6])
                continue
            dash = lambda x, f: "–" if x is None or math.isnan(x) else f(x)  # noqa: E731
            prs.append([name, _num(p["estimate"]), _num(p["se"]), dash(p.get("t"), _num),
                        dash(p.get("p"), _pval), _num(p["lo"]), _num(p["hi"])])
        line = (f"records: {d['n']}   weighted N: {_num(d['weighted_n'])}   df of the t tests: "
                f"{_num(d['df'])}   standard errors: {d['method']}\n")
        mom = (["variable", "mean", "sd"], [[a, _num(d["means"][i]), _num(d["sds"][i])]
                                           for i, a in enumerate(v)])
        title = _heading(f"Correlations of {', '.join(v)}", d)
        return title, [mat, (ph, prs), mom], line

    def __str__(self) -> str:
        """The tables ``microtab corr`` prints."""
        title, (mat, prs, mom), line = self._tables()
        notes = "".join(f"note: {n}\n" for n in self._d.get("notes") or [])
        return (title + _text_table(*mat) + "\n" + _text_table(*prs) + line + "\n"
                + _text_table(*mom) + notes)

    def __repr__(self) -> str:
        return self.__str__()

    def _repr_html_(self) -> str:
        title, (mat, prs, mom), line = self._tables()
        return (_html_table(title, *mat) + _html_table("", *prs, line)
                + _html_table("", *mom, "\n".join(self._d.get("notes") or [])))


class Regression(_Result):
    """A fitted model (:meth:`Dataset.regress`): ``coefficients`` (a
    ``pandas.DataFrame`` indexed by term, R's names), ``summary()``, the
    model's ``n``, ``weighted_n``, ``df``, ``design_df``, ``r_squared``,
    ``deviance``, ``null_deviance``, ``pseudo_r_squared``, ``wald``,
    ``method``, ``notes``, and ``covariance`` (a DataFrame)."""

    # The model's members, each a property of the same name.
    _MEMBERS = {
        "formula": "The formula as given.",
        "family": "gaussian, logit, probit or poisson.",
        "n": "Records used (a value of every model variable, in the filter).",
        "weighted_n": "Their weight.",
        "df": "Degrees of freedom of the t tests (None: normal).",
        "design_df": "The design's degrees of freedom (None without one).",
        "r_squared": "R² (gaussian).",
        "deviance": "Deviance with the weights as given (None for poisson).",
        "null_deviance": "Deviance of the intercept-only model.",
        "pseudo_r_squared": "1 − deviance / null deviance.",
        "wald": "Wald test of all terms but the intercept: f, ndf, ddf, p.",
        "method": "How the standard errors were computed.",
        "fitted_on": "cells (the predictors' combinations) or records (too many combinations).",
        "notes": "Remarks on the method.",
    }

    @property
    def coefficients(self):
        """Estimates, SEs, t, p and intervals, indexed by term."""
        return self.to_pandas().set_index("term")

    @property
    def covariance(self):
        """The covariance matrix of the estimates, indexed by term."""
        pd = _pandas()
        terms = [c["term"] for c in self._d["coefficients"]]
        return pd.DataFrame(self._d["covariance"], index=terms, columns=terms)

    def to_pandas(self):
        """One row per coefficient: term, estimate, se, t, p, lo, hi."""
        pd = _pandas()
        return pd.DataFrame(self._d["coefficients"],
                            columns=["term", "estimate", "se", "t", "p", "lo", "hi"])

    def summary(self) -> str:
        """The coefficients and the model's fit as text (as ``microtab
        regress`` prints them)."""
        d = self._d
        stat = "t" if d.get("df") is not None else "z"
        level = f"{d['level'] * 100:g}%"
        rows = [("term", "estimate", "se", stat, "p", f"{level} CI low", "high")]
        for c in d["coefficients"]:
            rows.append((c["term"], *(f"{c[k]:.6g}" for k in ("estimate", "se", "t")),
                         "<2e-16" if c["p"] < 2e-16 else f"{c['p']:.3g}", f"{c['lo']:.6g}", f"{c['hi']:.6g}"))
        w = [max(len(r[i]) for r in rows) for i in range(7)]
        lines = [f"{d['family']} model: {d['formula']}"]
        for r in rows:
            lines.append("  ".join([r[0].ljust(w[0]), *(r[i].rjust(w[i]) for i in range(1, 7))]))
        lines.append(f"records: {d['n']}   weighted N: {d['weighted_n']:.6g}   standard errors: {d['method']}")
        if d.get("df") is not None:
            lines.append(f"df of the t tests: {d['df']:g}")
        if d.get("r_squared") is not None:
            lines.append(f"R²: {d['r_squared']:.6g}")
        elif d.get("pseudo_r_squared") is not None:
            lines.append(f"deviance: {d['deviance']:.6g}   null deviance: {d['null_deviance']:.6g}   "
                         f"pseudo-R²: {d['pseudo_r_squared']:.6g}")
        if d.get("wald"):
            wd = d["wald"]
            ddf = "∞" if wd.get("ddf") is None else f"{wd['ddf']:g}"
            lines.append(f"Wald test of all terms: F = {wd['f']:.6g} on {wd['ndf']:g} and {ddf} df, "
                         f"p = {wd['p']:.3g}")
        lines.extend(f"note: {n}" for n in d.get("notes") or [])
        return "\n".join(lines)

    def __str__(self) -> str:
        """The model as :meth:`summary` gives it."""
        return self.summary()

    def __repr__(self) -> str:
        return self.__str__()


for _k, _doc in Regression._MEMBERS.items():
    setattr(Regression, _k, _member(_k, _doc))
del _k, _doc
