"""`microtab import FILE.xpt`: SAS transport files (XPORT versions 5 and
8) against pyreadstat (ReadStat) and R haven: files SAS wrote (pyreadstat's
fixtures), files haven writes here (special missing values `.A`/`.Z`,
long names and labels, dates, datetimes, 300 records over many cards),
damaged files, padding and several members."""

import datetime as dt
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyreadstat
import pytest

from conftest import rscript, run, run_json

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "xport"


def expected(v):
    """pyreadstat's value as `microtab list --format json` gives it: ISO
    text for dates and times, no trailing blanks, blank text missing."""
    if v is None or v is pd.NaT or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, str):
        v = v.rstrip(" ")
        return v or None
    if isinstance(v, (pd.Timestamp, dt.datetime)):
        return v.isoformat(timespec="microseconds").removesuffix(".000000")
    if isinstance(v, dt.time):
        return v.isoformat().rstrip("0").rstrip(".") if v.microsecond else v.isoformat()
    if isinstance(v, dt.date):
        return v.isoformat()
    return float(v)


def same_as_pyreadstat(ds, path):
    df, meta = pyreadstat.read_xport(str(path))
    got = run_json("list", ds, *df.columns, "--all")["records"]
    assert len(got) == len(df), (path, len(got), len(df))
    info = {v["name"]: v for v in run_json("info", ds)["variables"]}
    for i, row in enumerate(df.itertuples(index=False)):
        for name, v in zip(df.columns, row):
            want, g = expected(v), got[i][name]
            if want is None and g in info[name]["missing_codes"]:
                # A special missing value (.A): its code (pyreadstat: NaN).
                continue
            if isinstance(want, float):
                assert g == want, (path, i, name, g, want)
            elif isinstance(g, str) and isinstance(want, str) and g != want and g[10:11] == "T":
                # Datetimes: to the microsecond.
                assert pd.Timestamp(g) == pd.Timestamp(want), (path, i, name, g, want)
            else:
                assert g == want, (path, i, name, g, want)
    assert list(info) == list(df.columns)
    for name, label in meta.column_names_to_labels.items():
        assert info[name]["label"] == label, (name, info[name]["label"], label)
    return df, info


@pytest.mark.parametrize("name", ["sample.xpt", "sas.xpt5", "sas.xpt8", "dates_xpt_v8.xpt"])
def test_files_sas_wrote_read_as_pyreadstat_reads_them(tmp_path, name):
    ds = tmp_path / "d.mtab"
    p = run("import", FIX / name, ds)
    _, info = same_as_pyreadstat(ds, FIX / name)
    if name == "dates_xpt_v8.xpt":
        # Long labels (LABELV8) and the member's label as the title.
        assert info["dt"]["label"] == "a very long label for testing accuracy of transformations"
        assert run_json("info", ds)["title"] == "dataset label for the dates test dataset" == \
            pyreadstat.read_xport(str(FIX / name), metadataonly=True)[1].file_label
        assert info["dates"]["kind"] == "string" and info["seconds"]["kind"] == "int"
    if name == "sample.xpt":
        # Exact decimals are scaled integers (1.1, -1000.3: one decimal).
        assert info["MYNUM"]["kind"] == "int" and info["MYNUM"]["decimals"] == 1


R_WRITE = r"""
suppressMessages(library(haven))
a <- commandArgs(trailingOnly=TRUE)
dir <- a[1]
set.seed(3)
n <- 300
d <- data.frame(id = 1:n, wt = round(runif(n, 100, 9000), 2), big = round(rnorm(n) * 1e9),
                small = rnorm(n) * 1e-30,
                name = sample(c("alpha", "b", " lead", "x y", ""), n, TRUE),
                day = as.Date("2001-01-01") + sample(-30000:30000, n), stringsAsFactors = FALSE)
i <- seq_len(n)
d$score <- ifelse(i %% 7 == 0, tagged_na("A"), ifelse(i %% 11 == 0, tagged_na("Z"),
                  ifelse(i %% 13 == 0, NA, round(rnorm(n, 50, 10), 1))))
d$when <- as.POSIXct("2020-03-01 12:00:00", tz = "UTC") + sample(0:1e8, n)
attr(d$wt, "label") <- "Sampling weight"
v8 <- d
names(v8)[names(v8) == "score"] <- "test_score_long_name"
attr(v8$test_score_long_name, "label") <-
  "A score with a label longer than forty characters, for version 8"
write_xpt(v8, file.path(dir, "v8.xpt"), version = 8, name = "GENDATA")
attr(d$score, "label") <- "A score"
write_xpt(d, file.path(dir, "v5.xpt"), version = 5, name = "GEN5")
# The special missing values as haven reads them back.
x <- read_xpt(file.path(dir, "v5.xpt"))
tags <- na_tag(x$score)
write.csv(data.frame(tag = ifelse(is.na(tags), "", toupper(tags)), na = is.na(x$score)),
          file.path(dir, "tags.csv"), row.names = FALSE)
"""


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    d = tmp_path_factory.mktemp("xpt")
    rscript(d / "write.R", R_WRITE, d, d / "tags.csv")
    return d


