//! `microtab weight`: post-stratification, raking and calibration of a
//! weight to population totals (and of its replicate weights the same
//! way), and trimming, written as new variables with the design set.

use anyhow::{bail, Context, Result};
use microtab_analysis::weighting::{self, Distance, Method, WeightReport, WeightSpec};
use std::path::PathBuf;
use std::time::Instant;

/// Arguments of `weight`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Dataset directory.
    dataset: PathBuf,
    /// Name of the new weight (its replicate weights are NEW_1 … NEW_R).
    new: String,
    /// The weight to adjust (default: the design's weight).
    #[arg(long, value_name = "VAR")]
    from: Option<String>,
    /// Post-stratify to the totals of the cells of one variable or of
    /// several crossed, e.g. 'AGEGRP*SEX'.
    #[arg(long, value_name = "VARS", group = "how")]
    poststrata: Option<String>,
    /// Rake (iterative proportional fitting) to margins separated by ';',
    /// each a variable or several crossed, e.g. 'AGEGRP; SEX; REGION'.
    #[arg(long, value_name = "MARGINS", group = "how")]
    rake: Option<String>,
    /// Calibrate to the totals of a model's terms joined by '+': a
    /// variable whose totals are by value (or written factor(X)) is
    /// categorical, one with a single total numeric; A*B crosses, e.g.
    /// 'AGE + factor(SEX) + REGION'.
    #[arg(long, value_name = "MODEL", group = "how")]
    calibrate: Option<String>,
    /// Calibration distance: linear (GREG), raking or logit (R's calfun).
    #[arg(long, value_name = "NAME", default_value = "linear", alias = "calfun")]
    distance: String,
    /// Bounds on g = new weight / old weight for calibration, e.g. 0.3,3
    /// (required by logit).
    #[arg(long, value_name = "LO,HI")]
    bounds: Option<String>,
    /// CSV file of population totals with the columns variable,value,total
    /// (crossed: A*B and a*b; a numeric variable's value empty; a row
    /// (Intercept) with an empty value gives the population size).
    #[arg(long, value_name = "FILE")]
    totals: Option<PathBuf>,
    /// Trim the new weights to [LO, HI], sharing what is cut equally among
    /// the other records, pass after pass, until all are within.
    #[arg(long, value_name = "LO,HI")]
    trim: Option<String>,
    /// Records outside the totals' categories (a missing or unlisted
    /// value) keep their weight; categories with a total but no records
    /// are left out.
    #[arg(long)]
    allow_missing_cells: bool,
    /// Largest relative misfit |achieved − total| / (1 + |total|)
    /// accepted.
    #[arg(long, value_name = "X", default_value_t = 1e-10)]
    tolerance: f64,
    /// Newton steps (calibration; default 100) or cycles (raking; default
    /// 1000) allowed.
    #[arg(long, value_name = "N")]
    max_iterations: Option<usize>,
    /// Overwrite existing variables of the new names.
    #[arg(long)]
    replace: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

fn pair(text: &str, what: &str) -> Result<(f64, f64)> {
    let parse = |s: &str| -> Result<f64> {
        let s = s.trim();
        match s.to_ascii_lowercase().as_str() {
            "inf" | "+inf" => Ok(f64::INFINITY),
            "-inf" => Ok(f64::NEG_INFINITY),
            _ => s
                .parse::<f64>()
                .with_context(|| format!("{what} '{text}': '{s}' is not a number")),
        }
    };
    let Some((a, b)) = text.split_once(',') else {
        bail!("{what} '{text}': expected LO,HI, e.g. 0.3,3");
    };
    let (a, b) = (parse(a)?, parse(b)?);
    if a.is_nan() || b.is_nan() || a >= b {
        bail!("{what} '{text}': the low bound must be below the high one");
    }
    Ok((a, b))
}

