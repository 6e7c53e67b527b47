//! Requests from named parameters — a URL's query string, a Python
//! call's keyword arguments (as JSON whose lists stay lists) — read into
//! typed [`Params`] and checked once here for every front end that is not
//! the CLI (whose flags map onto the same [`Request`]).

use crate::{Analysis, Pct, PctInterval, Request};
use serde::Deserialize;

/// The parameters [`Params`] has, for front ends that refuse unknown ones
/// (a misspelt `fliter=` must not be ignored).
pub const PARAMS: &[&str] = &[
    "var",
    "row",
    "col",
    "control",
    "by",
    "pct",
    "stats",
    "weight",
    "filter",
    "include_missing",
    "design",
    "level",
    "quantiles",
    "max_cells",
    "pct_ci",
    "min_n",
    "max_cv",
    "z",
    "allow_negative_weights",
    "formula",
    "family",
    "diff",
    "numerator",
    "denominator",
    "vars",
    "test_mean",
];

/// A request's options as named, typed parameters: what a Python call's
/// keywords (JSON, read with serde) and a URL's query string
/// ([`Params::from_pairs`]) both become before [`Params::request`] checks
/// them. A name is one string whatever it holds (spaces, commas,
/// parentheses, quotes); `by` is a list.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Params {
    /// The variable (freq, means).
    pub var: Option<String>,
    /// Row variable (tab).
    pub row: Option<String>,
    /// Column variable (tab).
    pub col: Option<String>,
    /// Control variable (tab).
    pub control: Option<String>,
    /// Grouping variables, outermost first (means).
    pub by: Vec<String>,
    /// Percentages (tab): one base, several separated by commas
    /// (`col,row,total`), or in JSON a list of them.
    #[serde(deserialize_with = "pcts")]
    pub pct: Vec<Pct>,
    /// Chi-square test and association measures (tab).
    pub stats: bool,
    /// Weight variable.
    pub weight: Option<String>,
    /// Filter.
    pub filter: Option<String>,
    /// Missing values as categories (freq, tab).
    pub include_missing: bool,
    /// `false` ignores the dataset's survey design.
    pub design: Option<bool>,
    /// Confidence level, a probability (0.95).
    pub level: Option<f64>,
    /// Quantiles' probabilities (means).
    pub quantiles: Vec<f64>,
    /// Most cells a result may have.
    pub max_cells: Option<usize>,
    /// How percentages' intervals are formed.
    pub pct_ci: Option<PctInterval>,
    /// Fewest records of a reliable estimate.
    pub min_n: Option<u64>,
    /// Largest coefficient of variation of a reliable estimate (a
    /// fraction).
    pub max_cv: Option<f64>,
    /// Each cell's z-statistic (tab).
    pub z: bool,
    /// Accept negative weights.
    pub allow_negative_weights: bool,
    /// The model (regress), as R writes it.
    pub formula: Option<String>,
    /// The model's family (regress; gaussian by default).
    pub family: Option<crate::family::Family>,
    /// Compare each group with the group of this value (means).
    pub diff: Option<String>,
    /// The ratio's numerator (ratio).
    pub numerator: Option<String>,
    /// The ratio's denominator (ratio).
    pub denominator: Option<String>,
    /// The variables correlated (corr).
    pub vars: Vec<String>,
    /// Test each group's mean against this value (means).
    pub test_mean: Option<f64>,
    /// A design held for this request instead of the dataset's stored
    /// one (built by [`build_design`](crate::build_design); Python's
    /// `with_design`). Not a URL parameter.
    pub with_design: Option<microtab_store::Design>,
}

