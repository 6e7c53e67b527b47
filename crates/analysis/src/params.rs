//! Requests from named text parameters — a URL's query string, a Python
//! call's keyword arguments — parsed once here for every front end that
//! is not the CLI (whose flags map onto the same [`Request`]).

use crate::{Analysis, Pct, PctInterval, Request};

/// The parameters [`request_from_params`] reads, for front ends that
/// refuse unknown ones (a misspelt `fliter=` must not be ignored).
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
];

fn flag(name: &str, v: Option<String>) -> Result<Option<bool>, String> {
    match v.as_deref().map(str::trim) {
        None => Ok(None),
        Some("1" | "true" | "True" | "yes" | "on") => Ok(Some(true)),
        Some("0" | "false" | "False" | "no" | "off" | "") => Ok(Some(false)),
        Some(x) => Err(format!("{name}={x:?}: expected true or false")),
    }
}

fn number<T: std::str::FromStr>(
    name: &str,
    v: Option<String>,
    what: &str,
) -> Result<Option<T>, String> {
    v.map(|s| {
        s.trim()
            .parse::<T>()
            .map_err(|_| format!("{name}={s:?}: expected {what}"))
    })
    .transpose()
}

pub use microtab_engine::split_list;

/// A [`Request`] for `analysis` (`freq`, `tab` or `means`) from named
/// parameters (`get(name)` gives a parameter's text, `None` when absent):
/// `var` (freq, means), `row`, `col`, `control`, `pct` (`row`, `col`,
/// `total`), `stats` (tab), `by` (means: names separated by commas or
/// spaces outside parentheses: [`split_list`]), `weight`, `filter`, `include_missing`, `design` (`false`
/// ignores the stored design), `level` (0.95), `quantiles` (means:
/// probabilities, comma-separated), `max_cells`, `pct_ci` (`logit`,
/// `korn-graubard`), `min_n`, `max_cv` (a fraction). Errors name the
/// parameter and what was expected.
pub fn request_from_params(
    analysis: &str,
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<Request, String> {
    let text = |k: &str| {
        get(k)
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let need = |k: &str| text(k).ok_or_else(|| format!("missing parameter '{k}'"));
    let analysis = match analysis {
        "freq" => Analysis::Freq { var: need("var")? },
        "tab" => Analysis::Tab {
            row: need("row")?,
            col: need("col")?,
            control: text("control"),
            pct: match text("pct").as_deref() {
                None => None,
                Some("row") => Some(Pct::Row),
                Some("col" | "column") => Some(Pct::Col),
                Some("total") => Some(Pct::Total),
                Some(p) => return Err(format!("pct={p:?}: expected row, col or total")),
            },
            stats: flag("stats", get("stats"))?.unwrap_or(false),
        },
        "means" => {
            let by = split_list(&need("by")?, true);
            Analysis::Means {
                var: need("var")?,
                by,
            }
        }
        other => {
            return Err(format!(
                "unknown analysis {other:?}: expected freq, tab or means"
            ))
        }
    };
    let mut r = Request::new(analysis);
    r.weight = text("weight");
    r.filter = text("filter");
    r.include_missing = flag("include_missing", get("include_missing"))?.unwrap_or(false);
    r.z = flag("z", get("z"))?.unwrap_or(false);
    r.use_design = flag("design", get("design"))?.unwrap_or(true);
    if let Some(l) = number::<f64>("level", get("level"), "a probability such as 0.95")? {
        if !(l > 0.0 && l < 1.0) {
            return Err(format!(
                "level={l}: expected a probability in (0, 1), e.g. 0.95"
            ));
        }
        r.level = l;
    }
    if let Some(q) = text("quantiles") {
        r.quantiles = q
            .split([',', ' '])
            .filter(|s| !s.is_empty())
            .map(|p| match p.parse::<f64>() {
                Ok(x) if x > 0.0 && x < 1.0 => Ok(x),
                _ => Err(format!(
                    "quantiles: {p:?} is not a probability in (0, 1) (0.5 is the median)"
                )),
            })
            .collect::<Result<_, _>>()?;
    }
    if let Some(m) = number::<usize>("max_cells", get("max_cells"), "a number of cells")? {
        r.max_cells = m;
    }
    if let Some(n) = number::<u64>("min_n", get("min_n"), "a number of records")? {
        r.min_n = n;
    }
    if let Some(c) = number::<f64>("max_cv", get("max_cv"), "a fraction such as 0.3")? {
        if !(c > 0.0 && c.is_finite()) {
            return Err(format!(
                "max_cv={c}: expected a positive fraction such as 0.3"
            ));
        }
        r.max_cv = c;
    }
    match text("pct_ci").as_deref() {
        None | Some("logit") => {}
        Some("korn-graubard") => r.pct_interval = PctInterval::KornGraubard,
        Some(x) => return Err(format!("pct_ci={x:?}: expected logit or korn-graubard")),
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(analysis: &str, pairs: &[(&str, &str)]) -> Result<Request, String> {
        let get = |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        };
        request_from_params(analysis, &get)
    }

    #[test]
    fn grouping_lists_keep_recodes_whole() {
        let r = ask(
            "means",
            &[
                ("var", "INCTOT"),
                ("by", "AGE(r: 0-17; 18-64; 65-*), RACE(1,3) SEX \"my var\""),
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
                "RACE(1,3)",
                "SEX",
                "\"my var\""
            ]
        );
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
            ],
        )
        .unwrap();
        assert_eq!(
            r.analysis,
            Analysis::Tab {
                row: "SEX".into(),
                col: "EDUC".into(),
                control: None,
                pct: Some(Pct::Row),
                stats: true
            }
        );
        assert_eq!(r.weight.as_deref(), Some("PERWT"));
        let m = ask(
            "means",
            &[
                ("var", "INC"),
                ("by", "SEX, EDUC"),
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
        assert!(ask("freq", &[("var", "A"), ("stats", "maybe")]).is_ok());
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
        assert!(ask("plot", &[]).unwrap_err().contains("unknown analysis"));
    }
}
