"""Catalogs of parts (`microtab split`, `import --parts`) are known by what
their parts' manifests say, not by paths or sizes (docs/DISTRIBUTED.md,
"Parts"): a part listed twice (a symbolic link, `./` and `..` paths, a
hard-linked or copied directory, an edited entry with consistent totals),
a part replaced by a same-size part of another split or dataset, a part
imported again after the split and reordered parts are refused with an
error naming the part and what disagrees — never counted twice. DuckDB's
counts of the source CSV are the oracle for every answer that is given.

Killed splits and imports with parts leave full-size staging copies; the
next split or import into the same catalog removes them and answers as
DuckDB does."""

import json
import os
import shutil
import subprocess
import time

import duckdb
import pytest

from conftest import BIN, INCTOT_NA, run, run_json
from test_atomic import _kill

PARTS = 4  # 200,000 records: four parts of 50,000, all the same size


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

def freq_counts(path, var="EDUC"):
    """{value: count} of microtab's freq over ``path`` (a catalog)."""
    res = run_json("freq", path, var)
    return {r["value"]: r["count"] for r in res["rows"] if not r.get("missing")}


def duck_counts(con, csv, var="EDUC", where="TRUE"):
    return dict(con.execute(
        f"SELECT {var}, count(*) FROM read_csv(?, header=true) WHERE {var} IS NOT NULL AND {where} "
        "GROUP BY 1", [str(csv)]).fetchall())


def manifest(part):
    return json.loads((part / "manifest.json").read_text())


def catalog(cat):
    return json.loads((cat / "catalog.json").read_text())


def write_catalog(cat, c):
    (cat / "catalog.json").write_text(json.dumps(c, indent=2))


def refused(path, *needles):
    """freq over ``path`` fails with one clear message holding ``needles``."""
    p = run("freq", path, "EDUC", ok=False)
    assert p.stdout == "", p.stdout
    assert "panicked" not in p.stderr and "RUST_BACKTRACE" not in p.stderr, p.stderr
    for n in needles:
        assert n in p.stderr, (n, p.stderr)
    return p.stderr


@pytest.fixture(scope="module")
def split4(census, tmp_path_factory):
    """census.mtab (200,000 records) split into four parts of 50,000, kept
    pristine; tests work on copies (``fresh``)."""
    d = tmp_path_factory.mktemp("catalog")
    cat = d / "census.parts"
    run("split", census.ds, cat, "--parts", PARTS)
    return d, cat


@pytest.fixture
def fresh(split4, tmp_path):
    """A copy of the pristine catalog (the copy keeps each part's id: the
    copy is the same parts)."""
    _, cat = split4
    out = tmp_path / "c.parts"
    shutil.copytree(cat, out, symlinks=True)
    return out


# --------------------------------------------------------------------------
# what a catalog records, and that an intact one answers as DuckDB
# --------------------------------------------------------------------------

def test_catalog_records_each_parts_identity(census, split4):
    """Version 2: each entry carries the part's dataset id, each part's
    manifest says which records of which dataset it holds, and the
    catalog answers as DuckDB counts the CSV."""
    _, cat = split4
    c = catalog(cat)
    assert c["microtab_parts"] == 2
    src = manifest(census.ds)
    assert len(src["id"]) == 32 and int(src["id"], 16) >= 0
    assert c["source_id"] == src["id"]
    assert [p["rows"] for p in c["parts"]] == [50_000] * PARTS
    ids = set()
    for p in c["parts"]:
        m = manifest(cat / p["path"])
        assert m["id"] == p["id"] and m["id"] != src["id"]
        assert m["part_of"] == {"dataset": src["id"], "first_record": p["first_record"], "rows": p["rows"]}
        ids.add(m["id"])
    assert len(ids) == PARTS
    assert freq_counts(cat) == duck_counts(census.con, census.csv)


def test_changes_in_place_keep_a_part(census, fresh):
    """Missing codes and labels set on each part keep
    its id (the same records): the catalog still answers, weighted as
    DuckDB sums."""
    for p in sorted(fresh.glob("part-*.mtab")):
        before = manifest(p)["id"]
        run("missing", p, "INCTOT", INCTOT_NA)
        run("label", p, "SEX", "1=Male", "2=Female")
        assert manifest(p)["id"] == before
    res = run_json("freq", fresh, "SEX", "--weight", "PERWT")
    want = dict(census.con.execute(
        "SELECT SEX, sum(PERWT)::DOUBLE FROM census GROUP BY 1").fetchall())
    got = {r["value"]: r["weighted"] for r in res["rows"]}
    assert got.keys() == want.keys()
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=1e-12)


# --------------------------------------------------------------------------
# one part listed twice
# --------------------------------------------------------------------------

