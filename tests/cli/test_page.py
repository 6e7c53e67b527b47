"""The analysis page of `microtab serve` in a real browser: Debian's
chromium, headless, driven by Selenium through chromium-driver (both
installed by scripts/test.sh). The test fills the form, runs tables,
follows shared and SDA-style URLs, browses variables and the codebook,
downloads the CSV, and checks every number on the page against DuckDB over
the source CSV (and the z-statistics against the API). Screenshots are
kept under target/test-artifacts/page/."""

import json
import os
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import census_dataset, duck_census, replicate_design, run, serve

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
if not (CHROMIUM and DRIVER):
    if os.environ.get("MICROTAB_REQUIRE_BROWSER"):
        raise RuntimeError("chromium and chromedriver are needed (apt-get install chromium chromium-driver)")
    pytest.skip("no chromium / chromedriver here (scripts/test.sh installs them)", allow_module_level=True)

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support import expected_conditions as EC  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

ART = Path(__file__).resolve().parents[2] / "target" / "test-artifacts" / "page"
# The plain dataset's title and description: markup and a script that
# must be shown as text, never run.
TITLE = 'Census <script>window.pwned = 1</script> & "sample"'
DESCRIPTION = "A synthetic census & <b>not bold</b>.\nSecond line: 30,000 records."


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    csv, ds = census_dataset(tmp_path_factory.mktemp("page"), 30000, 3, reps=4, ds="data/census.mtab")
    for labels in (["1=Male", "2=Female"], ["--var-label", "Sex of the person"]):
        run("label", ds, "SEX", *labels)
    replicate_design(ds, 4)
    run("import", csv, ds.parent / "plain.mtab", "--missing", "INCTOT=9999999")
    run("label", ds.parent / "plain.mtab", "--title", TITLE, "--description", DESCRIPTION)
    p, base = serve(ds.parent)
    yield base, duck_census(csv)
    p.terminate()
    p.wait(timeout=10)


def make_driver(mobile=False):
    o = webdriver.ChromeOptions()
    o.binary_location = CHROMIUM
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1280,1600"]:
        o.add_argument(a)
    if mobile:
        o.add_experimental_option("mobileEmulation", {
            "deviceMetrics": {"width": 390, "height": 844, "pixelRatio": 3.0}, "userAgent": "phone"})
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(DRIVER), options=o)


@pytest.fixture(scope="module")
def browser():
    d = make_driver()
    yield d
    d.quit()


def shot(d, name):
    ART.mkdir(parents=True, exist_ok=True)
    # The whole page: as tall as its content.
    h = d.execute_script("return document.documentElement.scrollHeight")
    w = d.execute_script("return window.innerWidth")
    d.set_window_size(max(w, 390), min(max(h + 120, 800), 6000))
    d.save_screenshot(str(ART / f"{name}.png"))


def wait_answer(d):
    WebDriverWait(d, 30).until(
        lambda d: d.find_element(By.ID, "status").text.startswith("Answered")
        or d.find_element(By.ID, "error").text)
    err = d.find_element(By.ID, "error").text
    return err


def page_cells(d, table=0):
    """The cells of one crosstab on the page: {(row, col): {pct, w, z, cls}}
    keyed by the categories' values as shown (first word of the header)."""
    return d.execute_script("""
      const t = document.querySelectorAll('table.xt')[arguments[0]];
      const cols = [...t.querySelectorAll('thead th')].slice(1, -1).map(th => th.textContent.split(' ')[0]);
      const out = {};
      for (const tr of t.querySelectorAll('tbody tr:not(.total)')) {
        const r = tr.querySelector('th').textContent.split(' ')[0];
        [...tr.querySelectorAll('td')].slice(0, -1).forEach((td, k) => {
          const g = (c) => td.querySelector(c)?.textContent ?? null;
          out[r + '|' + cols[k]] = {pct: g('.pct'), w: g('.w'), z: td.dataset.z ?? null, cls: td.className};
        });
      }
      return out;""", table)


def num(s):
    return float(s.replace(",", ""))


def duck_cells(con, row, col, where="TRUE", weight="PERWT", along="col"):
    rows = con.execute(f"SELECT {row}, {col}, sum({weight})::DOUBLE FROM c WHERE {where} GROUP BY ALL").fetchall()
    tot = {}
    for r, c, w in rows:
        k = c if along == "col" else r
        tot[k] = tot.get(k, 0) + w
    return {f"{r}|{c}": (w, 100 * w / tot[c if along == "col" else r]) for r, c, w in rows}


def check_against_duckdb(cells, want, sig=6):
    assert set(cells) == set(want), (sorted(cells), sorted(want))
    for k, (w, pct) in want.items():
        got = cells[k]
        assert num(got["pct"]) == pytest.approx(pct, abs=0.05 + 1e-9), (k, got, pct)
        # Weighted N shown to 6 significant digits.
        assert num(got["w"]) == pytest.approx(w, rel=10 ** (1 - sig)), (k, got, w)


def pct_boxes(d):
    """The percentages ticked in the form."""
    return [e.get_attribute("value") for e in d.find_elements(By.CSS_SELECTOR, "input[name=pct]") if e.is_selected()]


def api(base, path):
    with urllib.request.urlopen(base + path, timeout=30) as r:
        return json.loads(r.read())


def test_index_lists_datasets_and_links_to_the_page(server, browser):
    base, _ = server
    browser.get(base + "/")
    links = {a.text: a.get_attribute("href") for a in browser.find_elements(By.CSS_SELECTOR, "table.list th a")}
    assert set(links) == {"census", "plain"}
    browser.get(links["census"])
    assert browser.find_element(By.TAG_NAME, "h1").text == "census"
    assert "4 replicate weights" in browser.find_element(By.CSS_SELECTOR, ".intro p").text


def test_fill_the_form_run_and_share_the_url(server, browser):
    base, con = server
    browser.get(base + "/analysis/census")
    browser.find_element(By.ID, "f-row").send_keys("EDUC")
    browser.find_element(By.ID, "f-col").send_keys("SEX")
    browser.find_element(By.ID, "f-filter").send_keys("AGE(25-64)")
    assert pct_boxes(browser) == ["col"]  # the default
    browser.find_element(By.ID, "run").click()
    assert wait_answer(browser) == ""
    cells = page_cells(browser)
    want = duck_cells(con, "EDUC", "SEX", "AGE BETWEEN 25 AND 64")
    # Columns are shown as "1 Male": keys by value.
    check_against_duckdb(cells, want)
    # The z of every cell is the API's, and its colour its band.
    url = browser.current_url
    assert "row=EDUC" in url and "col=SEX" in url and "filter=AGE" in url
    j = api(base, "/api/v1/datasets/census/tab?" + urllib.parse.urlencode(
        {"row": "EDUC", "col": "SEX", "filter": "AGE(25-64)", "pct": "col", "z": "true"}))
    t = j["tables"][0]
    assert j["z_method"] == "design"
    for i, r in enumerate(t["rows"]):
        for k, c in enumerate(t["cols"]):
            got = cells[f"{r['value']}|{c['value']}"]
            z = t["z"][i][k]
            assert float(got["z"]) == pytest.approx(z, abs=1e-4)
            band = next((b for b, lim in (("3", 3.29), ("2", 1.96), ("1", 1.0)) if abs(z) >= lim), None)
            want_cls = f"z{'p' if z > 0 else 'n'}{band}" if band else None
            assert (want_cls in got["cls"].split()) if want_cls else not any(
                x.startswith("zp") or x.startswith("zn") for x in got["cls"].split()), (got, z)
    legend = browser.find_element(By.ID, "legend").text
    assert "design-based standard error" in legend and "Bonferroni" in legend
    shot(browser, "crosstab-design")
    # The shared URL, opened afresh, gives the same table.
    other = make_driver()
    try:
        other.get(url)
        assert wait_answer(other) == ""
        assert page_cells(other) == cells
        assert other.find_element(By.ID, "f-filter").get_attribute("value") == "AGE(25-64)"
    finally:
        other.quit()
    # Back in history returns to the empty form.
    browser.back()
    WebDriverWait(browser, 10).until(lambda d: "row=" not in d.current_url)


