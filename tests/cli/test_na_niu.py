"""Missing values as other tools read them (issue 27, items 6, 7 and 9).

* ``NA`` in text columns: pandas (``read_csv``), DuckDB (``read_csv`` with
  ``nullstr``) and R (``read.csv``, when Rscript is installed) read the same
  CSV, shaped like openintro's ``acs12``; weighted and unweighted
  percentages of the text column and the count of missing values must
  agree, and ``--na-text ''`` must give back the tokens as values (pandas
  with ``keep_default_na=False``, DuckDB with only empty fields null).
* IPUMS "not in universe" codes: ipumspy reads ``cps_00006``; pandas over
  its frame with INCTOT's 99999999/99999998 excluded is the oracle for the
  mean income by year, and ``--keep-niu`` gives pandas' mean over every
  value.
* An ATUS-shaped hierarchical extract (record types 1-5 listed eldercare
  first, person records of type 2): the default import gives the person
  records, as ipumspy's ``read_hierarchical_microdata`` splits them.
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
import warnings
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from conftest import REPO, approx, assert_one_error, disp, run, run_json, write

# --------------------------------------------------------------------------
# item 6: NA in text columns
# --------------------------------------------------------------------------

EMPLOYMENT = ["employed", "not in labor force", "unemployed"]


def acs12_like(path: Path, n=2000, seed=12):
    """A CSV shaped like openintro's acs12: numeric columns with NA, a text
    column ``employment`` with NA for a fifth of the records, a weight."""
    rng = np.random.default_rng(seed)
    emp = rng.choice(EMPLOYMENT + ["NA"], size=n, p=[0.42, 0.25, 0.13, 0.20])
    income = np.where(rng.random(n) < 0.15, "NA", rng.integers(0, 200_000, n).astype(str))
    gender = rng.choice(["male", "female"], size=n)
    wt = np.round(rng.uniform(0.5, 3.0, n), 3)
    lines = ["income,employment,gender,wt"]
    lines += [f"{i},{e},{g},{w}" for i, e, g, w in zip(income, emp, gender, wt)]
    # A quoted NA is missing too (pandas and R do not look at the quotes).
    lines[5] = lines[5].replace(",NA,", ',"NA",') if ",NA," in lines[5] else lines[5]
    write(path, "\n".join(lines) + "\n")
    return path


def freq_rows(ds, var, *args):
    res = run_json("freq", ds, var, "--include-missing", *args)
    return res, {disp(r): r for r in res["rows"]}


def check_against(res, rows, oracle: pd.DataFrame, weighted: bool):
    """``oracle``: columns value, n, w (valid categories only)."""
    total_n = oracle.n.sum()
    total_w = oracle.w.sum()
    valid = {k: r for k, r in rows.items() if not r.get("missing") and k is not None}
    assert set(valid) == set(oracle.value), (set(valid), set(oracle.value))
    for _, o in oracle.iterrows():
        r = valid[o.value]
        assert r["count"] == o.n
        if weighted:
            assert r["weighted"] == approx(o.w)
            assert r["percent"] == approx(100 * o.w / total_w)
        else:
            assert r["percent"] == approx(100 * o.n / total_n)


def test_na_in_text_columns_as_pandas_duckdb_and_r(tmp_path):
    csv = acs12_like(tmp_path / "acs12.csv")
    ds = tmp_path / "acs.mtab"
    p = run("import", csv, ds)
    assert "column employment is text" in p.stderr and "read as missing" in p.stderr

    # pandas: NA is missing in every column by default.
    df = pd.read_csv(csv)
    assert df.employment.isna().sum() > 300
    pd_tab = (
        df.dropna(subset=["employment"])
        .groupby("employment")
        .agg(n=("wt", "size"), w=("wt", "sum"))
        .reset_index()
        .rename(columns={"employment": "value"})
    )
    # DuckDB: NA and empty fields as NULL.
    con = duckdb.connect()
    dk = con.execute(
        "SELECT employment AS value, count(*) AS n, sum(wt) AS w FROM read_csv(?, nullstr=['NA', ''], header=true) "
        "WHERE employment IS NOT NULL GROUP BY 1 ORDER BY 1",
        [str(csv)],
    ).df()
    dk_missing = con.execute(
        "SELECT count(*) FROM read_csv(?, nullstr=['NA', ''], header=true) WHERE employment IS NULL", [str(csv)]
    ).fetchone()[0]
    assert sorted(dk.value) == sorted(pd_tab.value) == sorted(EMPLOYMENT)
    assert dk_missing == df.employment.isna().sum()

    for weighted, args in ((False, ()), (True, ("--weight", "wt"))):
        res, rows = freq_rows(ds, "employment", *args)
        check_against(res, rows, pd_tab, weighted)
        check_against(res, rows, dk, weighted)
        missing = sum(r["count"] for r in res["rows"] if r.get("missing") or disp(r) is None)
        assert missing == dk_missing
        assert "NA" not in rows
    info = {v["name"]: v for v in run_json("info", ds)["variables"]}
    assert info["employment"]["nulls"] == dk_missing
    assert info["income"]["kind"] == "int" and info["income"]["nulls"] == df.income.isna().sum()

    # "employed" among those with an answer, as pandas and R give it.
    share = pd_tab.set_index("value").n
    res, rows = freq_rows(ds, "employment")
    assert rows["employed"]["percent"] == approx(100 * share["employed"] / share.sum())

    if shutil.which("Rscript"):
        r = subprocess.run(
            ["Rscript", "-e",
             f"d <- read.csv('{csv}'); t <- table(d$employment); cat(sum(is.na(d$employment)), names(t), t, sep='\\n')"],
            capture_output=True, text=True, timeout=120,
        )
        assert r.returncode == 0, r.stderr
        out = r.stdout.splitlines()
        assert int(out[0]) == dk_missing
        k = (len(out) - 1) // 2
        assert dict(zip(out[1 : 1 + k], map(int, out[1 + k :]))) == {v: int(share[v]) for v in EMPLOYMENT}


def test_na_text_option_keeps_tokens_as_values(tmp_path):
    """--na-text '' is the earlier default: the token is a category (pandas
    with keep_default_na=False, DuckDB with only empty fields null), while
    numeric columns still read NA as missing."""
    csv = acs12_like(tmp_path / "acs12.csv", seed=3)
    ds = tmp_path / "old.mtab"
    p = run("import", csv, ds, "--na-text", "")
    assert "read as missing" not in p.stderr
    df = pd.read_csv(csv, keep_default_na=False, na_values={"income": ["NA"]})
    assert (df.employment == "NA").sum() > 300
    pd_tab = df.groupby("employment").agg(n=("wt", "size"), w=("wt", "sum")).reset_index().rename(columns={"employment": "value"})
    dk = duckdb.connect().execute(
        "SELECT employment AS value, count(*) AS n, sum(wt) AS w FROM read_csv(?, nullstr='', header=true, "
        "types={'income': 'VARCHAR'}) GROUP BY 1",
        [str(csv)],
    ).df()
    for weighted, args in ((False, ()), (True, ("--weight", "wt"))):
        res, rows = freq_rows(ds, "employment", *args)
        check_against(res, rows, pd_tab, weighted)
        check_against(res, rows, dk, weighted)
    info = {v["name"]: v for v in run_json("info", ds)["variables"]}
    assert info["employment"]["nulls"] == 0
    assert info["income"]["kind"] == "int" and info["income"]["nulls"] == int(df.income.isna().sum())


@pytest.mark.parametrize("token", ["NA", "N/A", "NaN", "NULL", "#N/A", "<NA>", "nan", "null", "n/a"])
def test_default_text_tokens_are_pandas_defaults(tmp_path, token):
    """Every default text token is one pandas reads as missing; "." and
    "None" are not (pandas reads "None" as missing: microtab keeps it, an
    answer in many questionnaires; "." is missing in numeric columns only)."""
    text = f"S,X\na,1\n{token},2\n.,3\nNone,4\n"
    csv = write(tmp_path / "t.csv", text)
    ds = tmp_path / "t.mtab"
    run("import", csv, ds)
    df = pd.read_csv(csv)
    assert pd.isna(df.S[1])
    _, rows = freq_rows(ds, "S")
    got = {k: r["count"] for k, r in rows.items() if not r.get("missing") and k is not None}
    assert got == {"a": 1, ".": 1, "None": 1}


def test_explicit_na_list_applies_to_text_columns(tmp_path):
    """--na NA: R's read.csv default (na.strings = "NA"), in every column."""
    text = "S,A\nNA,1\nN/A,NA\nx,2\n.,3\n"
    csv = write(tmp_path / "r.csv", text)
    ds = tmp_path / "r.mtab"
    run("import", csv, ds, "--na", "NA")
    _, rows = freq_rows(ds, "S")
    got = {k: r["count"] for k, r in rows.items() if not r.get("missing") and k is not None}
    df = pd.read_csv(csv, keep_default_na=False, na_values=["NA"])
    assert got == df.S.dropna().value_counts().to_dict() == {"N/A": 1, "x": 1, ".": 1}