def test_a_symbolic_link_to_another_part_is_refused(census, fresh):
    """part-002.mtab replaced by a link to part-001.mtab (same size, the
    catalog untouched: its totals still add up)."""
    shutil.rmtree(fresh / "part-002.mtab")
    os.symlink("part-001.mtab", fresh / "part-002.mtab")
    refused(fresh, "part-001.mtab and part-002.mtab are the same dataset", "counted twice")


@pytest.mark.parametrize("alias", ["./part-001.mtab", "part-003.mtab/../part-001.mtab", "part-001.mtab/",
                                   "part-001.mtab/.", "ABS"])
def test_path_variants_of_one_part_are_refused(census, fresh, alias):
    """The catalog edited so that the second entry names part 1 again by
    another spelling (first records and totals kept consistent)."""
    c = catalog(fresh)
    c["parts"][1]["path"] = str(fresh / "part-001.mtab") if alias == "ABS" else alias
    c["parts"][1]["id"] = c["parts"][0]["id"]
    write_catalog(fresh, c)
    err = refused(fresh)
    assert ("the same dataset" in err and "counted twice" in err) or "not the name of a directory inside the catalog" in err, err


def test_an_entry_listed_twice_with_consistent_totals_is_refused(census, fresh):
    """Entry 2 edited to be entry 1 (its path and id), first records and
    the total kept consistent."""
    c = catalog(fresh)
    c["parts"][1].update(path=c["parts"][0]["path"], id=c["parts"][0]["id"])
    write_catalog(fresh, c)
    refused(fresh, "part-001.mtab and part-001.mtab are the same dataset")


@pytest.mark.parametrize("how", ["copy", "hardlink"])
def test_a_copied_or_hard_linked_part_is_refused(census, fresh, how):
    """part-002.mtab replaced by a copy of part-001.mtab (cp -r, or cp -al:
    every file a hard link): another path, the same dataset id."""
    shutil.rmtree(fresh / "part-002.mtab")
    shutil.copytree(fresh / "part-001.mtab", fresh / "part-002.mtab",
                    copy_function=os.link if how == "hardlink" else shutil.copy2)
    refused(fresh, "part-001.mtab and part-002.mtab are the same dataset", "dataset id", "counted twice")
    # Even with the catalog's id edited to match, still the same dataset.
    c = catalog(fresh)
    c["parts"][1]["id"] = c["parts"][0]["id"]
    write_catalog(fresh, c)
    refused(fresh, "are the same dataset")


# --------------------------------------------------------------------------
# a part replaced by another of the same size
# --------------------------------------------------------------------------

def test_a_same_size_part_of_another_split_is_refused(census, fresh, tmp_path):
    """part-002 (records 50,001–100,000) replaced by part-003 of another
    split of the same dataset (records 100,001–150,000, the same size):
    refused by its id; with the catalog's id edited to match, refused by
    the records its manifest says it holds. Part 2 of the other split
    (the same records, another copy) is refused too: another dataset."""
    other = tmp_path / "other.parts"
    run("split", census.ds, other, "--parts", PARTS)
    shutil.rmtree(fresh / "part-002.mtab")
    shutil.copytree(other / "part-003.mtab", fresh / "part-002.mtab")
    refused(fresh, "part part-002.mtab is not the part the split wrote", "dataset id")
    c = catalog(fresh)
    c["parts"][1]["id"] = manifest(fresh / "part-002.mtab")["id"]
    write_catalog(fresh, c)
    refused(fresh, "part-002.mtab", "records 100001–150000", "50001–100000")
    shutil.rmtree(fresh / "part-002.mtab")
    shutil.copytree(other / "part-002.mtab", fresh / "part-002.mtab")
    refused(fresh, "part-002.mtab", "dataset id")


def test_a_same_size_part_of_another_dataset_is_refused(census, fresh, tmp_path):
    """A part of another dataset with the same variables and 50,000-record
    parts (the census records in another order): refused by its id, and
    with the id edited to match, by its source dataset."""
    csv = tmp_path / "shuffled.csv"
    duckdb.sql(f"COPY (SELECT * FROM read_csv('{census.csv}') ORDER BY AGE, SERIAL, PERNUM) "
               f"TO '{csv}' (HEADER)")
    ds = tmp_path / "shuffled.mtab"
    run("import", csv, ds, "--missing", f"INCTOT={INCTOT_NA}")
    run("split", ds, tmp_path / "s.parts", "--parts", PARTS)
    shutil.rmtree(fresh / "part-003.mtab")
    shutil.copytree(tmp_path / "s.parts" / "part-003.mtab", fresh / "part-003.mtab")
    refused(fresh, "part part-003.mtab is not the part the split wrote", "dataset id")
    c = catalog(fresh)
    c["parts"][2]["id"] = manifest(fresh / "part-003.mtab")["id"]
    write_catalog(fresh, c)
    refused(fresh, "part-003.mtab", "source dataset id", manifest(ds)["id"], manifest(census.ds)["id"])