def test_keyboard_only_recode_and_control(server, browser):
    base, con = server
    browser.get(base + "/analysis/census")
    row = browser.find_element(By.ID, "f-row")
    row.send_keys('AGE(r: 0-17 "Child"; 18-64 "Adult"; 65-*)')
    row.send_keys(Keys.TAB, "SEX", Keys.TAB, "RACE(1,2)")
    assert browser.switch_to.active_element.get_attribute("id") == "f-control"
    browser.switch_to.active_element.send_keys(Keys.ENTER)  # submits the form
    assert wait_answer(browser) == ""
    tables = browser.find_elements(By.CSS_SELECTOR, "table.xt")
    assert len(tables) == 2  # one per RACE category kept
    for i, race in enumerate([1, 2]):
        cells = page_cells(browser, i)
        rows = con.execute(f"""SELECT CASE WHEN AGE <= 17 THEN 1 WHEN AGE <= 64 THEN 2 ELSE 3 END g, SEX,
               sum(PERWT)::DOUBLE FROM c WHERE RACE = {race} GROUP BY ALL""").fetchall()
        tot = {}
        for g, s, w in rows:
            tot[s] = tot.get(s, 0) + w
        want = {f"{g}|{s}": (w, 100 * w / tot[s]) for g, s, w in rows}
        check_against_duckdb(cells, want)
    caption = tables[0].find_element(By.TAG_NAME, "caption").text
    assert "RACE = 1" in caption


def test_sda_url_opens_the_page(server, browser):
    base, con = server
    sda = base + "/sdaweb/analysis/exec?" + urllib.parse.urlencode({
        "formid": "tbf", "sdaprog": "tables", "dataset": "census", "row": "SEX", "column": "MARST",
        "filters": "age(25-64), race(1)", "rowpct": "on", "weightlist": "PERWT", "cflevel": "90",
        "color": "on", "weightedn": "on", "ch_type": "stackedbar"})
    browser.get(sda)
    assert wait_answer(browser) == ""
    assert "/analysis/census?" in browser.current_url
    assert pct_boxes(browser) == ["row"]
    cells = page_cells(browser)
    check_against_duckdb(cells, duck_cells(con, "SEX", "MARST", "AGE BETWEEN 25 AND 64 AND RACE = 1", along="row"))
    assert "90% confidence" in browser.find_element(By.CSS_SELECTOR, "table.xt caption").text or \
        "90%" in browser.find_element(By.ID, "legend").text
    shot(browser, "sda-url")


def test_frequencies_means_chart_and_csv(server, browser):
    base, con = server
    browser.get(base + "/analysis/census?row=EDUC&show=se&show=ci")
    assert wait_answer(browser) == ""
    rows = browser.execute_script("""return [...document.querySelectorAll('table.freq tbody tr:not(.total)')]
        .map(tr => [tr.querySelector('th').textContent, ...[...tr.querySelectorAll('td')].map(td => td.textContent)])""")
    want = dict(con.execute("SELECT EDUC, count(*) FROM c GROUP BY ALL").fetchall())
    assert {int(r[0].split()[0]): int(num(r[1])) for r in rows} == want
    bars = browser.find_elements(By.CSS_SELECTOR, "svg.chart rect")
    assert len(bars) == len(want)
    assert browser.find_element(By.CSS_SELECTOR, "svg.chart").get_attribute("role") == "img"
    # The CSV download is the answer, cell by cell.
    text = browser.execute_async_script("""const done = arguments[0];
        fetch(document.getElementById('dl-csv').href).then(r => r.text()).then(done)""")
    lines = text.strip().splitlines()
    assert lines[0].startswith("value,label,missing,count,weighted,percent,weighted_se")
    got = {int(x.split(",")[0]): int(x.split(",")[3]) for x in lines[1:]}
    assert got == want
    # Means by group, with CIs, and the chart's whiskers.
    browser.get(base + "/analysis/census?kind=means&dep=INCTOT&row=SEX&show=se&show=ci")
    assert wait_answer(browser) == ""
    means = browser.execute_script("""return [...document.querySelectorAll('table.means tbody tr:not(.total)')]
        .map(tr => [tr.querySelector('th').textContent, tr.querySelector('td').textContent])""")
    want = dict(con.execute("SELECT SEX, sum(INCTOT * PERWT) / sum(PERWT) FROM c "
                            "WHERE INCTOT <> 9999999 GROUP BY ALL").fetchall())
    assert {int(s.split()[0]): num(m.replace("‡", "")) for s, m in means} == pytest.approx(
        {k: float(v) for k, v in want.items()}, rel=1e-5)
    assert len(browser.find_elements(By.CSS_SELECTOR, "svg.chart line.whisker")) == 2
    shot(browser, "means")


def test_variables_search_codebook_entry_and_use(server, browser):
    base, con = server
    browser.get(base + "/analysis/census")
    browser.find_element(By.ID, "vsearch").send_keys("sex of")
    visible = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "#vlist li") if li.is_displayed()]
    assert visible == ["SEX Sex of the person"]
    browser.find_element(By.CSS_SELECTOR, '#vlist button[data-name="SEX"]').click()
    WebDriverWait(browser, 10).until(EC.presence_of_element_located((By.CSS_SELECTOR, "#vinfo table.mini")))
    rows = browser.execute_script("""return [...document.querySelectorAll('#vinfo table.mini tbody tr')]
        .map(tr => [tr.querySelector('th').textContent, tr.querySelector('td').textContent])""")
    want = dict(con.execute("SELECT SEX, sum(PERWT)::DOUBLE FROM c GROUP BY ALL").fetchall())
    assert {int(a.split()[0]): num(b) for a, b in rows} == pytest.approx(want, rel=1e-5)
    assert "Male" in rows[0][0]
    browser.find_element(By.CSS_SELECTOR, '#vinfo button[data-field="col"]').click()
    assert browser.find_element(By.ID, "f-col").get_attribute("value") == "SEX"
    assert browser.switch_to.active_element.get_attribute("id") == "f-col"
    # The codebook page: entries, and frequencies when one is opened.
    browser.get(base + "/analysis/census/codebook")
    entry = browser.find_element(By.ID, "var-EDUC")
    entry.find_element(By.TAG_NAME, "summary").click()
    WebDriverWait(browser, 10).until(lambda d: entry.find_elements(By.CSS_SELECTOR, "table.mini"))
    n = len(entry.find_elements(By.CSS_SELECTOR, "table.mini tbody tr"))
    assert n == con.execute("SELECT count(DISTINCT EDUC) FROM c").fetchone()[0]
    inc = browser.find_element(By.ID, "var-INCTOT")
    inc.find_element(By.TAG_NAME, "summary").click()
    assert "9999999" in inc.text
    shot(browser, "codebook")


