"""microtab.dask on a real Dask cluster (a LocalCluster of two worker
processes on 127.0.0.1, no dashboard, started here): tables over parts of
one dataset and over several datasets equal the single-machine answer bit
for bit (standard errors, z and Rao–Scott included) and DuckDB's counts;
a worker killed during a query is replaced and the answer is still exact.
Taylor designs over ranges and over datasets whose strata lie within one
dataset equal the single-machine answer (to 1e-9) and R survey's."""

import json
import os
import signal
import time

import duckdb
import pytest

import microtab as mt

distributed = pytest.importorskip("distributed")
import microtab.dask as mtd  # noqa: E402
from test_api import census_dataset, cli, duck_census, replicate_design  # noqa: E402
from answers import same_answer as close  # noqa: E402  (tests/ is on sys.path: test_api)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("dask")
    csv, ds = census_dataset(d, 400000, 4, reps=8, ds="all.mtab")
    replicate_design(ds, 8)
    # Three datasets (states 1–20, 21–40, 41–56) with the same design.
    for i, f in enumerate(["STATEFIP(1-20)", "STATEFIP(21-40)", "STATEFIP(41-56)"]):
        cli("subset", ds, d / f"part{i}.mtab", "--filter", f)
    return d, ds, duck_census(csv)


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address=None, silence_logs=40)
    c = Client(cluster)
    yield c
    c.close()
    cluster.close()


def strip(d):
    d = dict(d)
    d.pop("dataset", None)
    return d


QUERIES = [
    ("tab", ("SEX", "EDUC"), dict(pct="col", z=True, stats=True)),
    ("tab", ("RACE", "AGE(r: 0-17; 18-64; 65-*)"), dict(control="SEX", filter="INCTOT<9999999", pct="row")),
    ("freq", ("EDUC",), {}),
    ("means", ("INCTOT",), dict(by=["SEX", "MARST"])),
]


@pytest.mark.parametrize("kind,args,kw", QUERIES, ids=[q[0] + str(i) for i, q in enumerate(QUERIES)])
def test_parts_of_one_dataset_equal_the_whole(data, client, kind, args, kw):
    _, ds, _ = data
    whole = getattr(mt.open(ds), kind)(*args, **kw).to_dict()
    here = getattr(mtd.on(None, mtd.split(ds, 7)), kind)(*args, **kw).to_dict()
    cluster = getattr(mtd.on(client, mtd.split(ds, 7), fan_in=3), kind)(*args, **kw).to_dict()
    assert strip(here) == strip(whole)
    assert strip(cluster) == strip(whole)


def test_several_datasets_equal_the_whole_and_duckdb(data, client):
    d, ds, con = data
    ps = mtd.parts(str(d / "part*.mtab"))
    assert len(ps) == 3
    t = mtd.on(client, ps).tab("SEX", "EDUC", pct="col")
    assert strip(t.to_dict()) == strip(mt.open(ds).tab("SEX", "EDUC", pct="col").to_dict())
    want = {(s, e): (n, float(w)) for s, e, n, w in con.execute(
        "SELECT SEX, EDUC, count(*), sum(PERWT) FROM c GROUP BY ALL").fetchall()}
    tb = t.tables[0]
    for i, r in enumerate(tb["rows"]):
        for j, c in enumerate(tb["cols"]):
            n, w = want[(r["value"], c["value"])]
            assert tb["counts"][i][j] == n
            assert tb["weighted"][i][j] == pytest.approx(w, rel=1e-12)
    assert tb["pct_se"] is not None


def test_a_worker_killed_mid_query_still_gives_the_exact_answer(data, client):
    _, ds, _ = data
    whole = strip(mt.open(ds).tab("EDUC", "RACE", pct="col", z=True).to_dict())
    pids = list(client.run(os.getpid).values())
    # 600 parts: over a second of tasks here, so the kill lands mid-query.
    q = mtd.on(client, mtd.split(ds, 600), fan_in=4)
    import threading
    out = {}
    th = threading.Thread(target=lambda: out.setdefault("t", q.tab("EDUC", "RACE", pct="col", z=True)))
    th.start()
    time.sleep(0.3)
    os.kill(pids[0], signal.SIGKILL)
    assert th.is_alive()  # the query was still running when its worker died
    th.join(timeout=300)
    assert not th.is_alive()
    assert strip(out["t"].to_dict()) == whole
    # The nanny started a new worker.
    client.wait_for_workers(2, timeout=60)


TAYLOR = ["--weight", "PERWT", "--strata", "STRATA", "--cluster", "SERIAL", "--lonely-psu", "adjust"]