def test_a_part_imported_again_after_the_split_is_refused(census, fresh, tmp_path):
    """part-002's own records exported (DuckDB, records 50,001–100,000 of
    the CSV) and imported over it with --force: the same records and size,
    but a new dataset. Refused: the catalog cannot know it holds them."""
    csv = tmp_path / "p2.csv"
    duckdb.sql(f"COPY (SELECT * FROM read_csv('{census.csv}') LIMIT 50000 OFFSET 50000) TO '{csv}' (HEADER)")
    run("import", csv, fresh / "part-002.mtab", "--force", "--missing", f"INCTOT={INCTOT_NA}")
    assert run_json("info", fresh / "part-002.mtab")["rows"] == 50_000
    refused(fresh, "part part-002.mtab is not the part the split wrote", "imported again")


def test_reordered_parts_are_refused(census, fresh):
    """Entries 1 and 2 swapped with their first records renumbered (every
    total consistent), and the directories swapped under an unchanged
    catalog: refused either way."""
    pristine = (fresh / "catalog.json").read_text()
    c = catalog(fresh)
    a, b = c["parts"][0], c["parts"][1]
    a["path"], b["path"] = b["path"], a["path"]
    a["id"], b["id"] = b["id"], a["id"]
    write_catalog(fresh, c)
    refused(fresh, "part part-002.mtab is not the part the split wrote", "records 50001–100000", "1–50000")
    (fresh / "catalog.json").write_text(pristine)
    assert freq_counts(fresh) == duck_counts(census.con, census.csv)  # as written: answers
    os.rename(fresh / "part-001.mtab", fresh / "tmp")
    os.rename(fresh / "part-002.mtab", fresh / "part-001.mtab")
    os.rename(fresh / "tmp", fresh / "part-002.mtab")
    refused(fresh, "part part-001.mtab is not the part the split wrote", "dataset id")


def test_old_catalog_is_refused_with_how_to_rewrite_it(census, fresh):
    """A version 1 catalog (no ids) is refused, saying how to write it
    again; split again with --force, it answers as DuckDB."""
    c = catalog(fresh)
    c["microtab_parts"] = 1
    c.pop("source_id")
    for p in c["parts"]:
        p.pop("id")
    write_catalog(fresh, c)
    refused(fresh, "catalog of version 1", "split the source dataset again")
    run("split", census.ds, fresh, "--parts", 3, "--force")
    assert catalog(fresh)["microtab_parts"] == 2
    assert freq_counts(fresh) == duck_counts(census.con, census.csv)
    assert not [p for p in fresh.parent.iterdir() if p.name.startswith(".")]


# --------------------------------------------------------------------------
# several datasets: one dataset under two paths
# --------------------------------------------------------------------------

def test_one_dataset_under_two_paths_is_refused(census, tmp_path):
    """A pattern matching a dataset and its copy (the CLI), open_many and
    microtab.dask over a dataset and its copy, link or `..` path: refused
    by the dataset's id, not its path; two different datasets answer as
    DuckDB."""
    d = tmp_path / "years"
    d.mkdir()
    run("subset", census.ds, d / "a.mtab", "--filter", "SEX(1)")
    shutil.copytree(d / "a.mtab", d / "b.mtab")
    p = run("freq", str(d / "*.mtab"), "EDUC", ok=False)
    assert "same dataset twice" in p.stderr and "counted twice" in p.stderr, p.stderr
    import microtab as mt
    import microtab.dask as mtd
    for other in [d / "b.mtab", d / ".." / "years" / "a.mtab"]:
        with pytest.raises(mt.QueryError, match="same dataset"):
            mt.open_many([d / "a.mtab", other])
        with pytest.raises(mt.QueryError, match="counted twice"):
            mtd.on(None, mtd.parts([str(d / "a.mtab"), str(other)]))
    os.symlink(d / "a.mtab", tmp_path / "link.mtab")
    with pytest.raises(mt.QueryError, match="same dataset"):
        mt.open_many([d / "a.mtab", tmp_path / "link.mtab"])
    shutil.rmtree(d / "b.mtab")
    run("subset", census.ds, d / "b.mtab", "--filter", "SEX(2)")
    assert freq_counts(str(d / "*.mtab")) == duck_counts(census.con, census.csv)
    got = mt.open_many([d / "a.mtab", d / "b.mtab"]).freq("EDUC").to_dict()
    assert {r["value"]: r["count"] for r in got["rows"] if not r.get("missing")} == \
        duck_counts(census.con, census.csv)