/// Runs `weight`.
pub fn run(a: Args) -> Result<()> {
    let t = Instant::now();
    let method = match (&a.poststrata, &a.rake, &a.calibrate) {
        (Some(p), _, _) => Method::PostStratify(p.clone()),
        (_, Some(r), _) => Method::Rake(r.clone()),
        (_, _, Some(c)) => Method::Calibrate {
            model: c.clone(),
            distance: match a.distance.to_ascii_lowercase().as_str() {
                "linear" | "greg" => Distance::Linear,
                "raking" => Distance::Raking,
                "logit" => Distance::Logit,
                d => bail!("unknown --distance '{d}': expected linear, raking or logit"),
            },
            bounds: a.bounds.as_deref().map(|b| pair(b, "--bounds")).transpose()?,
        },
        _ if a.trim.is_some() => Method::None,
        _ => bail!("say how to weight: --poststrata VARS, --rake MARGINS or --calibrate MODEL with --totals FILE (or --trim LO,HI alone)"),
    };
    if !matches!(method, Method::Calibrate { .. }) && a.bounds.is_some() {
        bail!("--bounds applies to --calibrate");
    }
    let totals = match (&a.totals, &method) {
        (Some(f), _) => weighting::read_totals(f)?,
        (None, Method::None) => Vec::new(),
        (None, _) => bail!("--totals FILE is needed: a CSV with the columns variable,value,total"),
    };
    let mut spec = WeightSpec::new(a.new.clone(), method, totals);
    spec.from = a.from.clone();
    spec.trim = a.trim.as_deref().map(|b| pair(b, "--trim")).transpose()?;
    spec.allow_missing_cells = a.allow_missing_cells;
    spec.tolerance = a.tolerance;
    spec.max_iterations = a.max_iterations;
    spec.replace = a.replace;
    let busy = crate::progress::busy(format!("weighting {}", a.new));
    let r = weighting::weight(&a.dataset, &spec).map_err(|e| {
        let hint = match &e {
            weighting::WeightError::Outside { .. } => {
                Some("(--allow-missing-cells keeps their weights as they are)")
            }
            weighting::WeightError::NotConverged { method, .. } if *method == "raking" => Some(
                "(more --max-iterations may help, unless the sample cannot reach these margins)",
            ),
            weighting::WeightError::NotConverged { .. } => {
                Some("(wider --bounds, another --distance, or more --max-iterations may help)")
            }
            weighting::WeightError::Exists { .. } => Some("(--replace overwrites it)"),
            _ => None,
        };
        match hint {
            Some(h) => anyhow::anyhow!("{e} {h}"),
            None => anyhow::Error::new(e),
        }
    })?;
    drop(busy);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print_report(&a.dataset, &r, t.elapsed().as_secs_f64());
    }
    Ok(())
}

/// A number with twelve significant digits at most (ten decimals at
/// most): sums of millions of weights carry rounding in the digits past
/// that.
fn num(x: f64) -> String {
    if x.is_nan() {
        return "-".into();
    }
    let int_digits = if x.abs() >= 1.0 {
        x.abs().log10().floor() as i32 + 1
    } else {
        1
    };
    let decimals = (12 - int_digits).clamp(0, 10) as usize;
    let s = format!("{x:.decimals$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

fn print_report(ds: &std::path::Path, r: &WeightReport, secs: f64) {
    let reps = match r.replicates.len() {
        0 => String::new(),
        n => format!(
            "; its {n} replicate weights adjusted the same way as {}…{}",
            r.replicates[0],
            r.replicates[n - 1]
        ),
    };
    println!(
        "{}: {} = {} by {}{reps}",
        ds.display(),
        r.weight,
        r.from,
        r.method
    );
    println!(
        "{} records in {} groups; {} iteration{} (replicates: at most {}); worst relative misfit {:.1e} (tolerance {:.0e}); {:.2} s; generation {}",
        r.records,
        r.groups,
        r.iterations,
        if r.iterations == 1 { "" } else { "s" },
        r.replicate_iterations,
        r.worst_misfit,
        r.tolerance,
        secs,
        r.generation
    );
    if r.outside > 0 {
        println!(
            "{} records outside the totals' categories kept their weight",
            r.outside
        );
    }
    for c in &r.empty_cells {
        println!("left out (a total but no records): {c}");
    }
    if !r.achieved.is_empty() {
        let label = |a: &weighting::Achieved| {
            if a.value.is_empty() {
                a.term.clone()
            } else {
                format!("{} = {}", a.term, a.value)
            }
        };
        let w = r
            .achieved
            .iter()
            .map(|a| label(a).chars().count())
            .max()
            .unwrap_or(6)
            .max(6);
        println!();
        println!(
            "{:<w$}  {:>18}  {:>18}  {:>18}",
            "target", "total", "before", "after"
        );
        for a in &r.achieved {
            println!(
                "{:<w$}  {:>18}  {:>18}  {:>18}",
                label(a),
                num(a.total),
                num(a.before),
                num(a.achieved)
            );
        }
    }
    println!();
    for (name, s) in [("before", &r.before), ("after", &r.after)] {
        println!(
            "{name:<6}  weights {} to {}, sum {}, Kish design effect {:.4}{}",
            num(s.min),
            num(s.max),
            num(s.sum),
            s.kish_deff,
            if s.nonpositive > 0 {
                format!(", {} zero or negative", s.nonpositive)
            } else {
                String::new()
            }
        );
    }
    if let Some((n, passes)) = r.trimmed {
        println!("trimmed {n} records ({passes} passes)");
    }
    for n in &r.notes {
        println!("note: {n}");
    }
}