# --------------------------------------------------------------------------
# item 7: IPUMS not-in-universe codes
# --------------------------------------------------------------------------

IPUMS = (REPO.parent / "shared" / "data" / "ipums").resolve()


def need_extract(name):
    if not (IPUMS / f"{name}.xml").exists():
        pytest.skip(f"{name} not in {IPUMS}")
    readers = pytest.importorskip("ipumspy.readers")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ddi = readers.read_ipums_ddi(IPUMS / f"{name}.xml")
        df = readers.read_microdata(ddi, IPUMS / f"{name}.dat.gz")
    return ddi, df


def means_by(ds, var, by, *args):
    res = run_json("means", ds, var, "--by", by, *args)
    return {g["by"][0]["value"]: g for g in res["groups"]}


def test_niu_codes_from_codebook_text(tmp_path):
    _, df = need_extract("cps_00006")
    ds = tmp_path / "cps.mtab"
    p = run("import", IPUMS / "cps_00006.dat.gz", ds, "--ddi", IPUMS / "cps_00006.xml")
    notes = [l for l in p.stderr.splitlines() if "variable INCTOT" in l]
    assert len(notes) == 1, p.stderr
    note = notes[0]
    for needle in ("99999999", "N.I.U. (Not in Universe)", "99999998", "Missing", "--keep-niu"):
        assert needle in note, note
    niu = [99999999, 99999998]
    valid = df[~df.INCTOT.isin(niu)]
    assert len(valid) < len(df)
    got = means_by(ds, "INCTOT", "YEAR")
    exp = valid.groupby("YEAR").INCTOT.agg(["mean", "size"])
    assert sorted(got) == sorted(exp.index)
    for y, g in got.items():
        assert g["n"] == exp.loc[y, "size"]
        assert g["mean"] == approx(exp.loc[y, "mean"])
        assert g["mean"] < 1e6  # not the 24.5 million of the NIU codes
    # Weighted, as the existing IPUMS tests weight it.
    got = means_by(ds, "INCTOT", "YEAR", "--weight", "WTSUPP", "--allow-negative-weights")
    for y, g in got.items():
        sub = valid[valid.YEAR == y]
        assert g["mean"] == approx(np.average(sub.INCTOT, weights=sub.WTSUPP))
    # The codes are missing codes: freq --include-missing counts them.
    res = run_json("freq", ds, "INCTOT", "--include-missing")
    miss = {r["value"]: r["count"] for r in res["rows"] if r["missing"]}
    assert miss == {c: int((df.INCTOT == c).sum()) for c in niu if (df.INCTOT == c).any()}

    # --keep-niu: every value counts, as pandas over ipumspy's frame.
    keep = tmp_path / "keep.mtab"
    p = run("import", IPUMS / "cps_00006.dat.gz", keep, "--ddi", IPUMS / "cps_00006.xml", "--keep-niu")
    assert "variable INCTOT" not in p.stderr
    got = means_by(keep, "INCTOT", "YEAR")
    exp = df.groupby("YEAR").INCTOT.mean()
    for y, g in got.items():
        assert g["mean"] == approx(exp.loc[y])
    assert max(g["mean"] for g in got.values()) > 1e6