@pytest.mark.parametrize("version", ["v5", "v8"])
def test_files_haven_writes_match_pyreadstat_and_haven(written, tmp_path, version):
    src = written / f"{version}.xpt"
    ds = tmp_path / "d.mtab"
    run("import", src, ds)
    df, info = same_as_pyreadstat(ds, src)
    score = "score" if version == "v5" else "test_score_long_name"
    assert info["id"]["kind"] == "int" and info["wt"]["decimals"] == 2
    assert info["small"]["kind"] == "float" and info["day"]["kind"] == "string"
    # .A and .Z: labelled missing codes, counted apart, as haven tags them.
    tags = pd.read_csv(written / "tags.csv", keep_default_na=False)
    want = tags[tags.tag != ""].tag.value_counts().to_dict()
    freq = run_json("freq", ds, score, "--include-missing")
    cats = {c["label"]: c["count"] for c in freq["rows"] if c.get("label")}
    assert {f".{k}": v for k, v in want.items()} == cats
    sysmis = int((tags.na & (tags.tag == "")).sum())
    assert next(c["count"] for c in freq["rows"] if c["value"] is None) == sysmis
    assert len(info[score]["missing_codes"]) == 2
    # The mean leaves every missing value out (numpy over the values).
    vals = df[score].to_numpy()
    means = run_json("means", ds, score, "--by", "name")
    assert means["total"]["mean"] == pytest.approx(np.nanmean(
        vals[df.name.str.strip(" ").ne("")]), rel=1e-12)


def test_damaged_files_are_errors_that_leave_the_target(tmp_path):
    good = (FIX / "sample.xpt").read_bytes()
    target = tmp_path / "t.mtab"
    run("import", FIX / "sas.xpt5", target)
    before = run_json("list", target, "I", "--all")
    cases = {
        # Cut inside a header card, inside the variables, inside a record.
        "header": (good[:100], "ends inside"),
        "namestr": (good[:700], "claims 7 variables"),
        "obs header": (good[:1700], "ends inside"),
        "record": (good[:good.rfind(b"a")] + b"a" * 3, "inside record"),
    }
    names = good.find(b"HEADER RECORD*******NAMESTR")
    bad_type = bytearray(good)
    bad_type[names + 80 + 1] = 3
    cases["type"] = (bytes(bad_type), "type 3")
    bad_len = bytearray(good)
    bad_len[names + 80 + 140 + 5] = 9  # the second variable (numeric) 9 bytes long
    cases["length"] = (bytes(bad_len), "2 to 8")
    claim = bytearray(good)
    claim[names + 53:names + 58] = b"99999"
    cases["count"] = (bytes(claim), "more than the file")
    bad_hdr = bytearray(good)
    bad_hdr[80 * 3:80 * 3 + 20] = b"HEADER RECORD*******"[::-1]
    cases["member"] = (bytes(bad_hdr), "the member header")
    for what, (data, needle) in cases.items():
        f = tmp_path / f"{what}.xpt"
        f.write_bytes(data)
        p = run("import", f, target, "--force", ok=False)
        assert p.returncode == 1 and needle in p.stderr and f.name in p.stderr, (what, p.stderr)
        assert "byte " in p.stderr, (what, p.stderr)
        assert run_json("list", target, "I", "--all") == before, what
        p = run("import", f, tmp_path / f"{what}.mtab", ok=False)
        assert not (tmp_path / f"{what}.mtab").exists(), what


def test_text_that_is_not_utf8_needs_its_encoding(written, tmp_path):
    raw = (written / "v5.xpt").read_bytes()
    data = raw.find(b"HEADER RECORD*******OBS")
    latin = raw[:data] + raw[data:].replace(b"alpha", b"alph\xe9", 1)
    f = tmp_path / "latin.xpt"
    f.write_bytes(latin)
    p = run("import", f, tmp_path / "l.mtab", ok=False)
    assert "variable name" in p.stderr and "record " in p.stderr and "UTF-8" in p.stderr, p.stderr
    run("import", f, tmp_path / "l.mtab", "--encoding", "latin1")
    names = {r["name"] for r in run_json("list", tmp_path / "l.mtab", "name", "--all")["records"]}
    assert "alphé" in names and "alpha" in names
    df, _ = pyreadstat.read_xport(str(f), encoding="latin1")
    assert (df.name == "alphé").sum() == 1


