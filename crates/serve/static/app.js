// microtab's analysis page: runs the query of the page's URL against the
// JSON API (/api/v1/datasets/NAME/{freq,tab,means}) and draws the tables,
// the chart and the downloads. No build step, no dependencies.

const meta = JSON.parse(document.getElementById("mt-meta")?.textContent || "{}");
const $ = (id) => document.getElementById(id);
const enc = encodeURIComponent;

function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids.flat()) {
    if (k === null || k === undefined) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}

const fmtN = (x, d = 0) =>
  x === null || x === undefined || Number.isNaN(x)
    ? ""
    : Number(x).toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
// The decimals chosen for percentages and means (null: automatic, one
// for percentages and six significant digits for means); standard errors
// and intervals keep their significant digits whatever is chosen.
let dec = null;
const fmtPct = (x) => (x === null || x === undefined ? "" : x.toFixed(dec ?? 1));
const fmtMean = (x, s = 6) => (dec === null ? fmtSig(x, s) : fmtN(x, dec));
// Significant digits for weighted counts and means.
function fmtSig(x, s = 6) {
  if (x === null || x === undefined || !Number.isFinite(x)) return "";
  if (x === 0) return "0";
  const d = Math.min(6, Math.max(0, s - 1 - Math.floor(Math.log10(Math.abs(x)))));
  return Number(x).toLocaleString("en-US", { maximumFractionDigits: d });
}
const catText = (c) => {
  if (!c) return "";
  const v = c.value === null ? "(empty)" : String(c.value);
  return c.label ? `${v} ${c.label}` : v;
};