NIU_DDI = """<?xml version="1.0" encoding="UTF-8"?>
<codeBook xmlns="ddi:codebook:2_5"><fileDscr><fileTxt><fileStrc type="rectangular"/></fileTxt></fileDscr><dataDscr>
<var name="EMPSTAT"><location StartPos="1" EndPos="2"/>
  <catgry><catValu>00</catValu><labl>NIU</labl></catgry>
  <catgry><catValu>10</catValu><labl>At work</labl></catgry>
  <catgry><catValu>21</catValu><labl>Unemployed</labl></catgry>
  <catgry><catValu>99</catValu><labl>Unknown/missing</labl></catgry></var>
<var name="HOURS"><location StartPos="3" EndPos="5"/>
  <catgry><catValu>998</catValu><labl>998 or more</labl></catgry>
  <catgry><catValu>997</catValu><labl>Unknown cause</labl></catgry></var>
<var name="EARN"><location StartPos="6" EndPos="12"/>
  <codInstr>9999999 = N/A (not in universe); 9999998: Missing. Values can be negative.</codInstr></var>
<var name="RENT"><location StartPos="13" EndPos="16"/>
  <txt>Monthly rent.</txt></var>
<var name="ONE"><location StartPos="17" EndPos="17"/></var>
</dataDscr></codeBook>
"""