def test_unweighted_dataset_and_errors(server, browser):
    base, con = server
    browser.get(base + "/analysis/plain?row=EDUC&col=SEX&pct=row&show=colour&show=n")
    assert wait_answer(browser) == ""
    legend = browser.find_element(By.ID, "legend").text
    assert "simple random sampling (no survey design)" in legend
    cells = page_cells(browser)
    want = duck_cells(con, "EDUC", "SEX", weight="1", along="row")
    for k, (w, pct) in want.items():
        assert num(cells[k]["pct"]) == pytest.approx(pct, abs=0.05 + 1e-9)
    # A bad filter: the API's message, shown as an alert; no table.
    browser.get(base + "/analysis/plain?row=EDUC&filter=AGE(")
    assert "filter" in wait_answer(browser).lower()
    assert not browser.find_elements(By.CSS_SELECTOR, "table.xt")
    # An unknown variable.
    browser.get(base + "/analysis/plain?row=NOPE")
    assert "NOPE" in wait_answer(browser)
    # Hostile page parameters get JSON errors; no script is echoed.
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(base + "/analysis/plain?fliter=x", timeout=10)
    assert e.value.code == 400
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(base + "/analysis/..%2Fsecret", timeout=10)
    assert e.value.code == 404
    browser.get(base + "/analysis/plain?row=" + urllib.parse.quote('"><script>window.pwned=1</script>'))
    wait_answer(browser)
    assert browser.execute_script("return window.pwned === undefined")
    logs = [x for x in browser.get_log("browser") if x["level"] == "SEVERE" and "favicon" not in x["message"]
            and "status of 400" not in x["message"]]
    assert logs == [], logs


def test_phone_layout(server):
    base, _ = server
    d = make_driver(mobile=True)
    try:
        d.get(base + "/analysis/census?row=EDUC&col=RACE&control=SEX&show=se&show=ci&show=w&show=colour")
        assert wait_answer(d) == ""
        # Nothing wider than the screen but the tables' own scrolling boxes.
        assert d.execute_script("return document.documentElement.scrollWidth <= window.innerWidth + 1")
        boxes = d.find_elements(By.CSS_SELECTOR, ".scroll")
        assert boxes and all(b.get_attribute("tabindex") == "0" for b in boxes)
        # The form comes before the variables list on a phone.
        y = d.execute_script("""return [document.querySelector('.query').getBoundingClientRect().top,
                                        document.querySelector('.vars').getBoundingClientRect().top]""")
        assert y[0] < y[1]
        ART.mkdir(parents=True, exist_ok=True)
        d.save_screenshot(str(ART / "phone.png"))
    finally:
        d.quit()


def test_review_findings(server, browser):
    """What a hostile review found: an older answer drawn over a newer one,
    the weight lost with the design, means over recodes, an empty result
    shown as 100%, missing categories unmarked, the chart's axis."""
    base, con = server
    # 1. Only the latest query is drawn: the first answer is held back.
    browser.get(base + "/analysis/census")
    browser.execute_script("""
      const f = window.fetch; let first = true;
      window.fetch = (...a) => { const d = first; first = false;
        return new Promise(r => setTimeout(r, d ? 1500 : 0)).then(() => f(...a)); };""")
    row, col = browser.find_element(By.ID, "f-row"), browser.find_element(By.ID, "f-col")
    row.send_keys("RACE")
    col.send_keys("SEX")
    browser.find_element(By.ID, "run").click()
    row.clear()
    row.send_keys("EDUC")
    browser.find_element(By.ID, "run").click()
    time.sleep(2.5)
    assert wait_answer(browser) == ""
    captions = [c.text for c in browser.find_elements(By.CSS_SELECTOR, "table.xt caption .title")]
    assert captions == ["EDUC by SEX"], captions
    # 2. Standard errors off: still weighted by the design's weight.
    browser.get(base + "/analysis/census?row=EDUC&col=SEX&design=off&show=w")
    assert wait_answer(browser) == ""
    check_against_duckdb(page_cells(browser), duck_cells(con, "EDUC", "SEX"))
    assert not browser.find_elements(By.CSS_SELECTOR, "span.se")
    # 3. Means grouped by a recode written with spaces.
    browser.get(base + "/analysis/census?" + urllib.parse.urlencode(
        {"kind": "means", "dep": "INCTOT", "row": "SEX", "col": "AGE(r: 0-17; 18-64; 65-*)"}))
    assert wait_answer(browser) == ""
    got = browser.execute_script("""return [...document.querySelectorAll('table.means tbody tr:not(.total)')]
        .map(tr => [...tr.querySelectorAll('th, td')].slice(0, 3).map(x => x.textContent))""")
    want = {(s, g): float(m) for s, g, m in con.execute(
        "SELECT SEX, CASE WHEN AGE <= 17 THEN 1 WHEN AGE <= 64 THEN 2 ELSE 3 END, "
        "sum(INCTOT * PERWT) / sum(PERWT) FROM c WHERE INCTOT <> 9999999 GROUP BY ALL").fetchall()}
    assert {(int(s.split()[0]), int(g.split()[0])): num(m.replace("‡", "")) for s, g, m in got} == \
        pytest.approx(want, rel=1e-5)
    # 4. A filter that matches nothing says so.
    browser.get(base + "/analysis/census?row=SEX&col=EDUC&filter=AGE(200-300)")
    assert wait_answer(browser) == ""
    assert "No records are counted" in browser.find_element(By.CSS_SELECTOR, "#result .empty").text
    assert not browser.find_elements(By.CSS_SELECTOR, "table.xt")
    # 5. Missing categories of a crosstab are marked and said to be in the base.
    browser.get(base + "/analysis/census?" + urllib.parse.urlencode(
        {"row": "INCTOT(r: *-9999; 10000-*)", "col": "SEX", "include_missing": "on"}))
    assert wait_answer(browser) == ""
    assert "(missing)" in browser.find_element(By.CSS_SELECTOR, "table.xt tbody tr.missing th").text
    assert "included in the totals and percentages" in browser.find_element(By.CSS_SELECTOR, "table.xt caption").text
    # 6. Stacked column percentages: the axis ends at 100.
    ticks = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "svg.chart text.tick")]
    assert "100" in ticks and "200" not in ticks
    # 7. A page error is a page for a browser.
    browser.get(base + "/analysis/nosuch")
    assert "404" in browser.find_element(By.TAG_NAME, "h1").text
    assert "nosuch" in browser.find_element(By.CSS_SELECTOR, "[role=alert]").text


def test_long_frequency_lists_are_cut_with_a_note(server, browser):
    base, con = server
    browser.get(base + "/analysis/plain?row=INCTOT&include_missing=on")
    assert wait_answer(browser) == ""
    distinct = con.execute("SELECT count(DISTINCT INCTOT) FROM c").fetchone()[0]
    assert distinct > 2000
    rows = browser.find_elements(By.CSS_SELECTOR, "table.freq tbody tr:not(.total)")
    assert len(rows) == 2000
    assert f"of {distinct:,} values" in browser.find_element(By.ID, "cut").text
    assert "too many" in browser.find_element(By.CSS_SELECTOR, "#result p.hint:not(#cut)").text
    # The CSV download holds every value.
    text = browser.execute_async_script("""const done = arguments[0];
        fetch(document.getElementById('dl-csv').href).then(r => r.text()).then(done)""")
    assert len(text.strip().splitlines()) == distinct + 1


