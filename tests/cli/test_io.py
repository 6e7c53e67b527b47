"""Read paths and I/O settings: every read path gives DuckDB's answers, and
`microtab tune` writes settings that `info` and queries then use."""

import json
import os
import re

import pytest

from conftest import approx, run, run_json
from test_tab import check_table


@pytest.mark.parametrize("path", ["auto", "mmap", "pread", "direct", "inline"])
def test_every_read_path_matches_duckdb(census, path):
    env = dict(os.environ, MICROTAB_READ_PATH=path, MICROTAB_SEGMENT_BYTES="65536")
    res = run_json("tab", census.ds, "RACE", "EMPSTAT", "--weight", "PERWT",
                   "--filter", "AGE(25-64)", env=env)
    check_table(res["tables"][0],
                census.cells("RACE", "EMPSTAT", weight="PERWT", extra="AGE BETWEEN 25 AND 64"),
                None, weighted=True)
    m = run_json("means", census.ds, "INCTOT", "--by", "EDUC", "--weight", "PERWT", env=env)
    w, swx = census.one(
        f"SELECT sum(PERWT)::DOUBLE, sum(PERWT * INCTOT)::DOUBLE FROM census "
        f"WHERE {census.where('INCTOT', 'EDUC', weight='PERWT')}")
    assert m["total"]["sum_weights"] == approx(w)
    assert m["total"]["mean"] == approx(swx / w)


def test_tune_writes_settings_that_info_and_queries_use(census, tmp_path):
    cfg = tmp_path / "io.json"
    env = dict(os.environ, MICROTAB_CONFIG=str(cfg))
    p = run("tune", "--dir", tmp_path, "--rows", "300000", "--runs", "1", env=env)
    assert "chosen: read path" in p.stdout
    settings = json.loads(cfg.read_text())
    assert settings["read_path"] in ("auto", "mmap", "pread", "direct", "inline")
    assert settings["block_size"] >= 4096 and settings["segment_bytes"] >= 4096
    assert settings["tuned"]["rows"] == 300000
    # The test dataset is gone.
    assert not [x for x in tmp_path.iterdir() if x.name.endswith(".mtab")]
    info = run_json("info", census.ds, env=env)["io_settings"]
    assert info["read_path"] == settings["read_path"]
    assert info["block_size"] == settings["block_size"]
    assert info["segment_bytes"] == settings["segment_bytes"]
    assert info["origin"] == "tuned" and info["file"] == str(cfg) and info["env"] == []
    # Environment overrides win and are named.
    env2 = dict(env, MICROTAB_READ_PATH="pread")
    info2 = run_json("info", census.ds, env=env2)["io_settings"]
    assert info2["read_path"] == "pread" and info2["env"] == ["MICROTAB_READ_PATH"]
    assert info2["auto_here"] is None
    # With auto, info says which paths it takes for this dataset's disk:
    # cold inline exactly when the device's read-ahead is at least 1 MiB.
    info3 = run_json("info", census.ds, env=dict(env, MICROTAB_READ_PATH="auto"))["io_settings"]
    here = info3["auto_here"]
    assert here.startswith("warm inline, cold ")
    ra = re.search(r"read-ahead (\d+) KiB", here)
    if ra:
        assert here.startswith("warm inline, cold inline" if int(ra.group(1)) >= 1024
                               else "warm inline, cold pread")
    else:
        assert "unknown" in here and "cold pread" in here
    # Queries still answer correctly under the tuned settings.
    res = run_json("freq", census.ds, "EDUC", "--weight", "PERWT", env=env)
    oracle = census.freq("EDUC", weight="PERWT")
    assert [(r["value"], r["count"]) for r in res["rows"]] == [(v, n) for v, n, _ in oracle]
    assert [r["weighted"] for r in res["rows"]] == approx([s for _, _, s in oracle])


def test_bad_settings_file_is_a_clear_error(census, tmp_path):
    cfg = tmp_path / "io.json"
    cfg.write_text("{not json")
    env = dict(os.environ, MICROTAB_CONFIG=str(cfg))
    p = run("freq", census.ds, "SEX", env=env, ok=False)
    assert p.returncode == 1
    assert str(cfg) in p.stderr and p.stderr.startswith("error:")


def test_plain_import_reads_with_numpy_and_answers_the_same(census, tmp_path):
    """`import --plain` stores plain arrays (numpy.memmap at offset 4096); the
    default bit-packed files hold the same values (read here by numpy, not
    microtab), and every read path answers DuckDB's way on the plain files."""
    import numpy as np

    from conftest import COLUMN_DTYPES, read_column_file

    plain = tmp_path / "plain.mtab"
    run("import", census.csv, plain, "--plain", "--missing", "INCTOT=9999999")
    mp = json.loads((plain / "manifest.json").read_text())
    mk = json.loads((census.ds / "manifest.json").read_text())
    rows = mp["rows"]
    packed_vars = {v["name"]: v for v in mk["variables"]}
    n_packed = 0
    for v in mp["variables"]:
        assert "packing" not in v
        dt = np.dtype(COLUMN_DTYPES[v["type"]])
        assert v["bytes"] == rows * dt.itemsize
        values = np.memmap(plain / v["file"], dtype=dt, mode="r", offset=4096, shape=(rows,))
        k = packed_vars[v["name"]]
        n_packed += "packing" in k
        assert np.array_equal(read_column_file(census.ds / k["file"], k, rows), values), v["name"]
    assert n_packed >= 15  # nearly every census variable needs fewer bits than its type
    for path in ["mmap", "pread", "direct", "inline"]:
        env = dict(os.environ, MICROTAB_READ_PATH=path, MICROTAB_SEGMENT_BYTES="65536")
        res = run_json("tab", plain, "RACE", "EMPSTAT", "--weight", "PERWT",
                       "--filter", "AGE(25-64)", env=env)
        check_table(res["tables"][0],
                    census.cells("RACE", "EMPSTAT", weight="PERWT", extra="AGE BETWEEN 25 AND 64"),
                    None, weighted=True)