def test_niu_codes_from_labels_and_text_hand_computed(tmp_path):
    """Labels ("NIU", "Unknown/missing") and text ("9999999 = N/A (not in
    universe)", "9999998: Missing") make missing codes; "998 or more" and
    "Unknown cause" do not; a 9-run the codebook does not name is only
    suggested. Means computed by hand."""
    rows = [  # EMPSTAT, HOURS, EARN, RENT
        ("00", 998, 9999999, 9999),
        ("10", 40, 52000, 800),
        ("21", 997, -1500, 650),
        ("99", 20, 9999998, 9999),
        ("10", 35, 30000, 1200),
    ]
    dat = write(tmp_path / "n.dat", "".join(f"{e}{h:03d}{x:>7}{r:04d}1\n" for e, h, x, r in rows))
    xml = write(tmp_path / "n.xml", NIU_DDI)
    ds = tmp_path / "n.mtab"
    p = run("import", dat, ds, "--ddi", xml)
    err = p.stderr
    assert 'variable EMPSTAT: 0 (value label "NIU"), 99 (value label "Unknown/missing")' in err
    assert 'variable EARN: 9999999 (text: "9999999 = N/A (not in universe)"), 9999998 (text: "9999998 = Missing")' in err
    assert "variable HOURS" not in err
    assert "variable RENT: its largest value is 9999" in err and "microtab missing DATASET RENT 9999" in err
    res = run_json("freq", ds, "EMPSTAT")
    assert {r["value"]: r["count"] for r in res["rows"] if not r.get("missing")} == {10: 2, 21: 1}
    assert run_json("means", ds, "EARN", "--by", "ONE")["groups"][0]["mean"] == approx((52000 - 1500 + 30000) / 3)
    assert run_json("means", ds, "HOURS", "--by", "ONE")["groups"][0]["mean"] == approx((998 + 40 + 997 + 20 + 35) / 5)
    # The suggestion is only a note: RENT's 9999 still counts.
    assert run_json("means", ds, "RENT", "--by", "ONE")["groups"][0]["mean"] == approx((9999 + 800 + 650 + 9999 + 1200) / 5)
    keep = tmp_path / "k.mtab"
    run("import", dat, keep, "--ddi", xml, "--keep-niu")
    assert run_json("means", keep, "EARN", "--by", "ONE")["groups"][0]["mean"] == approx(sum(r[2] for r in rows) / 5)