def test_an_error_says_what_to_do_on_the_page(server, browser):
    """The page chooses its advice from the API's `kind` and `option` (not
    from words in the message), names its own control, and following it
    answers: weighting by another variable than the design's is refused
    with "set Standard errors to none"; set so, the table is weighted by
    that variable (checked against DuckDB)."""
    base, con = server
    browser.get(base + "/analysis/census?row=EDUC&col=SEX&weight=AGE&show=w")
    err = wait_answer(browser)
    assert "weights by PERWT" in err and 'set "Standard errors" to "none"' in err, err
    assert "--" not in err and "design=false" not in err, err
    shot(browser, "error-hint")
    Select(browser.find_element(By.ID, "f-design")).select_by_value("off")
    browser.find_element(By.ID, "run").click()
    assert wait_answer(browser) == ""
    assert "design=off" in browser.current_url and "weight=AGE" in browser.current_url
    check_against_duckdb(page_cells(browser), duck_cells(con, "EDUC", "SEX", weight="AGE"))


def inference_rows(d, caption_part):
    """The rows of the page's estimates table whose caption holds
    `caption_part`: {name: [estimate, se, t, p, ci]} as shown."""
    return d.execute_script("""
      const t = [...document.querySelectorAll('table.inference')]
        .find(t => t.querySelector('caption').textContent.includes(arguments[0]));
      if (!t) return null;
      const out = {};
      for (const tr of t.querySelectorAll('tbody tr'))
        out[tr.querySelector('th').textContent] = [...tr.querySelectorAll('td')].map(td => td.textContent);
      return out;""", caption_part)


def test_regression_and_compare_means(server, browser):
    """The page's Regression and Compare-means analyses: filled by hand and
    by a variable's buttons, the numbers the API's (which R checks,
    tests/cli/test_regress.py), the URL shared and an SDA REGRESS URL
    followed."""
    base, _ = server
    browser.get(base + "/analysis/census")
    browser.find_element(By.CSS_SELECTOR, 'input[name="kind"][value="regress"]').click()
    # The formula field shows, the row field does not.
    assert browser.find_element(By.ID, "f-formula").is_displayed()
    assert not browser.find_element(By.ID, "f-row").is_displayed()
    browser.find_element(By.ID, "f-formula").send_keys("EMPSTAT(1) ~ AGE + factor(SEX)")
    Select(browser.find_element(By.ID, "f-family")).select_by_value("logit")
    browser.find_element(By.ID, "f-filter").send_keys("AGE(16-*)")
    browser.find_element(By.ID, "run").click()
    assert wait_answer(browser) == ""
    url = browser.current_url
    assert "kind=regress" in url and "family=logit" in url and "row=" not in url
    want = api(base, "/api/v1/datasets/census/regress?" + urllib.parse.urlencode(
        {"formula": "EMPSTAT(1) ~ AGE + factor(SEX)", "family": "logit", "filter": "AGE(16-*)"}))
    rows = inference_rows(browser, "Logit model")
    assert list(rows) == [c["term"] for c in want["coefficients"]]
    for c in want["coefficients"]:
        est, se, t, p, ci = rows[c["term"]]
        assert num(est) == pytest.approx(c["estimate"], rel=1e-5)
        assert num(se) == pytest.approx(c["se"], rel=1e-3)
        lo, hi = (num(x) for x in ci.split(" – "))
        assert lo == pytest.approx(c["lo"], rel=1e-4) and hi == pytest.approx(c["hi"], rel=1e-4)
    legend = browser.find_element(By.ID, "legend").text
    assert want["method"] in legend and "Wald test" in legend
    # Its CSV is the coefficients.
    text = browser.execute_async_script("""const done = arguments[0];
        fetch(document.getElementById('dl-csv').href).then(r => r.text()).then(done)""")
    lines = text.strip().splitlines()
    assert lines[0] == "term,estimate,se,t,p,lo,hi" and len(lines) == 1 + len(want["coefficients"])
    shot(browser, "regression")
    # The shared URL gives the same model in a fresh browser.
    other = make_driver()
    try:
        other.get(url)
        assert wait_answer(other) == ""
        assert inference_rows(other, "Logit model") == rows
        assert other.find_element(By.ID, "f-formula").get_attribute("value") == "EMPSTAT(1) ~ AGE + factor(SEX)"
    finally:
        other.quit()

    # Compare means: INCTOT by RACE against RACE 1.
    browser.get(base + "/analysis/census")
    browser.find_element(By.CSS_SELECTOR, 'input[name="kind"][value="compare"]').click()
    assert browser.find_element(By.ID, "f-base").is_displayed()
    assert not browser.find_element(By.ID, "f-col").is_displayed()
    browser.find_element(By.ID, "f-dep").send_keys("INCTOT")
    browser.find_element(By.ID, "f-row").send_keys("RACE")
    browser.find_element(By.ID, "f-base").send_keys("1")
    browser.find_element(By.ID, "run").click()
    assert wait_answer(browser) == ""
    assert "kind=compare" in browser.current_url and "base=1" in browser.current_url
    want = api(base, "/api/v1/datasets/census/means?var=INCTOT&by=RACE&diff=1")["comparison"]
    rows = inference_rows(browser, "Difference from RACE = 1")
    assert list(rows) == [d["group"] for d in want["differences"]]
    for d in want["differences"]:
        est, se, *_ = rows[d["group"]]
        assert num(est) == pytest.approx(d["estimate"], rel=1e-5)
        assert num(se) == pytest.approx(d["se"], rel=1e-3)
    text = browser.find_element(By.ID, "result").text
    assert f"standard errors: {want['method']}" in text
    # (4 replicates: no Wald test of 8 differences on their 3 df.)
    assert ("Wald test that every group equals the base" in text) == (want["wald"] is not None)
    assert browser.find_elements(By.CSS_SELECTOR, "table.means")  # the means beside
    shot(browser, "compare-means")

    # A variable's "Model" button writes the formula.
    browser.get(base + "/analysis/census")
    for name in ("INCTOT", "AGE"):
        browser.find_element(By.CSS_SELECTOR, f'button.var[data-name="{name}"]').click()
        WebDriverWait(browser, 10).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, '#vinfo-body button[data-field="formula"]'))
        browser.find_element(By.CSS_SELECTOR, '#vinfo-body button[data-field="formula"]').click()
    assert browser.find_element(By.ID, "f-formula").get_attribute("value") == "INCTOT ~ AGE"
    assert browser.find_element(By.CSS_SELECTOR, 'input[name="kind"][value="regress"]').is_selected()

    # SDA's REGRESS URL: the same model on the page, and as JSON.
    sda = base + "/sdaweb/analysis/exec?" + urllib.parse.urlencode({
        "sdaprog": "regress", "dataset": "census", "dep": "INCTOT", "indep": "AGE, SEX",
        "filters": "age(25-64)", "weightlist": "PERWT"})
    browser.get(sda)
    assert wait_answer(browser) == ""
    assert "kind=regress" in browser.current_url
    assert browser.find_element(By.ID, "f-formula").get_attribute("value") == "INCTOT ~ AGE + SEX"
    j = api(base, "/sdaweb/analysis/exec?" + urllib.parse.urlencode({
        "sdaprog": "regress", "dataset": "census", "dep": "INCTOT", "indep": "AGE, SEX",
        "filters": "age(25-64)", "weightlist": "PERWT"}))
    assert j["formula"] == "INCTOT ~ AGE + SEX" and j["filter"] == "age(25-64)"
    assert [c["term"] for c in j["coefficients"]] == ["(Intercept)", "AGE", "SEX"]
    with pytest.raises(urllib.error.HTTPError) as e:
        api(base, "/sdaweb/analysis/exec?sdaprog=regress&dataset=census&dep=INCTOT&indep=d:RACE")
    assert e.value.code == 400 and "factor(RACE)" in e.value.read().decode()


