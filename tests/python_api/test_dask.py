"""microtab.dask on a real Dask cluster (a LocalCluster of two worker
processes on 127.0.0.1, no dashboard, started here): tables over parts of
one dataset and over several datasets equal the single-machine answer bit
for bit (standard errors, z and Rao–Scott included) and DuckDB's counts;
a worker killed during a query is replaced and the answer is still exact."""

import json
import os
import signal
import time

import duckdb
import pytest

import microtab as mt

distributed = pytest.importorskip("distributed")
import microtab.dask as mtd  # noqa: E402
from test_api import cli  # noqa: E402


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("dask")
    csv = d / "c.csv"
    cli("gen", "census", "--rows", "400000", "--seed", "4", "--repweights", "8", "--out", csv)
    ds = d / "all.mtab"
    cli("import", csv, ds, "--missing", "INCTOT=9999999")
    cli("design", ds, "--weight", "PERWT", "--repweights", "REPWTP1-REPWTP8")
    # Three datasets (states 1–20, 21–40, 41–56) with the same design.
    for i, f in enumerate(["STATEFIP(1-20)", "STATEFIP(21-40)", "STATEFIP(41-56)"]):
        cli("subset", ds, d / f"part{i}.mtab", "--filter", f)
    con = duckdb.connect()
    con.execute(f"CREATE TABLE c AS SELECT * FROM read_csv('{csv}', header=true, "
                f"types={{'PERWT': 'DECIMAL(18,2)'}})")
    return d, ds, con


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


def test_taylor_parts_are_refused_clearly(data, tmp_path):
    d, ds, _ = data
    csv = tmp_path / "t.csv"
    cli("gen", "census", "--rows", "20000", "--seed", "2", "--strata", "--out", csv)
    t = tmp_path / "t.mtab"
    cli("import", csv, t)
    cli("design", t, "--weight", "PERWT", "--strata", "STRATA", "--cluster", "SERIAL", "--lonely-psu", "adjust")
    with pytest.raises(mt.MicrotabError, match="(?i)taylor|whole dataset"):
        mtd.on(None, mtd.split(t, 2)).tab("SEX", "EDUC")
    # The partial result is JSON any worker can read.
    p = mtd.partial(mtd.Part(str(ds)), json.dumps({"analysis": "freq", "var": "SEX"}))
    assert json.loads(p)["cube"]


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