@pytest.fixture(scope="module")
def taylor(tmp_path_factory):
    """A stratified cluster design (about 2,350 strata within states,
    households as PSUs, records of a PSU together); the same records
    shuffled (no PSU is one run of rows); three state datasets, each with
    the design set on its own records (strata lie within states)."""
    d = tmp_path_factory.mktemp("dask_taylor")
    csv = d / "t.csv"
    cli("gen", "census", "--rows", "60000", "--seed", "2", "--strata", "--out", csv)
    t = d / "t.mtab"
    cli("import", csv, t, "--missing", "INCTOT=9999999")
    cli("design", t, *TAYLOR)
    shuffled = d / "s.csv"
    duckdb.sql(f"COPY (SELECT * FROM read_csv('{csv}') ORDER BY hash(SERIAL * 7919 + PERNUM)) "
               f"TO '{shuffled}' (HEADER)")
    s = d / "s.mtab"
    cli("import", shuffled, s, "--missing", "INCTOT=9999999")
    cli("design", s, *TAYLOR)
    for i, f in enumerate(["STATEFIP(1-20)", "STATEFIP(21-40)", "STATEFIP(41-56)"]):
        cli("subset", t, d / f"st{i}.mtab", "--filter", f)
        cli("design", d / f"st{i}.mtab", *TAYLOR)
    return d, csv, t, s


TAYLOR_QUERIES = QUERIES


@pytest.mark.parametrize("kind,args,kw", TAYLOR_QUERIES, ids=[q[0] + str(i) for i, q in enumerate(TAYLOR_QUERIES)])
def test_taylor_parts_equal_the_whole(taylor, client, kind, args, kw):
    """Ranges of records (a PSU cut by a range's edge is merged by key
    before it is squared), the shuffled records' ranges (every PSU kept by
    key), and state datasets (strata within one dataset): the whole
    dataset's answer, SEs, z and Rao–Scott included."""
    d, _, t, s = taylor
    whole = getattr(mt.open(t), kind)(*args, **kw).to_dict()
    for parts, c in [(mtd.split(t, 1), None), (mtd.split(t, 7), None), (mtd.split(t, 40), client),
                     (mtd.split(s, 5), client), (mtd.parts(str(d / "st*.mtab")), client)]:
        got = getattr(mtd.on(c, parts, fan_in=3), kind)(*args, **kw).to_dict()
        assert got["design"]["method"] == "taylor"
        close(got, whole)


R_TAYLOR = r"""
suppressMessages(library(survey))
options(survey.lonely.psu = "adjust")
a <- commandArgs(TRUE)
d <- read.csv(a[1])
d$INCTOT[d$INCTOT == 9999999] <- NA
des <- svydesign(ids = ~SERIAL, strata = ~STRATA, weights = ~PERWT, data = d, nest = TRUE)
t <- svytotal(~factor(EDUC), des)
m <- svyby(~INCTOT, ~SEX, subset(des, !is.na(INCTOT)), svymean)
out <- rbind(data.frame(what = "total", key = sub("factor(EDUC)", "", names(coef(t)), fixed = TRUE),
                        est = coef(t), se = SE(t)),
             data.frame(what = "mean", key = m$SEX, est = m$INCTOT, se = m$se))
write.csv(out, a[2], row.names = FALSE)
"""


