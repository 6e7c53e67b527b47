//! From a request to an answer: the engine query, the checks around it,
//! and the typed result.

use crate::result::{Answer, Context, Crosstab, Frequencies, Means};
use crate::{Analysis, Error, Request, Result};
use microtab_engine::{parse_filter, weight_cases, Query, ScanOptions};
use microtab_store::Dataset;

/// The engine query of a request.
fn query(req: &Request) -> Result<Query> {
    let filter = match &req.filter {
        Some(f) => parse_filter(f)?,
        None => Vec::new(),
    };
    let (measure, include_missing) = match &req.analysis {
        Analysis::Means { var, .. } => (Some(var.clone()), false),
        _ => (None, req.include_missing),
    };
    Ok(Query {
        filter,
        group_by: req.group_by(),
        weight: req.weight.clone(),
        measure,
        include_missing,
        max_cells: Some(req.max_cells),
        rows: req.rows.clone(),
    })
}

/// Checks the whole files (and dictionaries) of the variables named, so
/// that damage anywhere in them is reported before an answer is given.
fn verify_variables<'a>(ds: &Dataset, names: impl IntoIterator<Item = &'a String>) -> Result<()> {
    for n in names {
        let var = ds.variable(n)?;
        ds.column(n)?.verify()?;
        if var.dictionary.is_some() {
            ds.dictionary(var)?;
        }
    }
    Ok(())
}

/// Answers `req` over `ds`, reading columns as `opts` says.
///
/// A weighted request also counts the rows whose weight is negative, zero
/// or missing (a scan each, only when the weight's range or missing codes
/// allow them); negative weights are [`Error::NegativeWeights`] unless
/// [`Request::allow_negative_weights`].
pub fn run(ds: &Dataset, req: &Request, opts: &ScanOptions) -> Result<Answer> {
    let q = query(req)?;
    if req.verify {
        let names = q
            .group_by
            .iter()
            .chain(q.filter.iter().map(|t| &t.var))
            .chain(q.weight.iter())
            .chain(q.measure.iter());
        verify_variables(ds, names)?;
    }
    let cube = microtab_engine::run_with(ds, &q, opts)?;
    let counted = cube.counts.iter().sum();
    let weights = weight_cases(ds, &q, opts, counted)?;
    if let (Some(w), Some(name)) = (&weights, &q.weight) {
        if w.negative > 0 && !req.allow_negative_weights {
            return Err(Error::NegativeWeights {
                weight: ds.variable(name)?.name.clone(),
                rows: w.negative,
            });
        }
    }
    let context = Context {
        dataset: ds.dir().display().to_string(),
        weight: req.weight.clone(),
        filter: req.filter.clone(),
        weight_cases: weights,
    };
    let name = |n: &str| -> Result<String> { Ok(ds.variable(n)?.name.clone()) };
    let label = |n: &str| -> Result<Option<String>> { Ok(ds.variable(n)?.label.clone()) };
    Ok(match &req.analysis {
        Analysis::Freq { var } => {
            Answer::Freq(Frequencies::new(context, name(var)?, label(var)?, cube))
        }
        Analysis::Tab {
            row,
            col,
            control,
            pct,
            stats,
        } => Answer::Tab(Crosstab::new(
            context,
            [name(row)?, name(col)?],
            control.as_deref().map(name).transpose()?,
            *pct,
            *stats,
            cube,
        )),
        Analysis::Means { var, .. } => {
            Answer::Means(Means::new(context, name(var)?, label(var)?, cube))
        }
    })
}