def test_python_refuses_a_duplicated_part_of_a_catalog(census, fresh):
    """open_many and microtab.dask.parts take the catalog's checks."""
    import microtab as mt
    import microtab.dask as mtd
    shutil.rmtree(fresh / "part-004.mtab")
    shutil.copytree(fresh / "part-003.mtab", fresh / "part-004.mtab")
    with pytest.raises(mt.MicrotabError, match="part-003.mtab and part-004.mtab are the same dataset"):
        mt.open_many(fresh)
    with pytest.raises(mt.MicrotabError, match="same dataset"):
        mtd.parts(str(fresh))


# --------------------------------------------------------------------------
# killed split / import --parts: the next writer removes the leftovers
# --------------------------------------------------------------------------

KILL_AT = ["first-write", 0.3, 0.6, 0.9]


def _leftovers(parent):
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def _run_killed(cmd, at, full_seconds, parent):
    """Starts ``cmd``, SIGKILLs it at ``at`` (the first staging directory
    seen, the first whose name starts with ``at``, or a fraction of a full
    run); True when it was killed."""
    proc = subprocess.Popen([str(BIN), *map(str, cmd)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    t0 = time.monotonic()
    if isinstance(at, str):
        # "first-write": any staging; else the first staging named so.
        prefix = "" if at == "first-write" else at
        while proc.poll() is None and time.monotonic() - t0 < 2 * full_seconds:
            if any(n.startswith(prefix) for n in _leftovers(parent)):
                time.sleep(0.05)
                break
            time.sleep(0.002)
    else:
        time.sleep(max(0.0, at * full_seconds - (time.monotonic() - t0)))
    return _kill(proc)


@pytest.fixture(scope="module")
def big_oracle(big_census):
    con = duckdb.connect()
    return big_census, duck_counts(con, big_census.csv)


@pytest.mark.parametrize("force", [False, True], ids=["new", "replacing"])
def test_killed_split_leftovers_are_removed_by_the_next(big_oracle, tmp_path, force):
    """A split of 2,000,000 records SIGKILLed at several moments leaves its
    staging (as large as the data) beside OUT and OUT as it was (absent,
    or the old catalog answering as DuckDB); the next split into OUT
    removes every leftover and answers as DuckDB counts the CSV."""
    big, want = big_oracle
    out = tmp_path / "big.parts"
    t0 = time.monotonic()
    run("split", big.ds, out, "--parts", 8, timeout=600)
    full = time.monotonic() - t0
    killed = 0
    for at in KILL_AT:
        if not force and out.exists():
            shutil.rmtree(out)
        if not _run_killed(["split", big.ds, out, "--parts", 5, "--force"], at, full, tmp_path):
            continue
        left = _leftovers(tmp_path)
        if not left:
            # Killed after the split published (a loaded machine runs it
            # faster or slower than the first): OUT is whole.
            assert len(catalog(out)["parts"]) == 5 and freq_counts(out) == want, at
            continue
        killed += 1
        assert all(n.startswith(".big.parts.split-") for n in left), (at, left)
        if force:
            assert freq_counts(out) == want  # the old catalog (or the new one, whole)
        else:
            assert not out.exists() or freq_counts(out) == want
        run("split", big.ds, out, "--parts", 8, "--force", timeout=600)
        assert _leftovers(tmp_path) == []
        assert len(catalog(out)["parts"]) == 8
        assert freq_counts(out) == want
    assert killed >= 2, "the split finished before it could be killed"


def test_killed_import_parts_leftovers_are_removed_by_the_next(big_oracle, tmp_path):
    """`import big.csv OUT --parts 4` SIGKILLed while importing and while
    splitting leaves the whole imported dataset and the staging of its
    parts beside OUT; the next `import --parts` into OUT removes them all
    and answers as DuckDB."""
    big, want = big_oracle
    out = tmp_path / "imp.parts"
    cmd = ["import", big.csv, out, "--parts", 4, "--missing", f"INCTOT={INCTOT_NA}", "--force"]
    t0 = time.monotonic()
    run(*cmd, timeout=600)
    full = time.monotonic() - t0
    killed, seen = 0, set()
    for at in KILL_AT + [".imp.parts.split-"]:
        if not _run_killed(cmd, at, full, tmp_path):
            continue
        killed += 1
        left = _leftovers(tmp_path)
        assert left and all(n.startswith((".imp.parts.", "..imp.parts.")) for n in left), (at, left)
        seen.update(n.split("-")[0] for n in left)
        assert freq_counts(out) == want  # the catalog before
        run(*cmd, timeout=600)
        assert _leftovers(tmp_path) == []
        assert freq_counts(out) == want
    assert killed >= 2, "the import finished before it could be killed"
    # Killed while importing (its own staging) and while splitting (the
    # whole dataset and the parts' staging).
    assert {"..imp.parts.import", ".imp.parts.import", ".imp.parts.split"} <= seen, seen