def test_standard_errors_keep_two_significant_digits(server, browser):
    """A percentage's SE is shown to two significant digits (an SE of 0.023
    is "0.023", never "(0.0)": read as "no sampling error"), its interval
    to the same decimals; each equals the API's value to that precision."""
    base, _ = server
    q = {"row": "AGE(r: 95-*; 0-94)", "col": "SEX", "pct": "col"}
    browser.get(base + "/analysis/census?" + urllib.parse.urlencode({**q, "show": ["se", "ci"]}, doseq=True))
    assert wait_answer(browser) == ""
    shown = browser.execute_script("""
      return [...document.querySelectorAll('table.xt tbody tr:not(.total)')].map(tr =>
        [...tr.querySelectorAll('td')].slice(0, -1).map(td => [td.querySelector('.se')?.textContent ?? null,
                                                            td.querySelector('.ci')?.textContent ?? null]))""")
    j = api(base, "/api/v1/datasets/census/tab?" + urllib.parse.urlencode(q))
    t = j["tables"][0]
    small = 0
    for i, row in enumerate(shown):
        for k, (se, ci) in enumerate(row):
            u = t["pct_se"][i][k]
            assert se is not None and ci is not None, (i, k)
            s = se.strip("()")
            digits = s.replace(".", "").lstrip("0")
            assert len(digits) >= 2 or float(s) >= 10, se
            assert float(s) == pytest.approx(u["se"], rel=0.05), (se, u)
            decimals = len(s.split(".")[1])
            lo, hi = ci.strip("[]").split(", ")
            assert len(lo.split(".")[1]) == decimals and float(lo) == pytest.approx(u["lo"], abs=10 ** -decimals)
            assert float(hi) == pytest.approx(u["hi"], abs=10 ** -decimals)
            small += u["se"] < 0.05
    shot(browser, "se-digits")
    # The case the page got wrong: SEs below 0.05 points.
    assert small > 0, "no SE below 0.05 in this table: the test does not test the case"


# --------------------------------------------------------------------------
# issue 31, item 3: an SDA-complete page
# --------------------------------------------------------------------------

def cell_lines(d, table=0):
    """Each body cell's percentage lines: {(row, col): {kind: text}}."""
    return d.execute_script("""
      const t = document.querySelectorAll('table.xt')[arguments[0]];
      const cols = [...t.querySelectorAll('thead th')].slice(1, -1).map(th => th.textContent.split(' ')[0]);
      const out = {};
      for (const tr of t.querySelectorAll('tbody tr:not(.total)')) {
        const r = tr.querySelector('th').textContent.split(' ')[0];
        [...tr.querySelectorAll('td')].slice(0, -1).forEach((td, k) => {
          const o = {};
          for (const l of td.querySelectorAll('.pline')) o[l.dataset.pct] = {pct: l.querySelector('.pct').textContent,
            se: l.querySelector('.se')?.textContent ?? null};
          out[r + '|' + cols[k]] = o;
        });
      }
      return out;""", table)


def duck_pcts(con, row, col, where="TRUE", weight="PERWT"):
    """{row|col: {col, row, total percentages}} from DuckDB."""
    rows = con.execute(f"SELECT {row}, {col}, sum({weight})::DOUBLE FROM c WHERE {where} GROUP BY ALL").fetchall()
    by_c, by_r, tot = {}, {}, 0.0
    for r, c, w in rows:
        by_c[c] = by_c.get(c, 0) + w
        by_r[r] = by_r.get(r, 0) + w
        tot += w
    return {f"{r}|{c}": {"col": 100 * w / by_c[c], "row": 100 * w / by_r[r], "total": 100 * w / tot}
            for r, c, w in rows}


def test_decimals_control(server, browser):
    """The decimals chosen set the percentages' and means' decimals (each
    equal to DuckDB's value to that precision); SEs keep two significant
    digits (equal to the API's); SDA's decpcts= sets the control."""
    base, con = server
    browser.get(base + "/analysis/census?row=EDUC&col=SEX&show=se")
    assert wait_answer(browser) == ""
    Select(browser.find_element(By.ID, "f-dec")).select_by_value("3")
    browser.find_element(By.ID, "run").click()
    assert wait_answer(browser) == ""
    assert "dec=3" in browser.current_url
    cells = page_cells(browser)
    want = duck_cells(con, "EDUC", "SEX")
    j = api(base, "/api/v1/datasets/census/tab?row=EDUC&col=SEX&pct=col")
    t = j["tables"][0]
    ses = browser.execute_script("""return [...document.querySelectorAll('table.xt tbody tr:not(.total)')].map(tr =>
        [...tr.querySelectorAll('td')].slice(0, -1).map(td => td.querySelector('.se').textContent))""")
    for k, (w, pct) in want.items():
        got = cells[k]["pct"]
        assert len(got.split(".")[1]) == 3, got
        assert float(got) == pytest.approx(pct, abs=0.0005 + 1e-9), (k, got, pct)
    for i, row in enumerate(ses):
        for k, se in enumerate(row):
            s = se.strip("()")
            assert len(s.replace(".", "").lstrip("0")) >= 2 or float(s) >= 10, se
            assert float(s) == pytest.approx(t["pct_se"][i][k]["se"], rel=0.05)
    shot(browser, "decimals")
    # Means to 2 decimals.
    browser.get(base + "/analysis/census?kind=means&dep=INCTOT&row=SEX&dec=2")
    assert wait_answer(browser) == ""
    means = browser.execute_script("""return [...document.querySelectorAll('table.means tbody tr:not(.total)')]
        .map(tr => [tr.querySelector('th').textContent, tr.querySelector('td.mean').textContent])""")
    want = dict(con.execute("SELECT SEX, sum(INCTOT * PERWT) / sum(PERWT) FROM c "
                            "WHERE INCTOT <> 9999999 GROUP BY ALL").fetchall())
    for s, m in means:
        m = m.replace("‡", "")
        assert len(m.split(".")[1]) == 2, m
        assert num(m) == pytest.approx(float(want[int(s.split()[0])]), abs=0.005 + 1e-9)
    # SDA's decpcts.
    browser.get(base + "/sdaweb/analysis/exec?" + urllib.parse.urlencode(
        {"sdaprog": "tables", "dataset": "census", "row": "SEX", "column": "RACE", "colpct": "on", "decpcts": "2"}))
    assert wait_answer(browser) == ""
    assert Select(browser.find_element(By.ID, "f-dec")).first_selected_option.get_attribute("value") == "2"
    assert all(len(c["pct"].split(".")[1]) == 2 for c in page_cells(browser).values())