def test_padding_blank_records_and_other_members(written, tmp_path):
    """Blank records in the last card are its padding (as pyreadstat and
    SAS read them); a second member is left out with a note."""
    r = r"""
suppressMessages(library(haven))
a <- commandArgs(trailingOnly=TRUE)
write_xpt(data.frame(s = c("a", "bb", "c", "", "")), file.path(a[1], "blank.xpt"), version = 5, name = "B")
write_xpt(data.frame(s = c("a", "", "c", "d", "e", "f", "g", "h", "i")), file.path(a[1], "mid.xpt"),
          version = 5)
write.csv(data.frame(x = 1), a[2])
"""
    rscript(tmp_path / "b.R", r, tmp_path, tmp_path / "done.csv")
    for name in ("blank.xpt", "mid.xpt"):
        ds = tmp_path / f"{name}.mtab"
        run("import", tmp_path / name, ds)
        df, _ = pyreadstat.read_xport(str(tmp_path / name))
        got = run_json("list", ds, "s", "--all")["records"]
        assert [g["s"] for g in got] == [expected(v) for v in df.s], name
    # blank.xpt: the two blank records are padding to SAS and ReadStat.
    assert len(run_json("list", tmp_path / "blank.xpt.mtab", "s", "--all")["records"]) == 3
    # Two members: the first is read.
    one, two = (written / "v5.xpt").read_bytes(), (FIX / "sas.xpt5").read_bytes()
    both = tmp_path / "both.xpt"
    both.write_bytes(one + two[two.find(b"HEADER RECORD*******MEMBER"):])
    p = run("import", both, tmp_path / "both.mtab")
    assert "more members (data sets) after GEN5" in p.stderr + p.stdout
    assert run_json("info", tmp_path / "both.mtab")["rows"] == 300


def test_csv_options_do_not_apply(tmp_path):
    p = run("import", FIX / "sample.xpt", tmp_path / "o.mtab", "--missing", "MYNUM=1.1", ok=False)
    assert "cannot be given" in p.stderr and "missing codes" in p.stderr, p.stderr


def test_damaged_first_card_is_not_read_as_csv(tmp_path):
    """A library header cut short or with a bad byte is still a transport
    file's error (a review found it imported as an empty CSV)."""
    good = (FIX / "sample.xpt").read_bytes()
    nul = bytearray(good)
    nul[36] = 0
    high = bytearray(good)
    high[19] = 0x80
    for what, data in {"short": good[:30], "nul": bytes(nul), "high": bytes(high)}.items():
        f = tmp_path / f"{what}.xpt"
        f.write_bytes(data)
        p = run("import", f, tmp_path / f"{what}.mtab", ok=False)
        assert p.returncode == 1 and "byte 0" in p.stderr, p.stderr
        assert ("library header" if what != "high" else "not a SAS transport file") in p.stderr, p.stderr
        assert not (tmp_path / f"{what}.mtab").exists()


R_ODD = r"""
suppressMessages(library(haven))
a <- commandArgs(trailingOnly=TRUE)
# Records of 80 bytes whose text begins like a member's header card.
h <- "HEADER RECORD*******MEMBER  HEADER RECORD!!!!!!!000000000000000001600000000140"
write_xpt(data.frame(s = c("first", h, "third"), stringsAsFactors = FALSE),
          file.path(a[1], "headerlike.xpt"), version = 5, name = "H")
write_xpt(data.frame(d = structure(c(11356, 3650000, NA), class = "Date"), n = 1:3),
          file.path(a[1], "farday.xpt"), version = 5, name = "F")
write.csv(data.frame(x = 1), a[2])
"""


def test_text_like_a_header_and_dates_beyond_9999(tmp_path):
    rscript(tmp_path / "odd.R", R_ODD, tmp_path, tmp_path / "done.csv")
    ds = tmp_path / "h.mtab"
    run("import", tmp_path / "headerlike.xpt", ds)
    same_as_pyreadstat(ds, tmp_path / "headerlike.xpt")
    assert run_json("info", ds)["rows"] == 3
    ds = tmp_path / "f.mtab"
    p = run("import", tmp_path / "farday.xpt", ds)
    assert "1 values outside the years 1 to 9999 are left missing" in p.stderr + p.stdout
    got = run_json("list", ds, "d", "n", "--all")["records"]
    assert [r["d"] for r in got] == ["2001-02-03", None, None]