def test_taylor_parts_match_r_survey(taylor, client, tmp_path):
    """Weighted counts and domain means with their SEs over 9 ranges
    against R survey's svytotal and svyby(svymean) on the same CSV."""
    import csv
    import shutil
    import subprocess
    if not shutil.which("Rscript"):
        pytest.skip("R is installed by scripts/test.sh")
    _, src, t, _ = taylor
    script = tmp_path / "t.R"
    script.write_text(R_TAYLOR)
    out = tmp_path / "r.csv"
    p = subprocess.run(["Rscript", str(script), str(src), str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    want = {(r["what"], r["key"]): (float(r["est"]), float(r["se"])) for r in csv.DictReader(open(out))}
    q = mtd.on(client, mtd.split(t, 9))
    f = q.freq("EDUC").to_dict()
    for r in f["rows"]:
        est, se = want[("total", str(r["value"]))]
        assert r["weighted"] == pytest.approx(est, rel=1e-9)
        assert r["weighted_se"]["se"] == pytest.approx(se, rel=1e-6)
    m = q.means("INCTOT", by=["SEX"]).to_dict()
    for g in m["groups"]:
        est, se = want[("mean", str(g["by"][0]["value"]))]
        assert g["mean"] == pytest.approx(est, rel=1e-9)
        assert g["mean_se"]["se"] == pytest.approx(se, rel=1e-6)


def test_taylor_strata_across_datasets_are_refused(taylor, tmp_path):
    """Two datasets holding parts of the same strata (split by sex, each
    with the design set on its own records): their PSU counts are each
    dataset's, so the merge says so instead of answering."""
    _, _, t, _ = taylor
    for i, f in enumerate(["SEX(1)", "SEX(2)"]):
        cli("subset", t, tmp_path / f"x{i}.mtab", "--filter", f)
        cli("design", tmp_path / f"x{i}.mtab", *TAYLOR)
    with pytest.raises(mt.QueryError, match="stratum .* is in two datasets"):
        mtd.on(None, mtd.parts(str(tmp_path / "x*.mtab"))).tab("SEX", "EDUC")
    # The partial result is JSON any worker can read.
    p = mtd.partial(mtd.Part(str(t), 0, 1000), json.dumps({"analysis": "freq", "var": "SEX"}))
    assert json.loads(p)["cube"]["taylor"]["strata"]


def test_parts_missing_categories_merge_exactly(data):
    """Parts where some categories have no records (a rare filter over 50
    ranges): the merged answer is still the whole dataset's."""
    _, ds, _ = data
    for kind, args, kw in [("means", ("INCTOT",), dict(by=["STATEFIP"], filter="AGE(90-*)")),
                           ("tab", ("STATEFIP", "SEX"), dict(filter="AGE(95-*)", pct="row", z=True)),
                           ("freq", ("STATEFIP",), dict(filter="AGE(95-*)"))]:
        whole = getattr(mt.open(ds), kind)(*args, **kw).to_dict()
        parts = getattr(mtd.on(None, mtd.split(ds, 50)), kind)(*args, **kw).to_dict()
        assert strip(parts) == strip(whole), kind


def cli_fails(*args):
    import subprocess
    from test_api import BIN
    p = subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True)
    assert p.returncode != 0, p.stdout
    return p.stderr


def test_import_parts_is_a_catalog_answered_as_the_whole(data, client, tmp_path):
    """`microtab import … --parts 5`: a catalog of five datasets in record
    order; the CLI, open_many and a cluster answer over the catalog's one
    path exactly as over the whole dataset (replicate SEs included) and as
    DuckDB counts; the parts carry the design."""
    d, ds, con = data
    cat = tmp_path / "c.parts"
    cli("import", d / "c.csv", cat, "--missing", "INCTOT=9999999", "--parts", "5")
    c = json.loads((cat / "catalog.json").read_text())
    assert [p["rows"] for p in c["parts"]] == [80000] * 5
    assert [p["first_record"] for p in c["parts"]] == [1, 80001, 160001, 240001, 320001]
    assert not list(tmp_path.glob(".*"))  # no staging left behind
    # Not yet a design: set it on each part, as on one dataset.
    for p in sorted(cat.glob("part-*.mtab")):
        cli("design", p, "--weight", "PERWT", "--repweights", "REPWTP1-REPWTP8")
    whole = strip(mt.open(ds).tab("SEX", "EDUC", pct="col", z=True).to_dict())
    assert strip(mtd.on(client, mtd.parts(str(cat))).tab("SEX", "EDUC", pct="col", z=True).to_dict()) == whole
    assert strip(mt.open_many(cat).tab("SEX", "EDUC", pct="col", z=True).to_dict()) == whole
    got = json.loads(cli("freq", cat, "EDUC", "--format", "json").stdout)
    want = dict(con.execute("SELECT EDUC, count(*) FROM c GROUP BY ALL").fetchall())
    assert {r["value"]: r["count"] for r in got["rows"]} == want
    # A split of the dataset carries its replicate design to every part.
    cat2 = tmp_path / "s.parts"
    cli("split", ds, cat2, "--parts", "3")
    assert "carried to every part" in json.loads((cat2 / "catalog.json").read_text())["design"]
    assert strip(mtd.on(client, mtd.parts(str(cat2))).tab("SEX", "EDUC", pct="col", z=True).to_dict()) == whole


def test_split_keeps_a_taylor_design_when_strata_are_runs(taylor, client, tmp_path):
    """Records sorted by stratum: the cuts move to changes of stratum, each
    part gets the design set on its own (whole) strata, and the catalog
    answers as the whole dataset; records not in stratum runs: the parts
    carry no Taylor design, and the catalog says why."""
    _, src, t, _ = taylor
    srt = tmp_path / "sorted.csv"
    duckdb.sql(f"COPY (SELECT * FROM read_csv('{src}') ORDER BY STRATA, SERIAL, PERNUM) TO '{srt}' (HEADER)")
    ds = tmp_path / "sorted.mtab"
    cli("import", srt, ds, "--missing", "INCTOT=9999999")
    cli("design", ds, *TAYLOR)
    cat = tmp_path / "sorted.parts"
    c = mt.split(ds, cat, 6)
    assert "set on each part" in c["design"]
    keys = [json.loads(cli("info", cat / p["path"], "--format", "json").stdout)["design"]["taylor"]["strata_keys"]
            for p in c["parts"]]
    flat = [k for ks in keys for k in ks]
    assert len(flat) == len(set(flat))  # every stratum in one part
    for kind, args, kw in TAYLOR_QUERIES:
        whole = getattr(mt.open(ds), kind)(*args, **kw).to_dict()
        close(getattr(mtd.on(client, mtd.parts(str(cat))), kind)(*args, **kw).to_dict(), whole)
    # The generator's order: strata are not runs of records. Refused
    # (nothing written) unless the parts may go without the design.
    with pytest.raises(mt.MicrotabError, match="not runs of records.*design=False"):
        mt.split(t, tmp_path / "t.parts", 4)
    assert not (tmp_path / "t.parts").exists()
    c = mt.split(t, tmp_path / "t.parts", 4, design=False)
    assert "not carried" in c["design"] and "not runs of records" in c["design"]
    info = json.loads(cli("info", tmp_path / "t.parts" / c["parts"][0]["path"], "--format", "json").stdout)
    assert info.get("design") is None


def test_taylor_strata_are_compared_by_value(taylor, client, tmp_path):
    """Text strata (codes differ between datasets) of state datasets merge
    as the whole; the same strata written with decimals in one dataset
    (101 and 101.000) are the same strata, so refused; a design without
    strata over two datasets is refused."""
    _, src, _, _ = taylor
    d = tmp_path
    q = lambda w: f"COPY (SELECT * REPLACE ({w}) FROM read_csv('{src}')"  # noqa: E731
    duckdb.sql(q("'S' || STRATA AS STRATA") + f") TO '{d / 'txt.csv'}' (HEADER)")
    cli("import", d / "txt.csv", d / "txt.mtab", "--missing", "INCTOT=9999999")
    cli("design", d / "txt.mtab", *TAYLOR)
    for i, f in enumerate(["STATEFIP(1-28)", "STATEFIP(29-56)"]):
        cli("subset", d / "txt.mtab", d / f"p_tx{i}.mtab", "--filter", f)
        cli("design", d / f"p_tx{i}.mtab", *TAYLOR)
    whole = mt.open(d / "txt.mtab").tab("SEX", "EDUC", pct="col", stats=True).to_dict()
    close(mtd.on(client, mtd.parts(str(d / "p_tx*.mtab"))).tab("SEX", "EDUC", pct="col", stats=True).to_dict(), whole)
    # 101 in one dataset, 101.000 in the other: one stratum, two datasets.
    duckdb.sql(q("STRATA::INTEGER AS STRATA") + f" WHERE SEX = 1) TO '{d / 'a.csv'}' (HEADER)")
    duckdb.sql(q("printf('%.3f', STRATA::DOUBLE) AS STRATA") + f" WHERE SEX = 2) TO '{d / 'b.csv'}' (HEADER)")
    for n in "ab":
        cli("import", d / f"{n}.csv", d / f"dec{n}.mtab", "--missing", "INCTOT=9999999")
        cli("design", d / f"dec{n}.mtab", *TAYLOR)
    with pytest.raises(mt.QueryError, match=r"stratum \d+ is in two datasets"):
        mtd.on(None, mtd.parts(str(d / "dec*.mtab"))).freq("SEX")
    for n in "ab":
        cli("design", d / f"dec{n}.mtab", "--weight", "PERWT", "--cluster", "SERIAL")
    with pytest.raises(mt.QueryError, match="no strata"):
        mtd.on(None, mtd.parts(str(d / "dec*.mtab"))).freq("SEX")


def test_parts_counted_twice_are_refused(data, tmp_path):
    """The same dataset twice, overlapping ranges, a catalog listing a part
    twice, a part replaced after the split or a copy of another part in its
    place: refused, not counted twice (tests/cli/test_catalog.py has the
    rest: links, paths, reordering, killed splits)."""
    _, ds, _ = data
    with pytest.raises(mt.QueryError, match="overlap"):
        mtd.on(None, mtd.parts([str(ds), str(ds)]))
    with pytest.raises(mt.QueryError, match="overlap"):
        mtd.on(None, [mtd.Part(str(ds), 0, 1000), mtd.Part(str(ds), 500, 2000)])
    mtd.on(None, [mtd.Part(str(ds), 0, 1000), mtd.Part(str(ds), 1000, 2000)])  # adjacent: fine
    cat = tmp_path / "c.parts"
    cli("split", ds, cat, "--parts", "3")
    c = json.loads((cat / "catalog.json").read_text())
    c["parts"].insert(1, c["parts"][0])
    (cat / "catalog.json").write_text(json.dumps(c))
    assert "must cover the records once" in cli_fails("freq", cat, "SEX")
    c["parts"].pop(1)
    (cat / "catalog.json").write_text(json.dumps(c))
    cli("subset", cat / "part-002.mtab", tmp_path / "x.mtab", "--filter", "AGE(18-*)")
    import shutil
    shutil.rmtree(cat / "part-002.mtab")
    shutil.copytree(tmp_path / "x.mtab", cat / "part-002.mtab")
    assert "part part-002.mtab is not the part the split wrote" in cli_fails("freq", cat, "SEX")
    with pytest.raises(mt.MicrotabError, match="part-002.mtab is not the part the split wrote"):
        mtd.parts(str(cat))
    # A copy of part 1 in its place: one dataset twice, whatever the paths.
    shutil.rmtree(cat / "part-002.mtab")
    shutil.copytree(cat / "part-001.mtab", cat / "part-002.mtab")
    with pytest.raises(mt.MicrotabError, match="part-001.mtab and part-002.mtab are the same dataset"):
        mt.open_many(cat)
    assert "at most" in cli_fails("split", tmp_path / "x.mtab", tmp_path / "many", "--parts", "10000000")
    assert "is a catalog of parts" in cli_fails("info", cat)


def test_import_parquet_parts(data, tmp_path):
    """A Parquet file imported with --parts: a catalog, answered as DuckDB
    counts the file; an existing catalog replaced only with --force."""
    d, _, con = data
    pq = tmp_path / "c.parquet"
    con.execute(f"COPY (SELECT SEX, EDUC, AGE FROM c) TO '{pq}' (FORMAT parquet)")
    cat = tmp_path / "pq.parts"
    cli("import", pq, cat, "--parts", "3")
    assert len(json.loads((cat / "catalog.json").read_text())["parts"]) == 3
    got = json.loads(cli("tab", cat, "SEX", "EDUC", "--format", "json").stdout)["tables"][0]
    want = {(a, b): n for a, b, n in con.execute("SELECT SEX, EDUC, count(*) FROM c GROUP BY ALL").fetchall()}
    for i, r in enumerate(got["rows"]):
        for j, col in enumerate(got["cols"]):
            assert got["counts"][i][j] == want.get((r["value"], col["value"]), 0)
    assert "exists (give --force" in cli_fails("import", pq, cat, "--parts", "2")
    cli("import", pq, cat, "--parts", "2", "--force")
    assert len(json.loads((cat / "catalog.json").read_text())["parts"]) == 2
    assert not list(tmp_path.glob(".*"))


def test_split_and_catalog_errors(data, tmp_path):
    """An existing catalog is kept unless --force; a part missing from a
    catalog is an error that names it (an answer without its records
    would be short); zero parts are refused."""
    _, ds, _ = data
    cat = tmp_path / "c.parts"
    cli("split", ds, cat, "--parts", "4")
    before = (cat / "catalog.json").read_text()
    assert "exists; give --force" in cli_fails("split", ds, cat, "--parts", "2")
    assert (cat / "catalog.json").read_text() == before
    cli("split", ds, cat, "--parts", "2", "--force")
    assert len(json.loads((cat / "catalog.json").read_text())["parts"]) == 2
    assert not list(tmp_path.glob(".*"))
    assert "at least 1" in cli_fails("split", ds, tmp_path / "z", "--parts", "0")
    import shutil
    shutil.rmtree(cat / "part-002.mtab")
    err = cli_fails("freq", cat, "SEX")
    assert "part-002.mtab (records 200001–400000) is missing" in err, err
    with pytest.raises(mt.MicrotabError, match="part-002.mtab .* is missing"):
        mtd.parts(str(cat))
    with pytest.raises(mt.MicrotabError, match="is missing"):
        mt.open_many(cat)


def test_a_text_value_no_part_has_is_an_error_over_parts(tmp_path):
    """Each part alone cannot judge a text value (it may lack one the
    others have): the parts' answer judges it once over all of them, as
    one machine does, instead of answering zeros."""
    rows = [(i % 7, "Female" if i % 3 == 0 and i < 300 else "Male") for i in range(600)]
    csv = tmp_path / "g.csv"
    csv.write_text("S,G\n" + "".join(f"{s},{g}\n" for s, g in rows))
    whole = tmp_path / "g.mtab"
    cli("import", csv, whole)
    # Parts 3 and 4 (records 300–599) have no "Female": fine, since others do.
    parts = mtd.on(None, mtd.split(whole, 4))
    got = parts.freq("S", filter="G(Female)").to_dict()
    want = dict(duckdb.connect().execute(
        f"SELECT S, count(*) FROM read_csv('{csv}') WHERE G = 'Female' GROUP BY 1").fetchall())
    assert {r["value"]: r["count"] for r in got["rows"]} == want
    with pytest.raises(mt.QueryError, match=r"G has no value 'female' \(did you mean 'Female'\?\)"):
        parts.freq("S", filter="G(female)")
    with pytest.raises(mt.QueryError, match="did you mean 'Male'"):
        parts.tab("S", 'G(r: "male"; *)')


def design_cases(data, taylor):
    """(the whole dataset, ways to cut it into parts, query options): a
    replicate design over ranges and state datasets; a Taylor design over
    ranges, shuffled records' ranges and state datasets (strata within
    states); weighted without a design (HC0); unweighted."""
    d, ds, _ = data
    td, _, t, s = taylor
    return [
        (ds, [mtd.split(ds, 7), mtd.parts(str(d / "part*.mtab"))], {}),
        (t, [mtd.split(t, 7), mtd.split(s, 5), mtd.parts(str(td / "st*.mtab"))], {}),
        (ds, [mtd.split(ds, 5), mtd.parts(str(d / "part*.mtab"))], dict(design=False, weight="PERWT")),
        (ds, [mtd.split(ds, 3)], dict(design=False)),
    ]


MODELS = [
    ("INCTOT ~ AGE + factor(SEX) + factor(EDUC)", "gaussian", {}),
    ("EMPSTAT(1) ~ AGE(r: 16-24; 25-54; 55-*) + factor(SEX)", "logit", dict(filter="AGE(16-*)")),
    ("INCWAGE ~ factor(MARST) * factor(SEX)", "poisson", dict(filter="INCWAGE<999998")),
    # Too many combinations for a cube: fitted record by record, a round per
    # pass.
    ("INCTOT ~ AGE + INCWAGE + factor(SEX)", "gaussian", dict(filter="INCWAGE<999998")),
    ("EMPSTAT(1) ~ INCTOT + AGE + factor(SEX)", "logit", dict(filter="AGE(16-*) INCTOT<9999999")),
]


def model_close(got, want):
    """A model over parts against the whole: every coefficient, SE, t, p and
    interval, the df, n, the Wald test (1e-9; p 1e-6); the covariance
    matrix to 1e-9 of √(V_ii·V_jj) (an off-diagonal element near 0 is a
    difference of large sums: element-wise, its last digits move)."""
    for k in ("dataset", "fitted_on"):
        got.pop(k, None), want.pop(k, None)
    c, v = got.pop("covariance"), want.pop("covariance")
    assert len(c) == len(v)
    for i in range(len(v)):
        for j in range(len(v)):
            assert abs(c[i][j] - v[i][j]) <= 1e-9 * (v[i][i] * v[j][j]) ** 0.5, (i, j)
    close(got, want)


@pytest.mark.parametrize("formula,family,kw", MODELS, ids=[m[1] for m in MODELS])
def test_models_over_parts_equal_the_whole(data, taylor, client, formula, family, kw):
    """A model over parts is fitted on the merged cube of its variables;
    under replicate weights the refits give its SEs in one round, under a
    Taylor design (and weighted without one: HC0) a second round sums the
    fit's scores per PSU (a PSU cut by a range's edge merged by key). A
    model on too many combinations is fitted record by record: a round
    counts the records, one per IRLS step (and per step of the replicates'
    refits), then the scores or the replicate weights' rank. Over ranges
    of records, shuffled records and datasets, on the cluster and here: the
    whole dataset's model."""
    for whole_ds, partses, extra in design_cases(data, taylor):
        whole = mt.open(whole_ds).regress(formula, family=family, **kw, **extra).to_dict()
        for i, parts in enumerate(partses):
            c = client if i % 2 else None
            got = mtd.on(c, parts, fan_in=3).regress(formula, family=family, **kw, **extra).to_dict()
            assert got["method"] == whole["method"], (whole_ds, extra)
            assert got["fitted_on"] == whole["fitted_on"], (whole_ds, extra)
            model_close(got, dict(whole))


def test_a_model_of_a_small_domain_takes_its_df_from_the_parts_records(data, client):
    """A domain with fewer cells than replicate weights: its df is the rank
    of its records' replicate weights (R's degf of the subset), found by a
    second round in which each part gives a basis of its own."""
    _, ds, _ = data
    # 1,138 records (rank 8: df 7), and 4 (rank 4: df 3), each in 2 cells.
    for flt, df in [("STATEFIP(6) AGE(30-31)", 7), ("STATEFIP(10) AGE(40) MARST(1)", 3)]:
        whole = mt.open(ds).regress("INCTOT ~ factor(SEX)", filter=flt).to_dict()
        assert whole["design"]["df"] == df
        for c, parts in [(None, mtd.split(ds, 4)), (client, mtd.split(ds, 9))]:
            got = mtd.on(c, parts).regress("INCTOT ~ factor(SEX)", filter=flt).to_dict()
            assert got["design"]["df"] == df
            model_close(got, dict(whole))


def test_a_model_on_cells_in_one_dataset_and_on_records_in_another_is_fitted_on_records(tmp_path):
    """Datasets (or a catalog's parts, written as datasets with their own
    stored ranges) whose model fits a cube in some and not in others: the
    merged parts count their records again and the model is fitted record
    by record over all of them: the answer of the datasets as one."""
    d = tmp_path
    a = "".join(f"{i % 7},{i % 3}\n" for i in range(60))
    b = "".join(f"{i % 7},{i * 1000}\n" for i in range(5000))
    for n, body in [("a", a), ("b", b), ("ab", a + b)]:
        (d / f"{n}.csv").write_text("Y,X\n" + body)
        cli("import", d / f"{n}.csv", d / f"{n}.mtab")
    assert mt.open(str(d / "a.mtab")).regress("Y ~ X", max_cells=100).to_dict()["fitted_on"] == "cells"
    whole = mt.open(str(d / "ab.mtab")).regress("Y ~ X", max_cells=100).to_dict()
    got = mtd.on(None, [mtd.Part(str(d / "a.mtab")), mtd.Part(str(d / "b.mtab"))]).regress(
        "Y ~ X", max_cells=100).to_dict()
    assert got["fitted_on"] == whole["fitted_on"] == "records"
    model_close(got, whole)


@pytest.mark.parametrize("by", [[], ["SEX", "MARST"]], ids=["total", "by"])
def test_ratios_over_parts_equal_the_whole(data, taylor, client, by):
    """A ratio over parts: each part's per-group totals (and replicates'),
    under a Taylor design its PSUs' totals by stratum — a PSU cut by a
    range's edge kept open and merged by key — merged exactly; over ranges,
    shuffled records, datasets, on the cluster and here: the whole
    dataset's ratio (which test_models checks against R)."""
    for whole_ds, partses, extra in design_cases(data, taylor):
        whole = mt.open(whole_ds).ratio("INCTOT", "AGE", by, filter="INCTOT<9999999", **extra).to_dict()
        for i, parts in enumerate(partses):
            c = client if i % 2 else None
            got = mtd.on(c, parts, fan_in=3).ratio("INCTOT", "AGE", by, filter="INCTOT<9999999",
                                                   **extra).to_dict()
            got.pop("dataset"), whole.pop("dataset", None)
            close(got, whole)


def test_correlations_over_parts_equal_the_whole(data, taylor, client):
    """Correlations over parts: a round per scan (means; centred cross
    products with the replicates'; under a Taylor design or weighted
    without one, each record's influence totalled by PSU), each merged:
    the whole dataset's matrix, SEs, df and intervals."""
    for whole_ds, partses, extra in design_cases(data, taylor):
        whole = mt.open(whole_ds).corr("INCTOT", "AGE", "UHRSWORK", filter="INCTOT<9999999",
                                       **extra).to_dict()
        whole.pop("dataset")
        for i, parts in enumerate(partses):
            c = client if i % 2 else None
            got = mtd.on(c, parts, fan_in=3).corr("INCTOT", "AGE", "UHRSWORK", filter="INCTOT<9999999",
                                                  **extra).to_dict()
            got.pop("dataset")
            close(got, whole)


def test_means_compared_over_parts_equal_the_whole(data, taylor, client):
    """Means compared with a base group over parts: the means from the
    merged cube, the differences (and their Wald test) from the comparison's
    model over the same parts, in its rounds (its scores under a Taylor
    design): the whole dataset's."""
    for whole_ds, partses, extra in design_cases(data, taylor):
        kw = dict(by="MARST", diff="1", filter="INCTOT<9999999", **extra)
        whole = mt.open(whole_ds).means("INCTOT", **kw).to_dict()
        whole.pop("dataset")
        for i, parts in enumerate(partses):
            c = client if i % 2 else None
            got = mtd.on(c, parts, fan_in=3).means("INCTOT", **kw).to_dict()
            got.pop("dataset")
            assert got["comparison"]["differences"], whole_ds
            close(got, whole)


def test_shares_compared_and_tests_over_parts_equal_the_whole(data, taylor, client):
    """Shares compared across columns over parts (a round for the table's
    row categories, then each row's model in its rounds: its scores under a
    Taylor design) and one-sample tests (the tests' sums with their PSUs
    merged by key; under replicate weights each group's basis of its
    replicate weights): the whole dataset's answers, for every design and
    way of cutting it."""
    for whole_ds, partses, extra in design_cases(data, taylor):
        asks = [("tab", ("MARST", "SEX"), dict(diff="2", filter="AGE(18-*)", **extra)),
                ("means", ("INCTOT",), dict(by="SEX", test_mean=20000.0, filter="INCTOT<9999999",
                                            **extra))]
        for kind, args, kw in asks:
            whole = getattr(mt.open(whole_ds), kind)(*args, **kw).to_dict()
            whole.pop("dataset")
            assert whole.get("comparisons") or whole.get("test"), (kind, whole_ds)
            for i, parts in enumerate(partses):
                c = client if i % 2 else None
                got = getattr(mtd.on(c, parts, fan_in=3), kind)(*args, **kw).to_dict()
                got.pop("dataset")
                close(got, whole)


def test_parts_and_rounds_answer_only_their_own_request(taylor):
    """Partial results, and rounds, carry the request they are of: merging,
    finishing or computing a round under another request (another formula,
    family, filter, weight, analysis) is refused, never answered under the
    other request's labels."""
    _, _, t, _ = taylor
    parts = mtd.split(t, 3)
    spec = lambda **kw: json.dumps({"analysis": "regress", "formula": "INCTOT ~ AGE + factor(SEX)",
                                    "family": "gaussian", **kw})
    a = spec()
    merged = mtd.merge(*[mtd.partial(p, a) for p in parts])
    rnd = mtd.step(merged, a)
    assert isinstance(rnd, bytes)  # the Taylor scores' round
    for other in (spec(formula="INCTOT ~ AGE + factor(MARST)"), spec(family="poisson"),
                  spec(filter="AGE(20-*)"), json.dumps({"analysis": "ratio", "numerator": "INCTOT",
                                                        "denominator": "AGE"})):
        with pytest.raises(mt.QueryError, match="another request"):
            mtd.step(merged, other)
        with pytest.raises(mt.QueryError, match="another request"):
            mtd.partial(parts[0], other, rnd)
        with pytest.raises(mt.QueryError, match="another request"):
            mtd.merge(mtd.partial(parts[0], a), mtd.partial(parts[1], other))
    c1 = json.dumps({"analysis": "corr", "vars": ["INCTOT", "AGE"]})
    c2 = json.dumps({"analysis": "corr", "vars": ["INCWAGE", "AGE"]})
    r1 = mtd.step(mtd.merge(*[mtd.partial(p, c1) for p in parts]), c1)
    with pytest.raises(mt.QueryError, match="another request"):
        mtd.partial(parts[0], c2, r1)


def test_refused_requests_fail_on_the_client_before_submission(data, client):
    """A request the parts refuse (medians over parts, an unknown variable)
    fails with microtab's own error before any task reaches the cluster:
    the scheduler sees no task of it."""
    _, ds, _ = data
    q = mtd.on(client, mtd.split(str(ds), 4))
    before = len(client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.task_prefixes)))
    with pytest.raises(mt.QueryError, match="quantiles are answered over one whole dataset"):
        q.means("INCTOT", by="SEX", median=True)
    with pytest.raises(mt.QueryError, match="unknown variable 'NOPE'"):
        q.tab("SEX", "NOPE")
    after = client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
    assert len(after) == before, after