def test_run_focuses_the_answer_and_skip_link(server, browser):
    """The first Tab reaches "Skip to the form", which leads past the
    variables into the form; after Run the answer is focused and in view."""
    base, _ = server
    browser.set_window_size(1280, 900)
    browser.get(base + "/analysis/census")
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.TAB)
    a = browser.switch_to.active_element
    assert a.text == "Skip to the form" and a.get_attribute("href").endswith("#query")
    a.send_keys(Keys.ENTER)
    browser.switch_to.active_element.send_keys(Keys.TAB)
    a = browser.switch_to.active_element
    assert browser.execute_script("return document.getElementById('form').contains(arguments[0])", a), a.get_attribute("outerHTML")
    # Type a query and run it from the keyboard.
    browser.find_element(By.ID, "f-row").send_keys("EDUC")
    browser.find_element(By.ID, "f-col").send_keys("SEX", Keys.ENTER)
    assert wait_answer(browser) == ""
    WebDriverWait(browser, 5).until(lambda d: d.switch_to.active_element.get_attribute("id") == "result")
    top = browser.execute_script("return document.getElementById('result').getBoundingClientRect().top")
    assert -2 <= top < browser.execute_script("return window.innerHeight / 2"), top
    browser.save_screenshot(str(ART / "after-run.png"))
    # An error is focused too.
    row = browser.find_element(By.ID, "f-row")
    row.clear()
    row.send_keys("NOPE", Keys.ENTER)
    assert "NOPE" in wait_answer(browser)
    WebDriverWait(browser, 5).until(lambda d: d.switch_to.active_element.get_attribute("id") == "error")
    browser.set_window_size(1280, 1600)


def test_the_title_heads_the_page_escaped(server, browser):
    """The dataset's title (set by `label --title`) is the page's heading
    and its document title, the description is under it, both as text
    (the script in the title never runs); the index shows the title."""
    base, con = server
    browser.get(base + "/")
    row = browser.find_element(By.XPATH, "//table[@class='list']//a[text()='plain']/..")
    assert row.find_element(By.CSS_SELECTOR, ".dtitle").text == TITLE
    shot(browser, "index-titles")
    browser.get(base + "/analysis/plain?row=SEX&col=RACE")
    assert wait_answer(browser) == ""
    assert browser.find_element(By.TAG_NAME, "h1").text == f"{TITLE} (plain)"
    assert browser.title == f"{TITLE} (plain) — microtab"
    assert browser.find_element(By.ID, "ds-description").text == DESCRIPTION
    assert browser.execute_script("return window.pwned") is None
    assert not browser.find_elements(By.CSS_SELECTOR, ".intro b, .intro script")
    # The page still answers (an unweighted crosstab, DuckDB's counts).
    want = dict(((str(r), str(c)), n) for r, c, n in
                con.execute("SELECT SEX, RACE, count(*) FROM c GROUP BY ALL").fetchall())
    got = api(base, "/api/v1/datasets/plain/tab?row=SEX&col=RACE")["tables"][0]
    assert {(str(r["value"]), str(c["value"])): got["counts"][i][k] for i, r in enumerate(got["rows"])
            for k, c in enumerate(got["cols"]) if got["counts"][i][k]} == want
    shot(browser, "title-description")


def test_without_javascript_several_row_variables_link_each_answer(server):
    """A browser without JavaScript: the form, and under it one JSON
    answer per row variable (`SEX, RACE(1,2)`), each DuckDB's table."""
    o = webdriver.ChromeOptions()
    o.binary_location = CHROMIUM
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1400"]:
        o.add_argument(a)
    o.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    d = webdriver.Chrome(service=Service(DRIVER), options=o)
    try:
        base, con = server
        d.get(base + "/analysis/census?" + urllib.parse.urlencode({"row": "SEX, RACE(1,2)", "col": "MARST"}))
        items = d.find_elements(By.CSS_SELECTOR, "ul.answers li")
        assert [li.text.split(":")[0] for li in items] == ["SEX", "RACE(1,2)"]
        assert d.find_element(By.ID, "status").text == ""
        shot(d, "no-javascript-several-rows")
        for li, (var, where) in zip(items, [("SEX", "TRUE"), ("RACE", "RACE IN (1, 2)")]):
            url = li.find_element(By.TAG_NAME, "a").get_attribute("href")
            with urllib.request.urlopen(url, timeout=30) as r:
                t = json.loads(r.read())["tables"][0]
            want = {(r, c): float(w) for r, c, w in con.execute(
                f"SELECT {var}, MARST, sum(PERWT) FROM c WHERE {where} GROUP BY ALL").fetchall()}
            got = {(r["value"], c["value"]): t["weighted"][i][k] for i, r in enumerate(t["rows"])
                   for k, c in enumerate(t["cols"]) if t["counts"][i][k]}
            assert set(got) == set(want)
            assert all(got[x] == pytest.approx(w, rel=1e-12) for x, w in want.items())
    finally:
        d.quit()


def test_malformed_recode_names_the_mistake(server, browser):
    """`AGE(r: 18-` is a recode with an incomplete range and no closing
    parenthesis, said so by the API and shown as the
    API's text on the page, not "unknown variable" and never raw JSON; an
    SDA URL refused is a page for a browser."""
    base, _ = server
    q = urllib.parse.urlencode({"row": "AGE(r: 18-", "col": "SEX"})
    with pytest.raises(urllib.error.HTTPError) as e:
        api(base, "/api/v1/datasets/census/tab?" + q)
    j = json.loads(e.value.read())
    assert e.value.code == 400, j
    assert "recode of AGE: incomplete range '18-'" in j["error"] and "no ')' closes" in j["error"], j
    assert "unknown variable" not in j["error"]
    # Its own kind, which the page words: how a recode is written.
    assert j["kind"] == "grouping" and "option" not in j, j
    browser.get(base + "/analysis/census?" + q)
    err = wait_answer(browser)
    assert j["error"] in err and "{" not in err, err
    assert "On this page: correct the Row, Column or Control box" in err and "AGE(r: 0-17; 18-64; 65-*)" in err, err
    shot(browser, "recode-error")
    # A closed list with a bad group names the group.
    browser.get(base + "/analysis/census?" + urllib.parse.urlencode({"row": "AGE(r: 18-30; x-)", "col": "SEX"}))
    err = wait_answer(browser)
    assert "AGE" in err and "x" in err and "unknown variable" not in err, err
    # SDA URL refused: a page with the message, not JSON.
    browser.get(base + "/sdaweb/analysis/exec?sdaprog=tables&dataset=census&row=SEX&bogus=1")
    assert "400" in browser.find_element(By.TAG_NAME, "h1").text
    msg = browser.find_element(By.CSS_SELECTOR, "[role=alert]").text
    assert "bogus" in msg and not browser.find_element(By.TAG_NAME, "body").text.lstrip().startswith("{")