// The normal quantile (Acklam's rational approximation, |error| < 1.2e-9).
function qnorm(p) {
  const a = [-3.969683028665376e1, 2.209460984245205e2, -2.759285104469687e2, 1.38357751867269e2, -3.066479806614716e1, 2.506628277459239];
  const b = [-5.447609879822406e1, 1.615858368580409e2, -1.556989798598866e2, 6.680131188771972e1, -1.328068155288572e1];
  const c = [-7.784894002430293e-3, -3.223964580411365e-1, -2.400758277161838, -2.549732539343734, 4.374664141464968, 2.938163982698783];
  const d = [7.784695709041462e-3, 3.224671290700398e-1, 2.445134137142996, 3.754408661907416];
  const lo = 0.02425;
  if (p < lo) {
    const q = Math.sqrt(-2 * Math.log(p));
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  if (p > 1 - lo) return -qnorm(1 - p);
  const q = p - 0.5, r = q * q;
  return ((((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q) / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

// ------------------------------------------------------------ the query

const API_OF_PAGE = ["filter", "weight", "level"];

// The API URL of the page's parameters (the server's api_url does the same).
export function apiUrl(p) {
  const pk = p.get("kind") || "table";
  const row = (p.get("row") || "").trim();
  if (!row && pk !== "regress") return null;
  const q = [];
  let kind;
  const put = (k, v) => q.push(`${k}=${enc(v)}`);
  if (pk === "regress") {
    const f = (p.get("formula") || "").trim();
    if (!f) return null;
    put("formula", f);
    put("family", p.get("family") || "gaussian");
    kind = "regress";
  } else if (pk === "compare") {
    const dep = (p.get("dep") || "").trim();
    const base = (p.get("base") || "").trim();
    if (!dep || !base) return null;
    put("var", dep);
    put("by", row);
    put("diff", base);
    kind = "means";
  } else if (pk === "means") {
    const dep = (p.get("dep") || "").trim();
    if (!dep) return null;
    put("var", dep);
    // One `by` per variable: a name with spaces or commas stays whole.
    for (const b of ["row", "col", "control"].map((k) => (p.get(k) || "").trim()).filter((x) => x)) put("by", b);
    const qs = quantilesOf(p);
    if (qs) put("quantiles", qs);
    kind = "means";
  } else if ((p.get("col") || "").trim()) {
    put("row", row);
    put("col", p.get("col").trim());
    if ((p.get("control") || "").trim()) put("control", p.get("control").trim());
    const pcts = pctsOf(p);
    if (pcts.length) put("pct", pcts.join(","));
    if (p.get("stats")) put("stats", "true");
    put("z", "true");
    kind = "tab";
  } else {
    put("var", row);
    kind = "freq";
  }
  for (const k of API_OF_PAGE) {
    const v = (p.get(k) || "").trim();
    if (v) put(k, v);
  }
  if (p.get("design") === "off") {
    // Without the design's standard errors, still its weight (SDA's
    // "SRS"), unless another is chosen.
    if (!(p.get("weight") || "").trim() && meta.design_weight) put("weight", meta.design_weight);
    put("design", "false");
  }
  if (p.get("include_missing") && kind !== "means") put("include_missing", "true");
  if (p.get("negw")) put("allow_negative_weights", "true");
  return `/api/v1/datasets/${enc(meta.name)}/${kind}?${q.join("&")}`;
}

// The percentages asked for, in SDA's order (column, row, total): column
// alone when none is named, none for pct=none (the server's pct_choice).
export function pctsOf(p) {
  const asked = p.getAll("pct").flatMap((x) => x.split(",")).map((x) => x.trim());
  if (!asked.length) return ["col"];
  return ["col", "row", "total"].filter((x) => asked.includes(x));
}

// The API's quantiles of the means form: the median when ticked, and the
// percentiles typed (90; 25, 75) as probabilities.
function quantilesOf(p) {
  const out = [];
  if (p.get("median")) out.push("0.5");
  for (const x of (p.get("pctiles") || "").split(/[,\s]+/).filter((x) => x)) {
    const v = Number(x);
    const q = Number.isFinite(v) && v > 0 && v < 100 ? String(v / 100) : x;
    if (!out.includes(q)) out.push(q);
  }
  return out.join(",");
}

// A row box naming several variables (SEX, RACE: SDA's one table per row
// variable) as its variables; commas inside parentheses or quotes (a
// recode, a quoted name) do not split, nor does a variable's whole name.
export function rowList(text, names = new Set()) {
  const t = (text || "").trim();
  if (!t || names.has(t)) return t ? [t] : [];
  const out = [];
  let depth = 0, quote = null, cur = "";
  for (const ch of t) {
    if (quote) {
      if (ch === quote) quote = null;
    } else if (ch === '"' || ch === "`") quote = ch;
    else if (ch === "(") depth++;
    else if (ch === ")") depth = Math.max(0, depth - 1);
    else if (ch === "," && depth === 0) {
      out.push(cur.trim());
      cur = "";
      continue;
    }
    cur += ch;
  }
  out.push(cur.trim());
  return out.filter((x) => x);
}

function pageParams(form) {
  const p = new URLSearchParams();
  for (const [k, v] of new FormData(form)) {
    if (typeof v === "string" && v.trim() !== "") p.append(k, v.trim());
  }
  // Only what the analysis chosen reads: a shared URL says no more.
  const own = {
    table: ["row", "col", "control", "pct", "stats", "include_missing", "show", "chart", "dec"],
    means: ["dep", "row", "col", "control", "show", "chart", "dec", "median", "pctiles"],
    compare: ["dep", "row", "base", "show", "chart", "dec"],
    regress: ["formula", "family"],
  };
  const kind = p.get("kind") || "table";
  for (const k of ["dep", "row", "col", "control", "pct", "stats", "include_missing", "show", "chart", "formula", "family", "base", "dec", "median", "pctiles"]) {
    if (!own[kind].includes(k)) p.delete(k);
  }
  if (kind === "table") p.delete("kind");
  if (kind === "regress") p.delete("shown");
  // Column percentages are the default; none ticked is said.
  const pcts = p.getAll("pct");
  if (kind === "table" && !pcts.length) p.append("pct", "none");
  if (pcts.length === 1 && pcts[0] === "col") p.delete("pct");
  if (p.get("chart") === "stacked") p.delete("chart");
  if (p.get("level") === "0.95") p.delete("level");
  if (p.get("design") === "on") p.delete("design");
  return p;
}

function fillForm(form, p) {
  const fresh = !p.get("shown") && !p.getAll("show").length;
  for (const e of form.elements) {
    if (!e.name) continue;
    if (e.type === "radio") e.checked = (p.get("kind") || "table") === e.value;
    else if (e.type === "checkbox") {
      if (e.name === "show") e.checked = fresh ? ["se", "w", "colour"].includes(e.value) : p.getAll("show").includes(e.value);
      else if (e.name === "pct") e.checked = pctsOf(p).includes(e.value);
      else e.checked = !!p.get(e.name);
    } else if (e.tagName === "SELECT") {
      const v = p.get(e.name);
      if (v !== null && ![...e.options].some((o) => o.value === v)) e.append(el("option", { value: v }, v));
      e.value = v ?? e.querySelector("option[selected]")?.value ?? e.options[0].value;
      if (v === null) {
        const dflt = { chart: "stacked", level: "0.95", design: "on", weight: "", family: "gaussian", dec: "" }[e.name];
        if (dflt !== undefined) e.value = dflt;
      }
    } else if (e.tagName === "INPUT") e.value = p.get(e.name) || "";
  }
  syncKind(form);
}

function syncKind(form) {
  const kind = form.querySelector('input[name="kind"]:checked')?.value || "table";
  for (const k of ["means", "compare", "regress"]) document.body.classList.toggle(k, kind === k);
  const need = { "f-dep": ["means", "compare"], "f-base": ["compare"], "f-formula": ["regress"], "f-row": ["table", "means", "compare"] };
  for (const [id, kinds] of Object.entries(need)) {
    const e = $(id);
    if (e) e.required = kinds.includes(kind);
  }
}

// ------------------------------------------------------------ rendering

// Decimals that show a standard error to two significant digits (at
// least one): an SE of 0.023 percentage points is "0.023", never "0.0".
function seDecimals(se) {
  if (se === null || se === undefined || !Number.isFinite(se) || se <= 0) return 1;
  return Math.min(8, Math.max(1, 1 - Math.floor(Math.log10(se))));
}

// A standard error and interval (`f` formats them; none: to the SE's
// two significant digits, the interval to the same decimals).
function uncertainty(u, f, show) {
  const out = [];
  if (!u) return out;
  if (!f) {
    const d = seDecimals(u.se);
    f = (x) => (x === null || x === undefined ? "" : x.toFixed(d));
  }
  if (show.has("se")) out.push(el("span", { class: "se" }, `(${f(u.se)})`));
  if (show.has("ci") && u.lo !== null && u.hi !== null) out.push(el("span", { class: "ci" }, `[${f(u.lo)}, ${f(u.hi)}]`));
  return out;
}

const BANDS = [
  [3.29, "zp3", "zn3"],
  [1.96, "zp2", "zn2"],
  [1.0, "zp1", "zn1"],
];

function zClass(z) {
  if (z === null || z === undefined) return "";
  for (const [t, p, n] of BANDS) {
    if (z >= t) return p;
    if (z <= -t) return n;
  }
  return "";
}

function flagged(u) {
  return u && u.unreliable ? el("span", { class: "flag", title: "unreliable: few records or a large coefficient of variation" }, "‡") : null;
}

const PCT_NAMES = { col: "column percentages", row: "row percentages", total: "percentages of the table" };
const PCT_SHORT = { col: "col", row: "row", total: "tot" };

// The percentages of an answer (several: `pcts`, each under a table's
// `percentages`) and one table's of one kind.
const pctKinds = (j) => j.pcts || (j.pct ? [j.pct] : []);
const pctOf = (j, t, k) => (j.pcts ? t.percentages[k] : { pct: t.pct, pct_se: t.pct_se });

function renderTab(j, show) {
  const out = [];
  const pcts = pctKinds(j);
  const design = !!j.design;
  const weighted = j.weight !== null;
  const colour = show.has("colour");
  let cells = 0;
  let anyFlag = false;
  for (const t of j.tables) {
    cells += t.rows.length * t.cols.length;
  }
  const bonf = cells > 0 ? qnorm(1 - 0.05 / (2 * cells)) : Infinity;
  for (const [ti, t] of j.tables.entries()) {
    const sec = el("section", { class: "xtab" });
    let title = `${j.row_var} by ${j.col_var}`;
    if (j.control_var && t.control) title += `, ${j.control_var} = ${catText(t.control)}`;
    const what = [];
    if (pcts.length > 1) what.push(`${pcts.map((k) => `${PCT_NAMES[k]} (${PCT_SHORT[k]})`).join(", ")}, one under the other`);
    else if (pcts.length) what.push(PCT_NAMES[pcts[0]]);
    if (design && show.has("se")) what.push("standard errors in parentheses");
    if (design && show.has("ci")) what.push(`${Math.round(j.design.level * 100)}% confidence intervals in brackets`);
    if (weighted && show.has("w")) what.push("weighted N");
    if (show.has("n") && (weighted || j.pct)) what.push("unweighted N");
    if (!j.pct) what.unshift(weighted ? "weighted counts" : "counts");
    if (t.rows.some((r) => r.missing) || t.cols.some((c) => c.missing)) what.push("missing values shown as categories and included in the totals and percentages");
    const tbl = el("table", { class: "xt", "aria-describedby": "legend" });
    tbl.append(el("caption", { id: `t${ti}` }, el("span", { class: "title" }, title), el("span", { class: "what" }, `Cells: ${what.join("; ")}.`)));
    const thead = el("tr", {}, el("th", { scope: "col" }, `${j.row_var} \\ ${j.col_var}`));
    for (const c of t.cols) thead.append(el("th", { scope: "col", class: c.missing ? "missing" : null }, catText(c), c.missing ? " (missing)" : ""));
    thead.append(el("th", { scope: "col", class: "total" }, "Total"));
    tbl.append(el("thead", {}, thead));
    const tb = el("tbody");
    const meas = t.weighted || t.counts;
    const total = t.total.weighted ?? t.total.count;
    const rowW = t.row_totals.weighted || t.row_totals.counts;
    const colW = t.col_totals.weighted || t.col_totals.counts;
    // A cell's lines: each percentage asked for (`ps`: [kind, value, its
    // SE and interval]), then the counts.
    const lines = (ps, w, n, uw) => {
      const parts = [];
      if (j.pct) {
        for (const [k, v, u] of ps) {
          const line = el("span", { class: "pline", "data-pct": k });
          if (v !== null && v !== undefined) line.append(el("span", { class: "pct" }, fmtPct(v)));
          if (pcts.length > 1) line.append(el("span", { class: "pk", title: PCT_NAMES[k] }, ` ${PCT_SHORT[k]}`));
          if (u) line.append(...uncertainty(u, null, show));
          parts.push(line);
        }
        if (show.has("w") && weighted && w !== null && w !== undefined) parts.push(el("span", { class: "w" }, fmtSig(w)));
      } else {
        if (w !== null && w !== undefined) parts.push(el("span", { class: "w" }, weighted ? fmtSig(w) : fmtN(w)));
        if (uw) parts.push(...uncertainty(uw, (x) => fmtSig(x, 4), show));
      }
      if (show.has("n") && n !== null && n !== undefined && (weighted || j.pct)) parts.push(el("span", { class: "n" }, `N=${fmtN(n)}`));
      return parts;
    };
    const miss = (c) => (c.missing ? " (missing)" : "");
    t.rows.forEach((r, i) => {
      const tr = el("tr", { class: r.missing ? "missing" : null }, el("th", { scope: "row" }, catText(r), miss(r)));
      t.cols.forEach((c, k) => {
        const z = t.z ? t.z[i][k] : null;
        const ps = pcts.map((p) => {
          const x = pctOf(j, t, p);
          return [p, x.pct ? x.pct[i][k] : null, x.pct_se ? x.pct_se[i][k] : null];
        });
        const u = ps.length ? ps[0][2] : null;
        const uw = t.weighted_se ? t.weighted_se[i][k] : null;
        const f = flagged(j.pct ? u : uw);
        if (f) anyFlag = true;
        const td = el("td", { class: `num ${colour ? zClass(z) : ""}`.trim() }, lines(ps, meas[i][k], t.counts[i][k], uw), f);
        if (z !== null && z !== undefined) {
          td.dataset.z = z.toFixed(4);
          td.title = `z = ${z.toFixed(2)}`;
          if (show.has("z")) td.append(el("span", { class: "zv" }, `z=${z.toFixed(2)}`));
          if (Math.abs(z) >= bonf) td.append(el("span", { class: "bonf", title: "beyond the Bonferroni bound for all the cells" }, "†"));
          if (colour && Math.abs(z) >= 1) td.append(el("span", { class: "sr" }, z > 0 ? ` higher than the total, z ${z.toFixed(1)}` : ` lower than the total, z ${z.toFixed(1)}`));
        }
        tr.append(td);
      });
      // The Total column: 100 for row percentages, else the row's share.
      const rp = pcts.map((p) => [p, p === "row" ? 100 : (100 * rowW[i]) / total, null]);
      tr.append(el("td", { class: "num total" }, lines(rp, rowW[i], t.row_totals.counts[i], null)));
      tb.append(tr);
    });
    const tr = el("tr", { class: "total" }, el("th", { scope: "row" }, "Total"));
    t.cols.forEach((c, k) => {
      const cp = pcts.map((p) => [p, p === "col" ? 100 : (100 * colW[k]) / total, null]);
      tr.append(el("td", { class: "num" }, lines(cp, colW[k], t.col_totals.counts[k], null)));
    });
    tr.append(el("td", { class: "num" }, lines(pcts.map((p) => [p, 100, null]), total, t.total.count, null)));
    tb.append(tr);
    tbl.append(tb);
    sec.append(el("div", { class: "scroll", tabindex: "0", role: "region", "aria-labelledby": `t${ti}` }, tbl));
    sec.append(tests(j, t));
    out.push(sec);
  }
  out.push(legend(j, show, cells, bonf, anyFlag));
  return out;
}

function tests(j, t) {
  const p = el("div", { class: "tests" });
  if (t.rao_scott) {
    const r = t.rao_scott;
    p.append(el("p", {}, `Rao–Scott test of independence (design-based): F = ${r.f.toFixed(3)} on ${r.ndf.toFixed(2)} and ${r.ddf.toFixed(1)} df, p = ${r.p.toPrecision(3)}.`));
  } else if (t.stats) {
    const s = t.stats;
    p.append(el("p", {}, `Chi-square = ${s.chi2.toFixed(2)}, df = ${s.df}, p = ${s.p.toPrecision(3)}; Cramér's V = ${s.cramers_v.toFixed(3)}.`));
    if (t.association) {
      const a = t.association;
      const f = (x) => (x === null || x === undefined ? "–" : x.toFixed(3));
      p.append(el("p", {}, `Gamma ${f(a.gamma)}, tau-b ${f(a.tau_b)}, tau-c ${f(a.tau_c)}, Somers' d (row dependent) ${f(a.somers_d_row)}, lambda ${f(a.lambda)}, Pearson's r ${f(a.pearson_r)}, eta ${f(a.eta_row)}.`));
    }
  }
  return p;
}

function legend(j, show, cells, bonf, anyFlag) {
  const box = el("div", { id: "legend", class: "legend" });
  const along = j.z_along === "row" ? "row" : "column";
  const other = along === "row" ? "column" : "row";
  if (show.has("colour") && j.z_method) {
    const how = {
      design: `its design-based standard error (${j.design?.method === "taylor" ? "linearization" : "replicate weights"})`,
      srs: "its standard error under simple random sampling (no survey design)",
      "srs-weighted": "its standard error as if the weighted sample were a simple random sample: no survey design is set, so the weights' own variance is not accounted for",
    }[j.z_method];
    box.append(el("p", {}, `Colours compare each cell's ${along} percentage with the Total ${along}'s (all records in that ${other}): z is the difference over ${how}.`));
    const ul = el("ul", { class: "swatches", "aria-label": "Colour legend" });
    const items = [
      ["zn3", "z ≤ −3.29 (p < 0.001), lower"],
      ["zn2", "z ≤ −1.96 (p < 0.05), lower"],
      ["zn1", "−1.96 < z ≤ −1"],
      ["", "|z| < 1"],
      ["zp1", "1 ≤ z < 1.96"],
      ["zp2", "z ≥ 1.96 (p < 0.05), higher"],
      ["zp3", "z ≥ 3.29 (p < 0.001), higher"],
    ];
    for (const [c, t] of items) ul.append(el("li", {}, el("span", { class: `sw ${c}`, "aria-hidden": "true" }), t));
    box.append(ul);
    box.append(el("p", {}, `Each cell is tested alone: among ${cells} cells about ${Math.max(1, Math.round(cells / 20))} would pass |z| ≥ 1.96 by chance. Cells marked † pass |z| ≥ ${bonf.toFixed(2)}, the Bonferroni bound for ${cells} cells at 5%.`));
  }
  if (anyFlag) box.append(el("p", {}, `‡ Unreliable: fewer than ${j.design?.min_n ?? 30} records, or a coefficient of variation above ${Math.round((j.design?.max_cv ?? 0.3) * 100)}%.`));
  if (j.design) {
    const d = j.design;
    box.append(el("p", {}, `Standard errors from the survey design: ${d.method === "taylor" ? "Taylor linearization" : `${d.replicates} replicate weights (${d.type})`}, weight ${d.weight}; intervals at ${Math.round(d.level * 100)}% with ${fmtN(d.df)} degrees of freedom.`));
  }
  if (j.weight_cases && (j.weight_cases.missing || j.weight_cases.zero || j.weight_cases.negative)) {
    box.append(el("p", {}, `Weight ${j.weight}: ${fmtN(j.weight_cases.missing)} records with a missing weight left out, ${fmtN(j.weight_cases.zero)} with weight 0.`));
  }
  return box;
}

function renderFreq(j, show) {
  const design = !!j.design;
  const weighted = j.weight !== null;
  const tbl = el("table", { class: "xt freq" });
  tbl.append(el("caption", {}, `${j.variable}${j.label ? ` (${j.label})` : ""}: frequencies`));
  const h = el("tr", {}, el("th", { scope: "col" }, j.variable), el("th", { scope: "col" }, "N"));
  if (weighted) h.append(el("th", { scope: "col" }, "Weighted N"));
  h.append(el("th", { scope: "col" }, "Percent"));
  if (design && show.has("se")) h.append(el("th", { scope: "col" }, "SE (%)"));
  if (design && show.has("ci")) h.append(el("th", { scope: "col" }, `${Math.round(j.design.level * 100)}% CI (%)`));
  tbl.append(el("thead", {}, h));
  const tb = el("tbody");
  let anyFlag = false;
  // A long list is cut on the page (the downloads hold every row).
  const rows = j.rows.slice(0, MAX_FREQ_ROWS);
  for (const r of rows) {
    const tr = el("tr", { class: r.missing ? "missing" : null }, el("th", { scope: "row" }, catText(r), r.missing ? " (missing)" : ""));
    tr.append(el("td", { class: "num" }, fmtN(r.count)));
    if (weighted) tr.append(el("td", { class: "num" }, fmtSig(r.weighted)));
    const f = flagged(r.percent_se);
    if (f) anyFlag = true;
    tr.append(el("td", { class: "num" }, fmtPct(r.percent), f));
    if (design && show.has("se")) tr.append(el("td", { class: "num" }, r.percent_se ? r.percent_se.se.toFixed(seDecimals(r.percent_se.se)) : ""));
    if (design && show.has("ci")) tr.append(el("td", { class: "num" }, r.percent_se && r.percent_se.lo !== null ? `${r.percent_se.lo.toFixed(seDecimals(r.percent_se.se))} – ${r.percent_se.hi.toFixed(seDecimals(r.percent_se.se))}` : ""));
    tb.append(tr);
  }
  const tr = el("tr", { class: "total" }, el("th", { scope: "row" }, "Total"), el("td", { class: "num" }, fmtN(j.total.count)));
  if (weighted) tr.append(el("td", { class: "num" }, fmtSig(j.total.weighted)));
  tr.append(el("td", { class: "num" }, fmtPct(100)));
  if (design && show.has("se")) tr.append(el("td"));
  if (design && show.has("ci")) tr.append(el("td"));
  tb.append(tr);
  tbl.append(tb);
  const cut = j.rows.length > rows.length ? el("p", { class: "hint", id: "cut" }, `The first ${fmtN(rows.length)} of ${fmtN(j.rows.length)} values are shown; Download CSV or JSON for all of them, or recode the variable into groups.`) : null;
  return [el("section", { class: "xtab" }, cut, el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": "Frequencies" }, tbl)), legend(j, new Set(), 0, 0, anyFlag)];
}

function renderMeans(j, show, grid = false) {
  const design = !!j.design;
  const tbl = el("table", { class: "xt means" });
  tbl.append(el("caption", {}, `Mean of ${j.variable}${j.label ? ` (${j.label})` : ""} by ${j.by.join(", ")}`));
  const h = el("tr", {}, ...j.by.map((b) => el("th", { scope: "col" }, b)), el("th", { scope: "col" }, "Mean"));
  if (design && show.has("se")) h.append(el("th", { scope: "col" }, "SE"));
  if (design && show.has("ci")) h.append(el("th", { scope: "col" }, `${Math.round(j.design.level * 100)}% CI`));
  // Medians and percentiles asked for: each with its SE and interval.
  const qs = (j.total_quantiles || []).map((q) => q.p);
  for (const q of qs) {
    h.append(el("th", { scope: "col", class: "q" }, qName(q)));
    if (design && show.has("se")) h.append(el("th", { scope: "col" }, `SE (${qName(q)})`));
    if (design && show.has("ci")) h.append(el("th", { scope: "col" }, `${Math.round(j.design.level * 100)}% CI (${qName(q)})`));
  }
  h.append(el("th", { scope: "col" }, "SD"), el("th", { scope: "col" }, "N"));
  if (j.weight) h.append(el("th", { scope: "col" }, "Weighted N"));
  tbl.append(el("thead", {}, h));
  const tb = el("tbody");
  let anyFlag = false;
  const row = (cats, s, u, cls, quants) => {
    const tr = el("tr", { class: cls }, ...cats);
    const f = flagged(u);
    if (f) anyFlag = true;
    tr.append(el("td", { class: "num mean" }, fmtMean(s.mean), f));
    if (design && show.has("se")) tr.append(el("td", { class: "num" }, u ? fmtSig(u.se, 4) : ""));
    if (design && show.has("ci")) tr.append(el("td", { class: "num" }, u && u.lo !== null ? `${fmtSig(u.lo, 5)} – ${fmtSig(u.hi, 5)}` : ""));
    qs.forEach((p, i) => {
      const q = (quants || [])[i] || {};
      tr.append(el("td", { class: "num q", "data-p": String(p) }, q.value === null || q.value === undefined ? "" : fmtMean(q.value)));
      if (design && show.has("se")) tr.append(el("td", { class: "num" }, q.se ? fmtSig(q.se.se, 4) : ""));
      if (design && show.has("ci")) tr.append(el("td", { class: "num" }, q.se && q.se.lo !== null ? `${fmtSig(q.se.lo, 5)} – ${fmtSig(q.se.hi, 5)}` : ""));
    });
    tr.append(el("td", { class: "num" }, fmtSig(s.sd, 4)), el("td", { class: "num" }, fmtN(s.n)));
    if (j.weight) tr.append(el("td", { class: "num" }, fmtSig(s.sum_weights)));
    return tr;
  };
  for (const g of j.groups) tb.append(row(g.by.map((c, i) => el(i === 0 ? "th" : "td", i === 0 ? { scope: "row" } : {}, catText(c))), g, g.mean_se, null, g.quantiles));
  tb.append(row([el("th", { scope: "row", colspan: String(j.by.length) }, "All")], j.total, j.total_se, "total", j.total_quantiles));
  tbl.append(tb);
  const long = el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": "Means" }, tbl);
  if (!grid) return [el("section", { class: "xtab" }, long), legend(j, new Set(), 0, 0, anyFlag)];
  // Row × column: SDA's table of means, one per control category; every
  // statistic by group follows, folded.
  return [...meansGrids(j, show), el("details", { class: "all-stats" }, el("summary", {}, "Every statistic by group"), long), legend(j, new Set(), 0, 0, anyFlag)];
}

const qName = (p) => (p === 0.5 ? "Median" : `P${+(p * 100).toPrecision(4)}`);
const keyOf = (c) => JSON.stringify(c ? c.value : null);

// Means by row × column (a table per control category): each cell the
// group's mean, its SE and interval as chosen, and its N.
function meansGrids(j, show) {
  const design = !!j.design;
  const uniq = (k) => {
    const seen = new Map();
    for (const g of j.groups) if (!seen.has(keyOf(g.by[k]))) seen.set(keyOf(g.by[k]), g.by[k]);
    return [...seen.values()];
  };
  const rows = uniq(0), cols = uniq(1), ctls = j.by.length > 2 ? uniq(2) : [null];
  const cell = new Map(j.groups.map((g) => [g.by.map(keyOf).join("|"), g]));
  // The margins (each row's and column's mean over the other, and the
  // whole table's), from answers grouped by fewer variables.
  const m = j.margins || {};
  const mg = (a, by) => (a ? new Map(a.groups.map((g) => [g.by.map(keyOf).join("|"), g])) : new Map());
  const byRow = mg(m.row), byCol = mg(m.col), byCtl = mg(m.ctl);
  return ctls.map((ctl, ti) => {
    const title = `Mean of ${j.variable} by ${j.by[0]} and ${j.by[1]}${ctl ? `, ${j.by[2]} = ${catText(ctl)}` : ""}`;
    const tbl = el("table", { class: "xt means2" });
    const qn = (j.total_quantiles || []).map((q) => qName(q.p).toLowerCase());
    tbl.append(el("caption", { id: `m${ti}` }, el("span", { class: "title" }, title), el("span", { class: "what" }, `Cells: mean${qn.length ? `, then ${qn.join(", ")}` : ""}${design && show.has("se") ? "; standard error in parentheses" : ""}${design && show.has("ci") ? "; confidence interval in brackets" : ""}${show.has("n") ? "; N" : ""}. Empty: no records.`)));
    const margins = !!j.margins;
    tbl.append(el("thead", {}, el("tr", {}, el("th", { scope: "col" }, `${j.by[0]} \\ ${j.by[1]}`), ...cols.map((c) => el("th", { scope: "col" }, catText(c))), margins ? el("th", { scope: "col", class: "total" }, "All") : null)));
    const tb = el("tbody");
    const c_ = ctl ? [ctl] : [];
    const all = ctl ? byCtl.get(keyOf(ctl)) : { ...j.total, mean_se: j.total_se, quantiles: j.total_quantiles };
    for (const r of [...rows, ...(margins ? [null] : [])]) {
      const tr = el("tr", { class: r ? null : "total" }, el("th", { scope: "row" }, r ? catText(r) : "All"));
      for (const c of [...cols, ...(margins ? [null] : [])]) {
        const g = r && c ? cell.get([r, c, ...c_].map(keyOf).join("|")) : r ? byRow.get([r, ...c_].map(keyOf).join("|")) : c ? byCol.get([c, ...c_].map(keyOf).join("|")) : all;
        const td = el("td", { class: `num${r && c ? "" : " total"}` });
        if (g) {
          td.append(el("span", { class: "mean" }, fmtMean(g.mean)), flagged(g.mean_se) || "");
          if (g.mean_se) td.append(...uncertainty(g.mean_se, (x) => fmtSig(x, 4), design ? show : new Set()));
          for (const q of g.quantiles || []) if (q.value !== null) td.append(el("span", { class: "q", "data-p": String(q.p) }, `${qName(q.p)} ${fmtMean(q.value)}`));
          if (show.has("n")) td.append(el("span", { class: "n" }, `N=${fmtN(g.n)}`));
        }
        tr.append(td);
      }
      tb.append(tr);
    }
    tbl.append(tb);
    return el("section", { class: "xtab" }, el("div", { class: "scroll", tabindex: "0", role: "region", "aria-labelledby": `m${ti}` }, tbl));
  });
}

// A p-value as R prints small ones.
function fmtP(p) {
  if (p === null || p === undefined || Number.isNaN(p)) return "";
  return p < 2e-16 ? "<2e-16" : fmtSig(p, 3);
}

// Estimates with their SE, t, p and interval (coefficients, differences).
function inferenceTable(caption, first, rows, level, stat = "t") {
  const tbl = el("table", { class: "xt inference" });
  tbl.append(el("caption", {}, caption));
  tbl.append(el("thead", {}, el("tr", {}, ...[first, "Estimate", "SE", stat, "p", `${Math.round(level * 100)}% CI`].map((h) => el("th", { scope: "col" }, h)))));
  const tb = el("tbody");
  for (const [name, i] of rows) {
    tb.append(el("tr", {}, el("th", { scope: "row" }, name),
      el("td", { class: "num" }, fmtSig(i.estimate)), el("td", { class: "num" }, fmtSig(i.se, 4)),
      el("td", { class: "num" }, fmtSig(i.t, 4)), el("td", { class: "num" }, fmtP(i.p)),
      el("td", { class: "num" }, `${fmtSig(i.lo, 5)} – ${fmtSig(i.hi, 5)}`)));
  }
  tbl.append(tb);
  return el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": caption }, tbl);
}

function waldText(w, what) {
  if (!w) return "";
  return `Wald test ${what}: F = ${fmtSig(w.f, 5)} on ${fmtSig(w.ndf)} and ${w.ddf === null ? "∞" : fmtSig(w.ddf)} df, p = ${fmtP(w.p)}.`;
}

function renderRegress(j) {
  const fam = { gaussian: "Linear", logit: "Logit", probit: "Probit", poisson: "Poisson" }[j.family] || j.family;
  const stat = j.df === null ? "z" : "t";
  const t = inferenceTable(`${fam} model: ${j.formula}`, "Term", j.coefficients.map((c) => [c.term, c]), j.level, stat);
  const lines = [
    `${fmtN(j.n)} records, weighted N ${fmtSig(j.weighted_n)}; standard errors: ${j.method}.`,
    j.df !== null ? `Degrees of freedom of the t tests: ${fmtSig(j.df)}${j.design_df !== null ? ` (design df ${fmtSig(j.design_df)} + 1 − ${j.coefficients.length} coefficients)` : ""}.` : "Normal (z) tests: no design degrees of freedom.",
    j.r_squared !== null ? `R² ${fmtSig(j.r_squared, 4)}.` : j.pseudo_r_squared !== null ? `Deviance ${fmtSig(j.deviance)}, null deviance ${fmtSig(j.null_deviance)}, pseudo-R² ${fmtSig(j.pseudo_r_squared, 4)}.` : "",
    waldText(j.wald, "that every coefficient but the intercept is 0"),
    ...j.notes.map((n) => `Note: ${n}.`),
  ].filter((x) => x);
  return [el("section", { class: "xtab" }, t), el("div", { id: "legend", class: "legend" }, ...lines.map((x) => el("p", {}, x)))];
}

function renderCompare(j, show) {
  const c = j.comparison;
  const parts = renderMeans(j, show);
  const level = j.design ? j.design.level : 0.95;
  const t = inferenceTable(`Difference from ${j.by[0]} = ${c.base} (its mean ${fmtSig(c.base_estimate)})`, j.by[0], c.differences.map((d) => [d.group, d]), level, c.df === null ? "z" : "t");
  const lines = [
    `Each group's mean minus the mean of ${j.by[0]} = ${c.base}; standard errors: ${c.method}${c.df !== null && c.df > 0 ? `, ${fmtSig(c.df)} df` : ""}.`,
    c.df !== null && c.df <= 0 ? `No t tests or intervals: the design's degrees of freedom (${fmtSig(c.df + c.differences.length)}) are not more than the ${c.differences.length} differences (R's svyglm gives ${fmtSig(c.df)} residual df).` : "",
    waldText(c.wald, "that every group equals the base"),
  ].filter((x) => x);
  return [...parts, el("section", { class: "xtab diffs" }, t, ...lines.map((x) => el("p", { class: "legend" }, x)))];
}

// ------------------------------------------------------------ the chart

// Okabe–Ito: told apart with every common colour-vision deficiency.
// Okabe–Ito, then Paul Tol's muted set: 16 colours before any repeats.
const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
  "#332288", "#88CCEE", "#117733", "#999933", "#882255", "#AA4499", "#DDCC77", "#44AA99"];
const MAX_BARS = 80;
const MAX_CHARTS = 24;
const MAX_FREQ_ROWS = 2000;
// Axis numbers: 200k, 1.5M.
function compact(v) {
  const a = Math.abs(v);
  if (a >= 1e9) return `${+(v / 1e9).toPrecision(3)}G`;
  if (a >= 1e6) return `${+(v / 1e6).toPrecision(3)}M`;
  if (a >= 1e4) return `${+(v / 1e3).toPrecision(3)}k`;
  return fmtSig(v, 3);
}
const SVGNS = "http://www.w3.org/2000/svg";
function svg(tag, attrs = {}, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
const short = (s, n = 18) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

// Bars: one group per category on the axis, one bar per series.
function chart(title, cats, series, yLabel, stacked, whiskers) {
  const W = 560, H = 320, L = 64, R = 12, T = 28, B = 44;
  const legendH = series.length > 1 ? 24 * Math.ceil(series.length / 2) + 8 : 0;
  const s = svg("svg", { viewBox: `0 0 ${W} ${H + legendH}`, role: "img", "aria-label": title, class: "chart" });
  s.append(svg("title", {}, title));
  let max = 0;
  cats.forEach((_, i) => {
    if (stacked) max = Math.max(max, series.reduce((a, x) => a + (x.values[i] || 0), 0));
    else series.forEach((x) => (max = Math.max(max, (whiskers && x.hi ? x.hi[i] : null) ?? x.values[i] ?? 0, x.values[i] || 0)));
  });
  if (!(max > 0)) max = 1;
  // Percentages summing to 100.00000000000001 are 100.
  max *= 1 - 1e-9;
  const step = Math.pow(10, Math.floor(Math.log10(max)) - 1);
  const nice = [1, 2, 2.5, 5, 10, 20, 25, 50, 100].map((m) => m * step).find((x) => max / x <= 6) || step * 100;
  const top = Math.ceil(max / nice) * nice;
  const y = (v) => T + (H - T - B) * (1 - v / top);
  for (let v = 0; v <= top + 1e-9; v += nice) {
    s.append(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
    s.append(svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", class: "tick" }, compact(v)));
  }
  s.append(svg("text", { x: 12, y: T - 12, class: "axis" }, yLabel));
  const gw = (W - L - R) / Math.max(1, cats.length);
  const bw = stacked ? gw * 0.7 : (gw * 0.8) / Math.max(1, series.length);
  cats.forEach((c, i) => {
    let acc = 0;
    series.forEach((x, k) => {
      const v = x.values[i];
      if (v === null || v === undefined) return;
      const x0 = L + i * gw + (stacked ? gw * 0.15 : gw * 0.1 + k * bw);
      const y0 = stacked ? y(acc + v) : y(v);
      const h = stacked ? y(acc) - y(acc + v) : y(0) - y(v);
      const r = svg("rect", { x: x0, y: y0, width: Math.max(1, bw - 1), height: Math.max(0, h), fill: PALETTE[k % PALETTE.length] });
      r.append(svg("title", {}, `${c}${series.length > 1 ? `, ${x.name}` : ""}: ${fmtSig(v, 4)}`));
      s.append(r);
      if (whiskers && x.lo && x.lo[i] !== null && x.hi[i] !== null && !stacked) {
        const cx = x0 + (bw - 1) / 2;
        s.append(svg("line", { x1: cx, x2: cx, y1: y(x.lo[i]), y2: y(x.hi[i]), class: "whisker" }));
      }
      acc += v;
    });
    const tx = L + i * gw + gw / 2;
    s.append(svg("text", { x: tx, y: H - B + 20, "text-anchor": "middle", class: "tick" }, short(c, Math.max(4, Math.floor(gw / 9)))));
  });
  if (series.length > 1) {
    series.forEach((x, k) => {
      const lx = 12 + (k % 2) * 270, ly = H + 4 + 24 * Math.floor(k / 2);
      s.append(svg("rect", { x: lx, y: ly, width: 14, height: 14, fill: PALETTE[k % PALETTE.length] }));
      s.append(svg("text", { x: lx + 20, y: ly + 12, class: "tick" }, short(x.name, 30)));
    });
  }
  return s;
}

function chartOf(j, kind, how) {
  if (how === "none") return null;
  const n = kind === "tab" ? (j.tables[0]?.cols.length ?? 0) * (how === "bar" ? j.tables[0]?.rows.length ?? 0 : 1) : kind === "freq" ? j.rows.length : j.groups.length;
  if (n > MAX_BARS) return el("p", { class: "hint" }, `No chart: ${n} bars would be too many to read; the table holds every number.`);
  const stacked = how === "stacked";
  if (kind === "tab") {
    // One chart per table (per control category), of the first
    // percentage asked for.
    const charts = j.tables.filter((t) => t.rows.length).slice(0, MAX_CHARTS).map((t) => {
      const along = pctKinds(j)[0] === "row" ? "row" : "col";
      const pv = pctKinds(j).length ? pctOf(j, t, pctKinds(j)[0]).pct : null;
      const vals = pv || t.weighted || t.counts;
      const unit = pv ? `% (${PCT_NAMES[pctKinds(j)[0]]})` : t.weighted ? "weighted N" : "N";
      const title = `${j.row_var} by ${j.col_var}${t.control ? `, ${j.control_var} = ${catText(t.control)}` : ""}`;
      if (along === "row") {
        // Bars are the rows; segments the columns.
        const series = t.cols.map((c, k) => ({ name: catText(c), values: t.rows.map((_, i) => vals[i][k]) }));
        return chart(title, t.rows.map(catText), series, unit, stacked, false);
      }
      const series = t.rows.map((r, i) => ({ name: catText(r), values: t.cols.map((_, k) => vals[i][k]) }));
      return chart(title, t.cols.map(catText), series, unit, stacked, false);
    });
    if (j.tables.length > MAX_CHARTS) charts.push(el("p", { class: "hint" }, `Charts for the first ${MAX_CHARTS} of ${j.tables.length} control categories; the tables hold every number.`));
    return charts.length ? charts : null;
  }
  if (kind === "freq") {
    const rows = j.rows.filter((r) => !r.missing);
    const withCi = rows.some((r) => r.percent_se);
    return chart(`${j.variable}: percent`, rows.map(catText), [{ name: j.variable, values: rows.map((r) => r.percent), lo: withCi ? rows.map((r) => r.percent_se?.lo ?? null) : null, hi: withCi ? rows.map((r) => r.percent_se?.hi ?? null) : null }], "%", false, withCi);
  }
  const gs = j.groups;
  const withCi = gs.some((g) => g.mean_se);
  if ((j.by.length === 2 || j.by.length === 3) && !j.comparison) {
    // Row × column: a group of bars per column category, a bar per row's;
    // a chart per control category.
    const keys = (k) => [...new Map(gs.map((g) => [keyOf(g.by[k]), g.by[k]])).values()];
    const rows = keys(0), cols = keys(1), ctls = j.by.length === 3 ? keys(2) : [null];
    const at = new Map(gs.map((g) => [g.by.map(keyOf).join("|"), g]));
    return ctls.slice(0, MAX_CHARTS).map((ctl) => {
      const series = rows.map((r) => {
        const cell = cols.map((c) => at.get([r, c, ...(ctl ? [ctl] : [])].map(keyOf).join("|")));
        return { name: catText(r), values: cell.map((g) => g?.mean ?? null), lo: withCi ? cell.map((g) => g?.mean_se?.lo ?? null) : null, hi: withCi ? cell.map((g) => g?.mean_se?.hi ?? null) : null };
      });
      return chart(`Mean of ${j.variable} by ${j.by[0]} and ${j.by[1]}${ctl ? `, ${j.by[2]} = ${catText(ctl)}` : ""}`, cols.map(catText), series, `mean of ${j.variable}`, false, withCi);
    });
  }
  return chart(`Mean of ${j.variable}`, gs.map((g) => g.by.map(catText).join(" · ")), [{ name: j.variable, values: gs.map((g) => g.mean), lo: withCi ? gs.map((g) => g.mean_se?.lo ?? null) : null, hi: withCi ? gs.map((g) => g.mean_se?.hi ?? null) : null }], `mean of ${j.variable}`, false, withCi);
}

// ------------------------------------------------------------ downloads

function csvField(x) {
  const s = x === null || x === undefined ? "" : String(x);
  return /[",\n\r]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

export function toCsv(j, kind) {
  const lines = [];
  const push = (a) => lines.push(a.map(csvField).join(","));
  const se = (u) => (u ? [u.se, u.lo, u.hi, u.cv, u.deff, u.unreliable] : ["", "", "", "", "", ""]);
  const seHead = (p) => [`${p}_se`, `${p}_lo`, `${p}_hi`, `${p}_cv`, `${p}_deff`, `${p}_unreliable`];
  if (kind === "tab") {
    const design = !!j.design;
    // Several percentages: a column (and SEs) for each, named by its kind.
    const ks = j.pcts || [null];
    const name = (k) => (k ? `pct_${k}` : "pct");
    push(["control", "control_label", "row", "row_label", "col", "col_label", "count", "weighted", ...ks.map(name), ...(design ? [...seHead("weighted"), ...ks.flatMap((k) => seHead(name(k)))] : []), "z"]);
    for (const t of j.tables) {
      const of = (k) => (k ? t.percentages[k] : { pct: t.pct, pct_se: t.pct_se });
      t.rows.forEach((r, i) => t.cols.forEach((c, k) => push([t.control?.value ?? "", t.control?.label ?? "", r.value, r.label ?? "", c.value, c.label ?? "", t.counts[i][k], t.weighted ? t.weighted[i][k] : "",
        ...ks.map((x) => (of(x).pct ? of(x).pct[i][k] : "")), ...(design ? [...se(t.weighted_se?.[i][k]), ...ks.flatMap((x) => se(of(x).pct_se?.[i][k]))] : []), t.z ? t.z[i][k] : ""])));
    }
  } else if (kind === "freq") {
    const design = !!j.design;
    push(["value", "label", "missing", "count", "weighted", "percent", ...(design ? [...seHead("weighted"), ...seHead("percent")] : [])]);
    for (const r of j.rows) push([r.value, r.label ?? "", r.missing, r.count, r.weighted ?? "", r.percent ?? "", ...(design ? [...se(r.weighted_se), ...se(r.percent_se)] : [])]);
  } else if (kind === "regress") {
    push(["term", "estimate", "se", "t", "p", "lo", "hi"]);
    for (const c of j.coefficients) push([c.term, c.estimate, c.se, c.t, c.p, c.lo, c.hi]);
  } else if (kind === "compare") {
    push([j.by[0], "estimate", "se", "t", "p", "lo", "hi"]);
    for (const d of j.comparison.differences) push([d.group, d.estimate, d.se, d.t, d.p, d.lo, d.hi]);
  } else {
    const design = !!j.design;
    push([...j.by.flatMap((b) => [b, `${b}_label`]), "mean", "sd", "n", "sum_weights", ...(design ? seHead("mean") : [])]);
    for (const g of j.groups) push([...g.by.flatMap((c) => [c.value, c.label ?? ""]), g.mean, g.sd, g.n, g.sum_weights, ...(design ? se(g.mean_se) : [])]);
  }
  return lines.join("\r\n") + "\r\n";
}

function downloads(j, kind, api, nth = 0) {
  const sfx = nth ? `-${nth + 1}` : "";
  const base = `${meta.name}-${kind}${sfx}`;
  const csv = new Blob([toCsv(j, kind)], { type: "text/csv" });
  const a1 = el("a", { href: URL.createObjectURL(csv), download: `${base}.csv`, id: `dl-csv${sfx}` }, "Download CSV");
  const a2 = el("a", { href: api, download: `${base}.json`, id: `dl-json${sfx}` }, "Download JSON");
  const copy = el("button", { type: "button", id: `copy-link${sfx}` }, "Copy link to this table");
  copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(location.href);
      copy.textContent = "Link copied";
    } catch {
      copy.textContent = "Copy the address bar to share this table";
    }
  });
  return el("p", { class: "downloads" }, a1, " · ", a2, " · ", el("a", { href: api, id: `api-link${sfx}` }, "the API URL"), " · ", copy);
}

// ------------------------------------------------------------ running

// What to do on this page when the API says an option would help (its
// JSON `kind` and `option`): the page's own controls, else the API's hint.
function advice(j) {
  const o = j.option?.option;
  if (o === "no_design") return `On this page: set "Standard errors" to "none" to answer without the survey design${j.kind === "design_weight" ? " and weight by another variable" : ""}.`;
  if (o === "allow_negative_weights") return 'On this page: tick "Allow negative weights" under Weight to use them as they are.';
  if (o === "max_cells") return "On this page: recode a variable into fewer groups (AGE(r: 0-17; 18-64; 65-*)) or add a filter; the server's limit cannot be raised from here.";
  if (j.kind === "grouping") return 'On this page: correct the Row, Column or Control box. A recode is written AGE(r: 0-17; 18-64; 65-*) (each range closed, "*" for no bound, ";" between groups, a ")" at the end), a range of values AGE(18-64), a list RACE(1,2).';
  return j.hint ? `Through the API: ${j.hint}.` : "";
}

let latest = 0;
let inflight = null;

// The JSON of an API answer, or an Error with its message: never the
// raw text of a refusal (a proxy's HTML page is named by its status).
async function answerOf(api, signal) {
  const r = await fetch(api, { headers: { accept: "application/json" }, signal });
  const text = await r.text();
  let j = null;
  try {
    j = JSON.parse(text);
  } catch {
    throw new Error(r.ok ? "the server's answer is not JSON" : `HTTP ${r.status} ${r.statusText}`.trim());
  }
  if (!r.ok) {
    const a = advice(j);
    throw new Error(`${j.error || `HTTP ${r.status}`}${a ? `. ${a}` : ""}`);
  }
  return j;
}

// The margins of a row × column table of means: the means by row, by
// column (each within the control's categories) and by control alone.
async function margins(q, signal) {
  const by = (row, ...drop) => {
    const x = new URLSearchParams(q);
    x.set("row", row);
    for (const k of drop) x.delete(k);
    return apiUrl(x);
  };
  const ctl = (q.get("control") || "").trim();
  const urls = { row: by(q.get("row"), "col"), col: by(q.get("col"), "col"), ...(ctl ? { ctl: by(ctl, "col", "control") } : {}) };
  try {
    const out = {};
    for (const [k, u] of Object.entries(urls)) out[k] = await answerOf(u, signal);
    return out;
  } catch (e) {
    if (e.name === "AbortError") throw e;
    return undefined;
  }
}

const countedOf = (j, kind) => (kind === "freq" ? j.total.count : kind === "tab" ? j.tables.reduce((a, t) => a + t.total.count, 0) : kind === "regress" ? j.n : j.total.n);

// One answer drawn: its tables, its charts and its downloads.
function drawn(j, kind, api, p, show, nth) {
  const grid = kind === "means" && !!(p.get("col") || "").trim();
  const parts = kind === "tab" ? renderTab(j, show) : kind === "freq" ? renderFreq(j, show) : kind === "regress" ? renderRegress(j) : kind === "compare" ? renderCompare(j, show) : renderMeans(j, show, grid);
  const c = kind === "regress" ? null : chartOf(j, kind === "compare" ? "means" : kind, p.get("chart") || "stacked");
  const figs = (Array.isArray(c) ? c : [c]).filter((x) => x).map((x) =>
    x.tagName.toLowerCase() === "svg" ? el("figure", { class: "fig" }, el("figcaption", {}, el("span", { class: "ftitle" }, x.getAttribute("aria-label"))), x, el("p", { class: "hint" }, "Hover a bar for its value; the table holds every number.")) : x);
  const figBox = figs.length > 1 ? el("div", { class: "figs" }, figs) : figs[0] || null;
  return el("div", { class: "one", "data-nth": String(nth) }, downloads(j, kind, api, nth), el("div", { class: "answer" }, el("div", { class: "tables" }, parts), figBox));
}

async function run(p, focus = false) {
  // Only the latest query is drawn: an older, slower answer is dropped.
  const mine = ++latest;
  inflight?.abort();
  inflight = new AbortController();
  const signal = inflight.signal;
  const pk = p.get("kind") || "table";
  // Several row variables (SEX, RACE): one table each, as SDA gives.
  const rowVars = pk === "table" || pk === "means" ? rowList(p.get("row"), varNames()) : [p.get("row")];
  const queries = (rowVars.length > 1 ? rowVars : [p.get("row")]).map((r) => {
    const q = new URLSearchParams(p);
    if (r !== null) q.set("row", r);
    return q;
  });
  const apis = queries.map(apiUrl);
  const result = $("result");
  $("error").textContent = "";
  dec = /^[0-4]$/.test(p.get("dec") || "") ? Number(p.get("dec")) : null;
  if (!apis[0]) {
    result.replaceChildren();
    $("status").textContent = pk === "regress" ? "Write the model." : pk === "compare" && p.get("row") ? "Name the dependent variable and the base group." : pk === "means" && p.get("row") ? "Name the dependent variable." : "";
    return;
  }
  $("status").textContent = "Running…";
  result.setAttribute("aria-busy", "true");
  const t0 = performance.now();
  let js;
  try {
    js = await Promise.all(apis.map(async (api, i) => {
      try {
        const j = await answerOf(api, signal);
        if (pk === "means" && (queries[i].get("col") || "").trim()) j.margins = await margins(queries[i], signal);
        return j;
      } catch (e) {
        if (apis.length > 1 && e.name !== "AbortError") e.message = `${rowVars[i]}: ${e.message}`;
        throw e;
      }
    }));
  } catch (e) {
    if (mine !== latest) return;
    result.removeAttribute("aria-busy");
    result.replaceChildren();
    $("status").textContent = "";
    $("error").textContent = `The query was not answered: ${e.message}`;
    if (focus) $("error").focus();
    return;
  }
  if (mine !== latest) return;
  const kind = pk === "compare" ? "compare" : apis[0].split("?")[0].split("/").pop();
  const j = js[0];
  const counted = countedOf(j, kind);
  const took = `Answered in ${Math.round(performance.now() - t0)} ms.`;
  if (js.every((x) => countedOf(x, kind) === 0)) {
    result.removeAttribute("aria-busy");
    result.replaceChildren(el("p", { class: "empty" }, `No records are counted${j.filter ? `: the filter ${j.filter} matches none` : ""}${p.get("include_missing") ? "" : " (or every value is missing)"}.`));
    $("status").textContent = took;
    if (focus) show_(result);
    return;
  }
  const show = new Set(p.getAll("show"));
  if (!p.get("shown") && !show.size) ["se", "w", "colour"].forEach((x) => show.add(x));
  const several = js.length > 1 ? `; ${js.length} tables, one per row variable (${rowVars.join(", ")})` : "";
  const head = el("div", { class: "meta" }, el("p", {}, `${meta.name}: ${fmtN(counted)} records counted${j.filter ? `, filter ${j.filter}` : ""}${j.weight ? `, weight ${j.weight}` : ", unweighted"}${several}.`));
  result.replaceChildren(head, ...js.map((x, i) => drawn(x, kind, apis[i], p, show, i)));
  result.removeAttribute("aria-busy");
  $("status").textContent = took;
  if (focus) show_(result);
}

// The answer brought into view and focused (after Run): a keyboard or
// screen-reader user lands on it, not back at the form.
function show_(box) {
  box.focus({ preventScroll: true });
  box.scrollIntoView({ block: "start" });
}

let names_ = null;
const varNames = () => (names_ ??= new Set([...document.querySelectorAll("#vlist button.var")].map((b) => b.dataset.name)));

// ------------------------------------------------------------ variables

async function showVariable(name) {
  const box = $("vinfo");
  const body = $("vinfo-body");
  box.hidden = false;
  $("vinfo-h").textContent = name;
  body.replaceChildren(el("p", {}, "Loading…"));
  let j;
  try {
    const r = await fetch(`/api/v1/datasets/${enc(meta.name)}/variables/${enc(name)}`);
    j = await r.json();
    if (!r.ok) throw new Error(j.error);
  } catch (e) {
    body.replaceChildren(el("p", { role: "alert" }, `Not available: ${e.message}`));
    return;
  }
  const v = j.variable;
  const use = el("div", { class: "use", role: "group", "aria-label": `Put ${name} in the form` });
  for (const [field, label] of [["row", "Row"], ["col", "Column"], ["control", "Control"], ["dep", "Dependent"], ["formula", "Model"], ["filter", "Filter"]]) {
    const b = el("button", { type: "button", "data-field": field }, label);
    b.addEventListener("click", () => {
      const input = $(`f-${field}`);
      // Names that are not plain identifiers are quoted for the grammar.
      const ref = /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ? name : `"${name}"`;
      if (field === "filter") input.value = `${input.value ? `${input.value} ` : ""}${ref}()`;
      else if (field === "formula") {
        // The first variable is the outcome; each next one a term (text
        // variables are factors by themselves).
        const f = input.value.trim();
        input.value = !f ? `${ref} ~ ` : /~\s*$/.test(f) ? `${f} ${ref}` : `${f} + ${ref}`;
        document.querySelector('input[name="kind"][value="regress"]').checked = true;
        syncKind($("form"));
      }
      else if (ref !== name) input.value = ref;
      else if (ref === name) input.value = name;
      if (field === "dep" && !document.querySelector('input[name="kind"][value="compare"]').checked) {
        document.querySelector('input[name="kind"][value="means"]').checked = true;
        syncKind($("form"));
      }
      input.focus();
    });
    use.append(b);
  }
  const parts = [el("p", {}, v.label || "(no label)"), use];
  if (v.description) parts.push(el("p", { class: "hint desc" }, v.description));
  parts.push(el("p", { class: "hint" }, `${v.kind}${v.decimals ? `, ${v.decimals} decimals` : ""}${v.missing_codes.length ? `; missing codes ${v.missing_codes.join(", ")}` : ""}`));
  if (j.frequencies) parts.push(freqMini(j.frequencies));
  else if (j.note) parts.push(el("p", { class: "hint" }, j.note));
  body.replaceChildren(...parts);
}

function freqMini(f) {
  const t = el("table", { class: "mini" }, el("caption", {}, `Frequencies${f.weight ? ` (weighted by ${f.weight})` : ""}`));
  t.append(el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Value"), el("th", { scope: "col" }, "N"), el("th", { scope: "col" }, "%"))));
  const tb = el("tbody");
  const rows = f.rows.slice(0, 60);
  for (const r of rows) tb.append(el("tr", { class: r.missing ? "missing" : null }, el("th", { scope: "row" }, catText(r), r.missing ? " (missing)" : ""), el("td", { class: "num" }, f.weight ? fmtSig(r.weighted) : fmtN(r.count)), el("td", { class: "num" }, fmtPct(r.percent))));
  if (f.rows.length > rows.length) tb.append(el("tr", {}, el("td", { colspan: "3" }, `… ${f.rows.length - rows.length} more values`)));
  t.append(tb);
  return el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": "Frequencies" }, t);
}

function searchable(input, items, text) {
  input.addEventListener("input", () => {
    const q = input.value.trim().toLowerCase();
    for (const it of items) it.hidden = q !== "" && !text(it).toLowerCase().includes(q);
  });
}

// ------------------------------------------------------------ start

function analysisPage() {
  const form = $("form");
  const p = new URLSearchParams(location.search);
  fillForm(form, p);
  form.addEventListener("change", (e) => {
    if (e.target.name === "kind") syncKind(form);
  });
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const q = pageParams(form);
    history.pushState(null, "", `${location.pathname}?${q}`);
    run(q, true);
  });
  form.addEventListener("reset", (e) => {
    e.preventDefault();
    history.pushState(null, "", location.pathname);
    fillForm(form, new URLSearchParams());
    run(new URLSearchParams());
  });
  addEventListener("popstate", () => {
    const q = new URLSearchParams(location.search);
    fillForm(form, q);
    run(q);
  });
  const items = [...document.querySelectorAll("#vlist li")];
  searchable($("vsearch"), items, (li) => li.textContent);
  for (const b of document.querySelectorAll("#vlist button.var")) b.addEventListener("click", () => showVariable(b.dataset.name));
  run(p);
}

function codebookPage() {
  const entries = [...document.querySelectorAll("details.entry")];
  searchable($("cbsearch"), entries, (d) => d.querySelector("summary").textContent);
  for (const d of entries) {
    d.addEventListener("toggle", async () => {
      const box = d.querySelector(".freq");
      if (!d.open || box.dataset.done) return;
      box.dataset.done = "1";
      box.textContent = "Loading frequencies…";
      try {
        const r = await fetch(`/api/v1/datasets/${enc(meta.name)}/variables/${enc(d.dataset.name)}`);
        const j = await r.json();
        if (!r.ok) throw new Error(j.error);
        box.replaceChildren(j.frequencies ? freqMini(j.frequencies) : el("p", { class: "hint" }, j.note || ""));
      } catch (e) {
        box.textContent = `Frequencies not available: ${e.message}`;
      }
    });
  }
  if (location.hash) {
    const d = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (d && d.tagName === "DETAILS") d.open = true;
  }
}

if (meta.codebook) codebookPage();
else if (meta.name) analysisPage();