# --------------------------------------------------------------------------
# item 9: an ATUS-shaped hierarchical extract
# --------------------------------------------------------------------------

def atus_ddi(person_label="Person Record"):
    groups = [("5", "Elder Care Record"), ("4", "Who Record"), ("3", "Activity Record"),
              ("2", person_label), ("1", "Household Record")]
    key = ' keyvar="CASEID"'
    rg = "".join(
        f'<recGrp recidvar="RECTYPE" rectype="{t}"{"" if t == "1" else key}><labl>{l}</labl></recGrp>'
        for t, l in groups
    )

    def var(name, start, end, rt, dcml=0):
        return (f'<var ID="{name}" name="{name}" dcml="{dcml}" intrvl="contin" rectype="{rt}"><location StartPos="{start}" EndPos="{end}" '
                f'width="{end - start + 1}"/><labl>{name}</labl><txt>{name}.</txt><concept>Technical</concept>'
                '<varFormat schema="other" type="numeric"/></var>')

    vs = [
        var("RECTYPE", 1, 1, "1 2 3 4 5"), var("YEAR", 2, 5, "1 2 3 4 5"), var("CASEID", 6, 9, "1 2 3 4 5"),
        var("HH_SIZE", 10, 11, "1"), var("REGION", 12, 12, "1"),
        var("PERNUM", 10, 11, "2"), var("AGE", 12, 13, "2"), var("WT06", 14, 21, "2", dcml=2),
        var("ACTLINE", 10, 11, "3"), var("ACTIVITY", 12, 17, "3"), var("DURATION", 18, 21, "3"),
        var("WHOLINE", 10, 11, "4"), var("ELDERLINE", 10, 11, "5"),
    ]
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<codeBook xmlns="ddi:codebook:2_5" version="2.5">
<stdyDscr><citation><serStmt><serName abbr="atus">IPUMS ATUS</serName><serInfo>test</serInfo></serStmt></citation>
<dataAccs><useStmt><citReq>test</citReq><conditions>test</conditions></useStmt></dataAccs></stdyDscr>
<fileDscr ID="ExtractData"><fileTxt><fileName>atus.dat</fileName><fileCont>Microdata records</fileCont>
<fileStrc type="hierarchical">{rg}</fileStrc><fileType charset="ISO-8859-1">ISO-8859-1 data file</fileType>
<format>fixed length fields</format><filePlac>here</filePlac></fileTxt></fileDscr>
<dataDscr>{"".join(vs)}</dataDscr></codeBook>
"""


def atus_data(n=40, seed=5, types=("1", "2", "3")):
    """Households (1), each followed by its persons (2) — the respondent
    first, then its activities (3) — and no eldercare records (5)."""
    rng = np.random.default_rng(seed)
    out = []
    for h in range(n):
        case = f"{h + 1:04d}"
        size = int(rng.integers(1, 5))
        if "1" in types:
            out.append(f"12016{case}{size:02d}{int(rng.integers(1, 5))}")
        for p in range(size):
            if "2" in types:
                out.append(f"22016{case}{p + 1:02d}{int(rng.integers(15, 86)):02d}{int(rng.integers(100000, 99999999)):08d}")
            if p == 0 and "3" in types:
                for a in range(int(rng.integers(3, 8))):
                    out.append(f"32016{case}{a + 1:02d}{int(rng.integers(10101, 189999)):06d}{int(rng.integers(5, 600)):04d}")
        if "4" in types:
            out.append(f"42016{case}01")
    return "\n".join(out) + "\n"


def ipumspy_frames(xml, dat):
    readers = pytest.importorskip("ipumspy.readers")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ddi = readers.read_ipums_ddi(xml)
        frames = readers.read_hierarchical_microdata(ddi, dat)
    return {str(k): v for k, v in frames.items()}


def stored(ds, var):
    res = run_json("list", ds, var, "--limit", "1000000")
    return [r[var] if isinstance(r, dict) else r for r in res["rows"]]


def test_atus_hierarchical_default_is_person_records(tmp_path):
    xml = write(tmp_path / "atus.xml", atus_ddi())
    dat = write(tmp_path / "atus.dat", atus_data())
    frames = ipumspy_frames(xml, dat)
    H, P = frames["1"], frames["2"]
    assert len(frames["3"]) > 0
    ds = tmp_path / "atus.mtab"
    p = run("import", dat, ds, "--ddi", xml)
    assert "person records (type 2, Person Record) become the rows" in p.stderr
    info = run_json("info", ds)
    assert info["rows"] == len(P) > 0
    names = {v["name"] for v in info["variables"]}
    assert {"PERNUM", "AGE", "WT06", "HH_SIZE", "REGION"} <= names
    assert not names & {"ACTIVITY", "DURATION", "WHOLINE", "ELDERLINE"}
    exp = P.join(H.set_index("CASEID")[["HH_SIZE", "REGION"]], on="CASEID")
    # Weighted frequencies and means against pandas over ipumspy's frames.
    res = run_json("freq", ds, "REGION", "--weight", "WT06")
    want = exp.groupby("REGION").WT06.agg(["size", "sum"])
    got = {r["value"]: (r["count"], r["weighted"]) for r in res["rows"]}
    assert got == {k: (int(v["size"]), approx(v["sum"])) for k, v in want.iterrows()}
    m = run_json("means", ds, "AGE", "--by", "HH_SIZE", "--weight", "WT06")
    for g in m["groups"]:
        sub = exp[exp.HH_SIZE == g["by"][0]["value"]]
        assert g["n"] == len(sub)
        assert g["mean"] == approx(np.average(sub.AGE, weights=sub.WT06))


def test_atus_without_a_person_type_asks_for_one(tmp_path):
    """Several record types with records, none labelled as persons: an
    error listing each type and its count, and the option."""
    xml = write(tmp_path / "atus.xml", atus_ddi(person_label="Respondent Record"))
    dat = write(tmp_path / "atus.dat", atus_data())
    frames = ipumspy_frames(xml, dat)
    ds = tmp_path / "atus.mtab"
    p = run("import", dat, ds, "--ddi", xml, ok=None)
    msg = assert_one_error(
        p, "atus.dat", "--rectype",
        f"type 2 (Respondent Record): {len(frames['2'])} records",
        f"type 3 (Activity Record): {len(frames['3'])} records",
        f"type 1 (Household Record): {len(frames['1'])} records",
        "type 5 (Elder Care Record): 0 records",
    )
    assert not ds.exists(), msg
    run("import", dat, ds, "--ddi", xml, "--rectype", "3")
    assert run_json("info", ds)["rows"] == len(frames["3"])


def test_atus_one_type_below_households_is_chosen(tmp_path):
    """Households and activities only (no person type listed with records):
    the one type below the households becomes the rows, and a note says so."""
    xml = write(tmp_path / "atus.xml", atus_ddi(person_label="Respondent Record"))
    dat = write(tmp_path / "atus.dat", atus_data(types=("1", "3")))
    ds = tmp_path / "atus.mtab"
    p = run("import", dat, ds, "--ddi", xml)
    assert "the records of type 3 (Activity Record) become the rows" in p.stderr
    n3 = sum(1 for l in dat.read_text().splitlines() if l.startswith("3"))
    assert run_json("info", ds)["rows"] == n3