def test_row_column_and_total_percentages_in_one_table(server, browser):
    """An SDA URL with colpct, rowpct and totpct opens one table whose
    cells hold the three (each equal to DuckDB's), with each one's SE
    (the API's); the same URL asked for JSON answers with all three."""
    base, con = server
    sda = "/sdaweb/analysis/exec?" + urllib.parse.urlencode({
        "sdaprog": "tables", "dataset": "census", "row": "SEX", "column": "MARST", "colpct": "on",
        "rowpct": "on", "totpct": "on", "filters": "age(25-64)", "se": "on"})
    browser.get(base + sda)
    assert wait_answer(browser) == ""
    assert pct_boxes(browser) == ["col", "row", "total"]
    got = cell_lines(browser)
    want = duck_pcts(con, "SEX", "MARST", "AGE BETWEEN 25 AND 64")
    assert set(got) == set(want)
    for k, w in want.items():
        assert list(got[k]) == ["col", "row", "total"], got[k]
        for p in ("col", "row", "total"):
            assert float(got[k][p]["pct"]) == pytest.approx(w[p], abs=0.05 + 1e-9), (k, p, got[k], w)
    # The JSON the same URL redirects to (not a refusal).
    j = api(base, sda)
    assert j["pcts"] == ["col", "row", "total"]
    t = j["tables"][0]
    for i, r in enumerate(t["rows"]):
        for k, c in enumerate(t["cols"]):
            for p in ("col", "row", "total"):
                v = t["percentages"][p]["pct"][i][k]
                assert v == pytest.approx(want[f"{r['value']}|{c['value']}"][p], rel=1e-9)
                se = got[f"{r['value']}|{c['value']}"][p]["se"]
                assert float(se.strip("()")) == pytest.approx(t["percentages"][p]["pct_se"][i][k]["se"], rel=0.05)
    # The Total column and row: 100 where the percentages run along them.
    totals = browser.execute_script("""const t = document.querySelector('table.xt');
        return [[...t.querySelectorAll('tbody tr:not(.total) td.total')].map(td => td.querySelector('[data-pct=row] .pct').textContent),
                [...t.querySelectorAll('tbody tr.total td')].map(td => td.querySelector('[data-pct=col] .pct').textContent)]""")
    assert set(totals[0]) == {"100.0"} and set(totals[1]) == {"100.0"}
    shot(browser, "three-percentages")
    # The CSV: a column of each percentage, as the API gives them.
    text = browser.execute_async_script("""const done = arguments[0];
        fetch(document.getElementById('dl-csv').href).then(r => r.text()).then(done)""")
    lines = [x.split(",") for x in text.strip().splitlines()]
    head = lines[0]
    assert {"pct_col", "pct_row", "pct_total", "pct_row_se"} <= set(head), head
    for x in lines[1:]:
        i = [r["value"] for r in t["rows"]].index(int(x[head.index("row")]))
        k = [c["value"] for c in t["cols"]].index(int(x[head.index("col")]))
        for p in ("col", "row", "total"):
            assert float(x[head.index(f"pct_{p}")]) == t["percentages"][p]["pct"][i][k]
    # The form: ticking row and column only.
    boxes = {e.get_attribute("value"): e for e in browser.find_elements(By.CSS_SELECTOR, "input[name=pct]")}
    boxes["total"].click()
    browser.find_element(By.ID, "run").click()
    assert wait_answer(browser) == ""
    assert all(list(v) == ["col", "row"] for v in cell_lines(browser).values())
    # None ticked: counts, and the URL says so.
    for b in browser.find_elements(By.CSS_SELECTOR, "input[name=pct]:checked"):
        b.click()
    browser.find_element(By.ID, "run").click()
    assert wait_answer(browser) == ""
    assert "pct=none" in browser.current_url and not browser.find_elements(By.CSS_SELECTOR, "span.pct")


def test_several_row_variables_give_several_tables(server, browser):
    """`SEX, RACE(1,2)` in Row: one crosstab per variable (a recode's comma
    does not split), each equal to DuckDB's; frequencies too."""
    base, con = server
    browser.get(base + "/analysis/census?" + urllib.parse.urlencode({"row": "SEX, RACE(1,2)", "col": "MARST"}))
    assert wait_answer(browser) == ""
    titles = [c.text for c in browser.find_elements(By.CSS_SELECTOR, "table.xt caption .title")]
    assert titles == ["SEX by MARST", "RACE by MARST"], titles
    check_against_duckdb(page_cells(browser, 0), duck_cells(con, "SEX", "MARST"))
    check_against_duckdb(page_cells(browser, 1), duck_cells(con, "RACE", "MARST", "RACE IN (1, 2)"))
    assert "2 tables, one per row variable" in browser.find_element(By.CSS_SELECTOR, "#result .meta").text
    assert len(browser.find_elements(By.CSS_SELECTOR, "svg.chart")) == 2
    assert browser.find_element(By.ID, "dl-csv-2")
    shot(browser, "several-rows")
    browser.get(base + "/analysis/census?row=SEX,EDUC")
    assert wait_answer(browser) == ""
    freqs = browser.execute_script("""return [...document.querySelectorAll('table.freq')].map(t =>
        [...t.querySelectorAll('tbody tr:not(.total)')].map(tr => [tr.querySelector('th').textContent.split(' ')[0],
          tr.querySelector('td').textContent]))""")
    assert len(freqs) == 2
    for var, rows in zip(["SEX", "EDUC"], freqs):
        want = dict(con.execute(f"SELECT {var}, count(*) FROM c GROUP BY ALL").fetchall())
        assert {int(v): int(num(n)) for v, n in rows} == want


def weighted_quantile(pairs, p):
    """R's qrule_math: the smallest value whose cumulative weight reaches
    p of the total (exact decimals)."""
    from decimal import Decimal
    pairs = sorted((y, w) for y, w in pairs if w != 0)
    total = sum(w for _, w in pairs)
    cum = Decimal(0)
    for y, w in pairs:
        cum += w
        if cum >= Decimal(str(p)) * total:
            return y
    return pairs[-1][0]