def test_workers_count_on_their_share_of_the_host_cores(data, client):
    """Two worker processes on this host: each part is counted on
    cores // 2 threads (hand-computed from the host's cores), unless
    RAYON_NUM_THREADS is set; the answer is the same either way."""
    _, ds, _ = data
    cores = len(os.sched_getaffinity(0))
    hosts = {}
    for w in client.scheduler_info()["workers"]:
        hosts[mtd._host(w)] = hosts.get(mtd._host(w), 0) + 1
    assert hosts == {"127.0.0.1": 2}
    # As a task on each worker (as the parts run).
    got = [client.submit(mtd._share, hosts, pure=False, workers=[w]).result()
           for w in client.scheduler_info()["workers"]]
    assert got == [max(1, cores // 2)] * 2, got
    # Off a worker: the process's own pool.
    assert mtd._share(hosts) is None
    whole = strip(mt.open(ds).tab("SEX", "EDUC", pct="col").to_dict())
    for threads in (None, 1, 3):
        t = mtd.on(client, mtd.split(str(ds), 3), threads=threads).tab("SEX", "EDUC", pct="col")
        assert strip(t.to_dict()) == whole
    with pytest.raises(ValueError, match="threads must be 1 to 1024"):
        mtd.on(client, mtd.split(str(ds), 3), threads=0)


def test_partials_with_sums_beyond_64_bits_merge(tmp_path, client):
    """Exact partial sums of w·x² beyond 2^64 (incomes of a whole census
    year) cross between workers as JSON text (a JSON value cannot hold
    them): the mean and SD over parts equal numpy's over all records."""
    import numpy as np
    x = [5_000_000_000, 7_000_000_001, 5_000_000_000, 123, 9_000_000_000_000, 4]
    w = [3, 1, 2, 5, 7, 1]
    csv = tmp_path / "big.csv"
    csv.write_text("X,W\n" + "".join(f"{a},{b}\n" for a, b in zip(x, w)))
    ds = mt.import_csv(csv, tmp_path / "big.mtab")
    assert sum(b * a * a for a, b in zip(x, w)) > 2 ** 64
    want = np.average(np.array(x, dtype=float), weights=w)
    for c in (None, client):
        m = mtd.on(c, mtd.split(ds.path, 3)).means("X", weight="W").to_dict()
        assert m["total"]["mean"] == pytest.approx(want, rel=1e-12)
        assert m["total"]["sum_weights"] == sum(w)