/// Percentage bases from JSON: `null`, a text (`"col,row"`) or a list
/// of texts, each base once in the order given.
fn pcts<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Pct>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Words {
        One(Option<String>),
        Many(Vec<String>),
    }
    let words: Vec<String> = match Words::deserialize(d)? {
        Words::One(s) => s.into_iter().collect(),
        Words::Many(v) => v,
    };
    let mut out: Vec<Pct> = Vec::new();
    for w in &words {
        for p in Pct::list(w).map_err(serde::de::Error::custom)? {
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    Ok(out)
}

fn flag(name: &str, v: &str) -> Result<bool, String> {
    match v.trim() {
        "1" | "true" | "True" | "yes" | "on" => Ok(true),
        "0" | "false" | "False" | "no" | "off" | "" => Ok(false),
        x => Err(format!("{name}={x:?}: expected true or false")),
    }
}

fn number<T: std::str::FromStr>(name: &str, v: &str, what: &str) -> Result<T, String> {
    v.trim()
        .parse::<T>()
        .map_err(|_| format!("{name}={v:?}: expected {what}"))
}

/// `Some(text)` trimmed, `None` when empty.
fn text(v: &str) -> Option<String> {
    Some(v.trim().to_string()).filter(|s| !s.is_empty())
}

pub use microtab_engine::split_list;

impl Params {
    /// Parameters from a query string's `(name, value)` pairs, in order.
    /// `by` may be given once per grouping argument (`by=A&by=B`), each
    /// value kept as given: a front end that knows the dataset expands a
    /// value that is a list (`by=A,B`) with
    /// [`var_names`](microtab_engine::var_names), which keeps a value that
    /// names a variable whole. `quantiles` may be repeated or a list of
    /// probabilities separated by commas or spaces. Any other parameter
    /// given twice, and an unknown one, is an error naming it.
    pub fn from_pairs(pairs: &[(String, String)]) -> Result<Params, String> {
        let mut p = Params::default();
        let mut seen: Vec<&str> = Vec::new();
        for (k, v) in pairs {
            let k = k.as_str();
            if !PARAMS.contains(&k) {
                return Err(format!(
                    "unknown parameter {k:?}; expected some of {}",
                    PARAMS.join(", ")
                ));
            }
            if !matches!(k, "by" | "quantiles" | "vars") {
                if seen.contains(&k) {
                    return Err(format!("parameter {k} is given twice"));
                }
                seen.push(k);
            }
            match k {
                "var" => p.var = text(v),
                "row" => p.row = text(v),
                "col" => p.col = text(v),
                "control" => p.control = text(v),
                "by" => p.by.extend(text(v)),
                "weight" => p.weight = text(v),
                "formula" => p.formula = text(v),
                "diff" => p.diff = text(v),
                "numerator" => p.numerator = text(v),
                "denominator" => p.denominator = text(v),
                "vars" => p.vars.extend(text(v)),
                "test_mean" => p.test_mean = Some(number(k, v, "a number")?),
                "family" => {
                    p.family = text(v)
                        .map(|x| x.parse().map_err(|e| format!("family: {e}")))
                        .transpose()?
                }
                "filter" => p.filter = text(v),
                "pct" => p.pct = Pct::list(v)?,
                "pct_ci" => {
                    p.pct_ci = text(v)
                        .map(|x| x.parse().map_err(|e| format!("pct_ci: {e}")))
                        .transpose()?
                }
                "stats" => p.stats = flag(k, v)?,
                "include_missing" => p.include_missing = flag(k, v)?,
                "z" => p.z = flag(k, v)?,
                "allow_negative_weights" => p.allow_negative_weights = flag(k, v)?,
                "design" => p.design = Some(flag(k, v)?),
                "level" => p.level = Some(number(k, v, "a probability such as 0.95")?),
                "max_cells" => p.max_cells = Some(number(k, v, "a number of cells")?),
                "min_n" => p.min_n = Some(number(k, v, "a number of records")?),
                "max_cv" => p.max_cv = Some(number(k, v, "a fraction such as 0.3")?),
                "quantiles" => {
                    for q in v.split([',', ' ']).filter(|s| !s.is_empty()) {
                        p.quantiles.push(q.parse::<f64>().map_err(|_| {
                            format!("quantiles: {q:?} is not a probability in (0, 1) (0.5 is the median)")
                        })?);
                    }
                }
                _ => unreachable!("every name of PARAMS is read"),
            }
        }
        Ok(p)
    }

    /// The [`Request`] for `analysis` (`freq`, `tab`, `means` or
    /// `regress`): `var` (freq, means), `row`, `col`, `control`, `pct`,
    /// `stats`, `z` (tab), `by` (means, ratio), `diff` (means, tab),
    /// `test_mean` (means), `formula` and `family` (regress), `numerator`
    /// and `denominator` (ratio), `vars` (corr), and the options every
    /// analysis shares. Errors name
    /// the parameter and what was expected.
    pub fn request(self, analysis: &str) -> Result<Request, String> {
        fn need(k: &str, v: Option<String>) -> Result<String, String> {
            v.ok_or_else(|| format!("missing parameter '{k}'"))
        }
        let analysis = match analysis {
            "freq" => Analysis::Freq {
                var: need("var", self.var)?,
            },
            "tab" => Analysis::Tab {
                row: need("row", self.row)?,
                col: need("col", self.col)?,
                control: self.control,
                pct: self.pct,
                stats: self.stats,
            },
            // No `by`: the mean of all the records (one group).
            "means" => Analysis::Means {
                var: need("var", self.var)?,
                by: self.by,
            },
            "regress" => Analysis::Regress {
                formula: need("formula", self.formula)?,
                family: self.family.unwrap_or(crate::family::Family::Gaussian),
            },
            "ratio" => Analysis::Ratio {
                numerator: need("numerator", self.numerator)?,
                denominator: need("denominator", self.denominator)?,
                by: self.by,
            },
            "corr" => {
                if self.vars.len() < 2 {
                    return Err("corr needs parameter 'vars' naming two or more variables".into());
                }
                Analysis::Corr { vars: self.vars }
            }
            other => {
                return Err(format!(
                    "unknown analysis {other:?}: expected freq, tab, means, regress, ratio or corr"
                ))
            }
        };
        let mut r = Request::new(analysis);
        r.weight = self.weight;
        r.filter = self.filter;
        r.include_missing = self.include_missing;
        r.z = self.z;
        r.allow_negative_weights = self.allow_negative_weights;
        r.use_design = self.design.unwrap_or(true);
        if let Some(l) = self.level {
            if !(l > 0.0 && l < 1.0) {
                return Err(format!(
                    "level={l}: expected a probability in (0, 1), e.g. 0.95"
                ));
            }
            r.level = l;
        }
        if let Some(p) = self.quantiles.iter().find(|&&p| !(p > 0.0 && p < 1.0)) {
            return Err(format!(
                "quantiles: {p} is not a probability in (0, 1) (0.5 is the median)"
            ));
        }
        r.quantiles = self.quantiles;
        r.max_cells = self.max_cells.unwrap_or(r.max_cells);
        r.min_n = self.min_n.unwrap_or(r.min_n);
        if let Some(c) = self.max_cv {
            if !(c > 0.0 && c.is_finite()) {
                return Err(format!(
                    "max_cv={c}: expected a positive fraction such as 0.3"
                ));
            }
            r.max_cv = c;
        }
        r.pct_interval = self.pct_ci.unwrap_or_default();
        r.diff = self.diff;
        if let Some(v) = self.test_mean {
            if !v.is_finite() {
                return Err(format!("test_mean={v}: expected a finite number"));
            }
        }
        r.test_mean = self.test_mean;
        r.design = self.with_design;
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(analysis: &str, pairs: &[(&str, &str)]) -> Result<Request, String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Params::from_pairs(&pairs)?.request(analysis)
    }

    #[test]
    fn repeated_grouping_arguments_stay_whole() {
        let r = ask(
            "means",
            &[
                ("var", "INCTOT"),
                ("by", "AGE(r: 0-17; 18-64; 65-*)"),
                ("by", "Body Mass (g)"),
                ("by", "Flipper Length, mm"),
            ],
        )
        .unwrap();
        let Analysis::Means { by, .. } = r.analysis else {
            panic!("means")
        };
        assert_eq!(
            by,
            [
                "AGE(r: 0-17; 18-64; 65-*)",
                "Body Mass (g)",
                "Flipper Length, mm"
            ]
        );
    }

    #[test]
    fn json_lists_stay_lists() {
        let p: Params = serde_json::from_str(
            r#"{"var": "x", "by": ["Body Mass (g)", "a \"q\" b"], "pct_ci": "beta", "quantiles": [0.5]}"#,
        )
        .unwrap();
        let r = p.request("means").unwrap();
        assert_eq!(
            r.analysis,
            Analysis::Means {
                var: "x".into(),
                by: vec!["Body Mass (g)".into(), "a \"q\" b".into()]
            }
        );
        assert_eq!(r.pct_interval, PctInterval::KornGraubard);
        let e = serde_json::from_str::<Params>(r#"{"fliter": "A(1)"}"#).unwrap_err();
        assert!(e.to_string().contains("fliter"), "{e}");
        let e = serde_json::from_str::<Params>(r#"{"pct": "rows"}"#).unwrap_err();
        assert!(e.to_string().contains("row, col or total"), "{e}");
        let p: Params = serde_json::from_str(r#"{"pct": "col, row,col"}"#).unwrap();
        assert_eq!(p.pct, [Pct::Col, Pct::Row]);
        let p: Params = serde_json::from_str(r#"{"pct": ["total", "row"]}"#).unwrap();
        assert_eq!(p.pct, [Pct::Total, Pct::Row]);
        let p: Params = serde_json::from_str(r#"{"pct": null}"#).unwrap();
        assert!(p.pct.is_empty());
        let e = serde_json::from_str::<Params>(r#"{"pct": ["col", "rows"]}"#).unwrap_err();
        assert!(e.to_string().contains("'rows'"), "{e}");
    }

    #[test]
    fn parameters_become_requests() {
        let r = ask(
            "tab",
            &[
                ("row", "SEX"),
                ("col", "EDUC"),
                ("pct", "row"),
                ("stats", "true"),
                ("weight", "PERWT"),
                ("allow_negative_weights", "true"),
            ],
        )
        .unwrap();
        assert_eq!(
            r.analysis,
            Analysis::Tab {
                row: "SEX".into(),
                col: "EDUC".into(),
                control: None,
                pct: vec![Pct::Row],
                stats: true
            }
        );
        assert_eq!(r.weight.as_deref(), Some("PERWT"));
        assert!(r.allow_negative_weights);
        let m = ask(
            "means",
            &[
                ("var", "INC"),
                ("by", "SEX"),
                ("by", "EDUC"),
                ("quantiles", "0.5,0.9"),
            ],
        )
        .unwrap();
        assert_eq!(
            m.analysis,
            Analysis::Means {
                var: "INC".into(),
                by: vec!["SEX".into(), "EDUC".into()]
            }
        );
        assert_eq!(m.quantiles, [0.5, 0.9]);
    }

    #[test]
    fn bad_parameters_are_named() {
        assert!(ask("tab", &[("row", "A")]).unwrap_err().contains("'col'"));
        assert!(ask("freq", &[("var", "A"), ("level", "95")])
            .unwrap_err()
            .contains("level"));
        assert!(ask("freq", &[("var", "A"), ("var", "B")])
            .unwrap_err()
            .contains("twice"));
        assert!(ask("freq", &[("var", "A"), ("fliter", "B")])
            .unwrap_err()
            .contains("fliter"));
        assert!(
            ask("tab", &[("row", "A"), ("col", "B"), ("stats", "maybe")])
                .unwrap_err()
                .contains("stats")
        );
        assert!(
            ask("means", &[("var", "A"), ("by", "B"), ("quantiles", "50")])
                .unwrap_err()
                .contains("quantiles")
        );
        // No `by`: the mean of all the records.
        assert_eq!(
            ask("means", &[("var", "A")]).unwrap().analysis,
            Analysis::Means {
                var: "A".into(),
                by: vec![]
            }
        );
        assert!(ask("means", &[("by", "B")]).unwrap_err().contains("'var'"));
        assert!(
            ask("tab", &[("row", "A"), ("col", "B"), ("pct", "col,rows")])
                .unwrap_err()
                .contains("'rows'")
        );
        assert_eq!(
            ask("tab", &[("row", "A"), ("col", "B"), ("pct", "total, col,")])
                .unwrap()
                .analysis,
            Analysis::Tab {
                row: "A".into(),
                col: "B".into(),
                control: None,
                pct: vec![Pct::Total, Pct::Col],
                stats: false
            }
        );
        assert!(ask("plot", &[]).unwrap_err().contains("unknown analysis"));
    }
}