def test_medians_percentiles_and_means_by_row_and_column(server, browser):
    """Means of INCTOT by SEX × MARST as one table (DuckDB's means), with
    the median and 90th percentile per group (an exact weighted quantile
    in Python over DuckDB's rows) and their SEs (the API's)."""
    base, con = server
    browser.get(base + "/analysis/census?" + urllib.parse.urlencode(
        {"kind": "means", "dep": "INCTOT", "row": "SEX", "col": "MARST", "median": "on", "pctiles": "90",
         "show": ["se"], "shown": "1"}, doseq=True))
    assert wait_answer(browser) == ""
    grid = browser.execute_script("""const t = document.querySelector('table.means2');
      const cols = [...t.querySelectorAll('thead th')].slice(1).map(th => th.textContent.split(' ')[0]);
      const out = {};
      for (const tr of t.querySelectorAll('tbody tr')) {
        const r = tr.querySelector('th').textContent.split(' ')[0];
        [...tr.querySelectorAll('td')].forEach((td, k) => out[r + '|' + cols[k]] = td.querySelector('.mean')?.textContent ?? null);
      }
      return out;""")
    want = {f"{s}|{m}": float(v) for s, m, v in con.execute(
        "SELECT SEX, MARST, sum(INCTOT * PERWT) / sum(PERWT) FROM c WHERE INCTOT <> 9999999 GROUP BY ALL").fetchall()}
    # The margins: the means by SEX, by MARST and of all.
    for s, m, v in con.execute("SELECT SEX, MARST, sum(INCTOT * PERWT) / sum(PERWT) FROM c WHERE INCTOT <> 9999999 "
                               "GROUP BY GROUPING SETS ((SEX), (MARST), ())").fetchall():
        want[f"{s if s is not None else 'All'}|{m if m is not None else 'All'}"] = float(v)
    assert {k for k, v in grid.items() if v} == want.keys()
    for k, v in want.items():
        assert num(grid[k]) == pytest.approx(v, rel=1e-5), (k, grid[k], v)
    heads = [th.get_attribute("textContent") for th in browser.find_elements(By.CSS_SELECTOR, "table.means thead th")]
    assert "Median" in heads and "P90" in heads, heads
    rows = browser.execute_script("""return [...document.querySelectorAll('table.means tbody tr')].map(tr =>
        [[...tr.querySelectorAll('th, td')].slice(0, 2).map(x => x.textContent).join('|'),
         ...[...tr.querySelectorAll('td.q')].map(td => td.textContent)])""")
    data = con.execute("SELECT SEX, MARST, INCTOT, PERWT FROM c WHERE INCTOT <> 9999999").fetchall()
    j = api(base, "/api/v1/datasets/census/means?" + urllib.parse.urlencode(
        [("var", "INCTOT"), ("by", "SEX"), ("by", "MARST"), ("quantiles", "0.5,0.9")]))
    api_q = {f"{g['by'][0]['value']}|{g['by'][1]['value']}": g["quantiles"] for g in j["groups"]}
    checked = 0
    for key, med, p90 in rows:
        if key.startswith("All"):
            continue
        s, m = (int(x.split()[0]) for x in key.split("|"))
        pairs = [(y, w) for a, b, y, w in data if a == s and b == m]
        assert num(med) == weighted_quantile(pairs, 0.5), (key, med)
        assert num(p90) == weighted_quantile(pairs, 0.9), (key, p90)
        assert api_q[f"{s}|{m}"][0]["value"] == num(med)
        checked += 1
    assert checked == len([k for k in want if "All" not in k])
    browser.find_element(By.CSS_SELECTOR, "details.all-stats summary").click()
    shot(browser, "means-2d")
    # SDA's median=on and percentileopt=90: the page's boxes, and the JSON.
    sda = "/sdaweb/analysis/exec?sdaprog=means&dataset=census&dep=INCTOT&row=SEX&median=on&percentileopt=90"
    browser.get(base + sda)
    assert wait_answer(browser) == ""
    assert browser.find_element(By.ID, "f-median").is_selected()
    assert browser.find_element(By.ID, "f-pctiles").get_attribute("value") == "90"
    rows = browser.execute_script("""return [...document.querySelectorAll('table.means tbody tr:not(.total)')].map(tr =>
        [tr.querySelector('th').textContent, ...[...tr.querySelectorAll('td.q')].map(td => td.textContent)])""")
    for sex, med, p90 in rows:
        pairs = [(y, w) for a, _, y, w in data if a == int(sex.split()[0])]
        assert (num(med), num(p90)) == (weighted_quantile(pairs, 0.5), weighted_quantile(pairs, 0.9))
    j = api(base, sda)
    assert [q["p"] for q in j["total_quantiles"]] == [0.5, 0.9]
    # With a control variable: a table and a chart per category, margins
    # within each (DuckDB's means).
    browser.get(base + "/analysis/census?" + urllib.parse.urlencode(
        {"kind": "means", "dep": "INCTOT", "row": "SEX", "col": "MARST", "control": "RACE(1,2)"}))
    assert wait_answer(browser) == ""
    charts = [c.get_attribute("aria-label") for c in browser.find_elements(By.CSS_SELECTOR, "svg.chart")]
    assert charts == [f"Mean of INCTOT by SEX and MARST, RACE = {r}" for r in (1, 2)], charts
    for i, race in enumerate((1, 2)):
        grid = browser.execute_script("""const t = document.querySelectorAll('table.means2')[arguments[0]];
          const cols = [...t.querySelectorAll('thead th')].slice(1).map(th => th.textContent.split(' ')[0]);
          const out = {};
          for (const tr of t.querySelectorAll('tbody tr')) {
            const r = tr.querySelector('th').textContent.split(' ')[0];
            [...tr.querySelectorAll('td')].forEach((td, k) => out[r + '|' + cols[k]] = td.querySelector('.mean')?.textContent ?? null);
          }
          return out;""", i)
        want = {}
        for s_, m, v in con.execute(f"SELECT SEX, MARST, sum(INCTOT * PERWT) / sum(PERWT) FROM c WHERE INCTOT <> 9999999 "
                                    f"AND RACE = {race} GROUP BY GROUPING SETS ((SEX, MARST), (SEX), (MARST), ())").fetchall():
            want[f"{s_ if s_ is not None else 'All'}|{m if m is not None else 'All'}"] = float(v)
        assert {k for k, v in grid.items() if v} == want.keys()
        for k, v in want.items():
            assert num(grid[k].replace("‡", "")) == pytest.approx(v, rel=1e-5), (race, k, grid[k], v)
    shot(browser, "means-2d-control")


def test_charts_per_control_weights_and_negative_weights(server, browser):
    """A chart per control category, titled by it; the weight list leads
    with the design's weight and offers no IDs or replicate weights; a
    weight with negative values is refused with the page's advice, and
    answered with "Allow negative weights" ticked (DuckDB's sums)."""
    base, con = server
    browser.get(base + "/analysis/census?row=SEX&col=MARST&control=RACE(1,2)")
    assert wait_answer(browser) == ""
    charts = browser.find_elements(By.CSS_SELECTOR, "svg.chart")
    assert [c.get_attribute("aria-label") for c in charts] == ["SEX by MARST, RACE = 1", "SEX by MARST, RACE = 2"]
    # Each chart's bars are its table's column percentages (DuckDB's).
    for race, c in zip([1, 2], charts):
        bars = [r.find_element(By.TAG_NAME, "title").get_attribute("textContent") for r in c.find_elements(By.TAG_NAME, "rect")
                if r.find_elements(By.TAG_NAME, "title")]
        want = duck_cells(con, "SEX", "MARST", f"RACE = {race}")
        assert len(bars) == len(want)
    shot(browser, "charts-per-control")
    opts = [o.get_attribute("value") for o in browser.find_elements(By.CSS_SELECTOR, "#f-weight option")]
    assert opts[0] == "" and "PERWT" in browser.find_element(By.CSS_SELECTOR, "#f-weight option").text
    assert not [o for o in opts if o.startswith("REPWTP") or o in ("SERIAL", "PERNUM", "PERWT")], opts
    browser.get(base + "/analysis/plain")
    opts = [o.get_attribute("value") for o in browser.find_elements(By.CSS_SELECTOR, "#f-weight option")]
    assert opts[:2] == ["", "PERWT"] and "SERIAL" not in opts and "REPWTP1" not in opts, opts
    groups = {g.get_attribute("label"): [o.get_attribute("value") for o in g.find_elements(By.TAG_NAME, "option")]
              for g in browser.find_elements(By.CSS_SELECTOR, "#f-weight optgroup")}
    assert groups["Weights"] == ["PERWT"] and "INCTOT" in groups["Other numeric variables"], groups
    # Negative weights: INCTOT has some.
    assert con.execute("SELECT count(*) FROM c WHERE INCTOT < 0").fetchone()[0] > 0
    browser.get(base + "/analysis/plain?row=SEX&weight=INCTOT")
    err = wait_answer(browser)
    assert "negative" in err and "Allow negative weights" in err, err
    browser.find_element(By.ID, "f-negw").click()
    browser.find_element(By.ID, "run").click()
    assert wait_answer(browser) == ""
    assert "negw=on" in browser.current_url
    rows = browser.execute_script("""return [...document.querySelectorAll('table.freq tbody tr:not(.total)')]
        .map(tr => [tr.querySelector('th').textContent.split(' ')[0], tr.querySelectorAll('td')[1].textContent])""")
    want = dict(con.execute("SELECT SEX, sum(INCTOT)::DOUBLE FROM c WHERE INCTOT <> 9999999 GROUP BY ALL").fetchall())
    assert {int(s): num(w) for s, w in rows} == pytest.approx(want, rel=1e-5)
