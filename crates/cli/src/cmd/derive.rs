//! `microtab compute` and `microtab recode`: permanent new variables,
//! written as a new column in a new generation of the dataset (atomic:
//! readers keep the dataset as they opened it, other writers wait their
//! turn, a killed run leaves the dataset as it was).

use anyhow::{anyhow, bail, Result};
use microtab_engine::{DeriveOptions, Derived, RecodeOptions};
use std::path::PathBuf;
use std::time::Instant;

/// Arguments of `compute`.
#[derive(clap::Args, Debug)]
pub struct ComputeArgs {
    /// Dataset directory.
    dataset: PathBuf,
    /// `NAME = EXPRESSION` (one argument or several, joined by spaces),
    /// e.g. `INCPW = INCTOT * PERWT` or `ADULT = AGE >= 18` (docs/CLI.md
    /// lists the operators and functions).
    #[arg(required = true, value_name = "NAME = EXPRESSION")]
    spec: Vec<String>,
    #[command(flatten)]
    common: Common,
}

/// Arguments of `recode`.
#[derive(clap::Args, Debug)]
pub struct RecodeArgs {
    /// Dataset directory.
    dataset: PathBuf,
    /// Name of the new variable.
    name: String,
    /// Input variables (one to six, comma-separated or repeated; a name
    /// with commas whole, or quoted).
    #[arg(long, required = true, value_name = "VAR")]
    from: Vec<String>,
    /// Rules, separated by `;` or newlines: `[CODE =] CONDITION ["label"]`,
    /// e.g. `0-17 "Child"; 18-64 "Adult"; 65-* "Senior"` or
    /// `1 = AGE(18-34) SEX(1) "Young men"; 2 = AGE(18-34) SEX(2); 9 = *`.
    #[arg(allow_hyphen_values = true)]
    rules: String,
    /// Records no rule matches: this code, or the value of this input
    /// variable (default: missing).
    #[arg(long, value_name = "CODE|VAR")]
    other: Option<String>,
    /// Code for records with a missing input, kept as a missing code of the
    /// new variable (default: system-missing).
    #[arg(long, value_name = "CODE", allow_hyphen_values = true)]
    missing: Option<String>,
    #[command(flatten)]
    common: Common,
}

/// Options of both.
#[derive(clap::Args, Debug)]
struct Common {
    /// The new variable's label.
    #[arg(long, value_name = "TEXT")]
    var_label: Option<String>,
    /// A value label VALUE=LABEL (repeatable).
    #[arg(long = "value-label", value_name = "VALUE=LABEL")]
    value_labels: Vec<String>,
    /// Overwrite an existing variable of that name.
    #[arg(long)]
    replace: bool,
}

impl Common {
    fn options(&self) -> Result<DeriveOptions> {
        let value_labels = self
            .value_labels
            .iter()
            .map(|p| {
                p.split_once('=')
                    .map(|(v, l)| (v.trim().to_string(), l.to_string()))
                    .ok_or_else(|| anyhow!("expected VALUE=LABEL, got '{p}'"))
            })
            .collect::<Result<_>>()?;
        Ok(DeriveOptions {
            replace: self.replace,
            label: self.var_label.clone(),
            value_labels,
        })
    }
}

fn report(ds: &std::path::Path, what: &str, d: &Derived, t: Instant) {
    let v = &d.var;
    let secs = t.elapsed().as_secs_f64();
    let ty = if v.decimals > 0 {
        format!("{}, {} decimals", v.ty.name(), v.decimals)
    } else {
        v.ty.name().to_string()
    };
    eprintln!(
        "{}: {} {what} ({ty}; {} records, {} missing) in {:.3} s, {:.0} MB/s of input columns (generation {})",
        ds.display(),
        v.name,
        d.rows,
        d.var.nulls,
        secs,
        d.input_bytes as f64 / 1e6 / secs.max(1e-9),
        d.generation
    );
    for n in &d.notes {
        eprintln!("note: {n}");
    }
}

/// Runs `compute`.
pub fn compute(a: ComputeArgs) -> Result<()> {
    let t = Instant::now();
    let spec = a.spec.join(" ");
    let Some((name, expr)) = spec
        .char_indices()
        .find(|&(i, c)| c == '=' && !spec[i + 1..].starts_with('='))
        .map(|(i, _)| (spec[..i].trim(), spec[i + 1..].trim()))
    else {
        bail!(
            "expected NAME = EXPRESSION, e.g. `microtab compute {} INCPW = INCTOT * PERWT`",
            a.dataset.display()
        );
    };
    if expr.is_empty() {
        bail!("no expression after '{name} ='");
    }
    let busy = crate::progress::busy(format!("computing {name}"));
    let d = microtab_engine::compute(&a.dataset, name, expr, &a.common.options()?)?;
    drop(busy);
    report(&a.dataset, "computed", &d, t);
    Ok(())
}

/// Runs `recode`.
pub fn recode(a: RecodeArgs) -> Result<()> {
    let t = Instant::now();
    let busy = crate::progress::busy(format!("recoding {}", a.name));
    let d = microtab_engine::recode(
        &a.dataset,
        &a.name,
        &a.from,
        &a.rules,
        &RecodeOptions {
            other: a.other.clone(),
            missing: a.missing.clone(),
        },
        &a.common.options()?,
    )?;
    drop(busy);
    report(&a.dataset, "recoded", &d, t);
    Ok(())
}
