//! One description of what is not an analysis — a variable, a survey
//! design, a dataset — for every front end: `microtab info` and
//! `codebook`, the HTTP API and its page, and the Python package show
//! these types (serialised once, here) instead of building their own.
//!
//! Values are shown as users write them: an integer as an integer, a value
//! with implied decimals as the number it stands for (`99.99`, not the
//! stored `9999`), a text variable's value as its text (not its position
//! in the dictionary).

use crate::html::fmt_sig;
use crate::settings::{Settings, SettingsInfo};
use microtab_store::{Dataset, Design, Kind, Number, Packing, Variable};
use serde::Serialize;
use std::collections::BTreeMap;

/// A value as users see it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Shown {
    /// An integer (no implied decimals).
    Int(i64),
    /// A number: a float, or an integer with implied decimals applied.
    Number(f64),
    /// A text variable's value.
    Text(String),
}

impl Shown {
    /// The value stored as `stored` in `var` (`dict`: a text variable's
    /// dictionary; `None` for a code outside it).
    pub fn of(var: &Variable, stored: Number, dict: &[String]) -> Option<Shown> {
        Some(match (var.kind, stored) {
            (Kind::String, n) => Shown::Text(dict.get(n.as_i64() as usize)?.clone()),
            // Integers print as integers (a manifest may hold them as `2000.0`).
            (Kind::Int, n) if var.decimals == 0 => Shown::Int(n.as_i64()),
            (_, n) if var.decimals > 0 => Shown::Number(n.as_f64() / var.scale()),
            (_, n) => Shown::Number(n.as_f64()),
        })
    }

    /// A user-missing code of `var` (held as a float in the manifest).
    fn of_code(var: &Variable, code: f64, dict: &[String]) -> Option<Shown> {
        let n = if var.kind == Kind::Float {
            Number::Float(code)
        } else {
            Number::Int(code as i64)
        };
        Shown::of(var, n, dict)
    }

    /// A category's value (`None`: system-missing).
    pub fn of_value(v: &microtab_engine::Value) -> Option<Shown> {
        use microtab_engine::Value as V;
        match v {
            V::Int(i) => Some(Shown::Int(*i)),
            V::Num(x) => Some(Shown::Number(*x)),
            V::Str(s) => Some(Shown::Text(s.clone())),
            V::Null => None,
        }
    }

    /// The value as plain text (numbers as JSON writes them).
    pub fn text(&self) -> String {
        match self {
            Shown::Int(i) => i.to_string(),
            Shown::Number(x) => serde_json::to_string(x).unwrap_or_default(),
            Shown::Text(s) => s.clone(),
        }
    }
}

/// One variable as every front end describes it (`info`, `codebook`, the
/// HTTP API's variables, Python's `Dataset.info()` and `codebook()`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VariableInfo {
    /// The name.
    pub name: String,
    /// The variable label.
    pub label: Option<String>,
    /// The stored type (`u8`, `i32`, `f64` …).
    #[serde(rename = "type")]
    pub ty: String,
    /// `int`, `float` or `string`.
    pub kind: Kind,
    /// Implied decimals of an integer variable.
    pub decimals: u32,
    /// Bytes of its column file.
    pub bytes: u64,
    /// Bit-packing of its column, if packed.
    pub packing: Option<Packing>,
    /// Bits a value takes on disk.
    pub bits: usize,
    /// The smallest value (as shown; `None` when every value is empty).
    pub min: Option<Shown>,
    /// The largest value.
    pub max: Option<Shown>,
    /// Empty (system-missing) values.
    pub nulls: u64,
    /// User-missing codes, as shown.
    pub missing_codes: Vec<Shown>,
    /// Its column file in the dataset directory.
    pub file: String,
    /// The codebook's description.
    pub description: Option<String>,
    /// Value labels, by the value as shown.
    pub value_labels: BTreeMap<String, String>,
}

impl VariableInfo {
    /// Describes `v` of `ds` (a text variable's dictionary is read for its
    /// range and missing codes).
    pub fn of(ds: &Dataset, v: &Variable) -> microtab_store::Result<VariableInfo> {
        let dict = if v.kind == Kind::String {
            ds.dictionary(v)?
        } else {
            Vec::new()
        };
        Ok(VariableInfo {
            name: v.name.clone(),
            label: v.label.clone(),
            ty: v.ty.name().to_string(),
            kind: v.kind,
            decimals: v.decimals,
            bytes: v.bytes,
            packing: v.packing,
            bits: v.packing.map_or(8 * v.ty.width(), |p| p.bits as usize),
            min: v.min.and_then(|m| Shown::of(v, m, &dict)),
            max: v.max.and_then(|m| Shown::of(v, m, &dict)),
            nulls: v.nulls,
            missing_codes: v
                .missing_codes
                .iter()
                .filter_map(|&c| Shown::of_code(v, c, &dict))
                .collect(),
            file: v.file.clone(),
            description: v.description.clone(),
            value_labels: v.value_labels.clone(),
        })
    }

    /// What the values are, in words: `integer; stored as u8`,
    /// `numeric, 2 decimals; stored as i32`.
    pub fn type_text(&self) -> String {
        let kind = match self.kind {
            Kind::Int if self.decimals > 0 => format!("numeric, {} decimals", self.decimals),
            Kind::Int => "integer".to_string(),
            Kind::Float => "numeric (floating point)".to_string(),
            Kind::String => "text".to_string(),
        };
        format!("{kind}; stored as {}", self.ty)
    }

    /// The missing codes as text, joined by `sep`.
    pub fn missing_text(&self, sep: &str) -> String {
        self.missing_codes
            .iter()
            .map(Shown::text)
            .collect::<Vec<_>>()
            .join(sep)
    }
}

/// A dataset as every front end describes it: `microtab info --format
/// json`, `GET /api/v1/datasets/NAME`, Python's `Dataset.info()`.
#[derive(Debug, Clone, Serialize)]
pub struct DatasetInfo {
    /// The dataset as the front end names it (the CLI and Python: the
    /// path given; the HTTP API: the name it is served under).
    pub dataset: String,
    /// Records.
    pub rows: u64,
    /// Bytes on disk (manifest, columns, dictionaries).
    pub bytes: u64,
    /// The manifest's generation (each change makes a new one).
    pub generation: u64,
    /// The file it was imported from.
    pub source: Option<String>,
    /// The dataset's title (`null`: untitled).
    pub title: Option<String>,
    /// The dataset's description (`null`: none).
    pub description: Option<String>,
    /// The stored survey design.
    pub design: Option<Design>,
    /// The design in one line ([`design_summary`]).
    pub design_summary: Option<String>,
    /// The I/O settings queries of this front end read with.
    pub io_settings: SettingsInfo,
    /// Its variables, in order.
    pub variables: Vec<VariableInfo>,
}

impl DatasetInfo {
    /// Describes `ds`, named `name`, read with `settings`.
    pub fn of(ds: &Dataset, name: &str, settings: &Settings) -> microtab_store::Result<Self> {
        let m = ds.manifest();
        Ok(DatasetInfo {
            dataset: name.to_string(),
            rows: m.rows,
            bytes: dir_bytes(ds),
            generation: m.generation,
            source: m.source.clone(),
            title: m.title.clone(),
            description: m.description.clone(),
            design: m.design.clone(),
            design_summary: m.design.as_ref().map(design_summary),
            io_settings: settings.info(Some(ds.dir())),
            variables: m
                .variables
                .iter()
                .map(|v| VariableInfo::of(ds, v))
                .collect::<microtab_store::Result<_>>()?,
        })
    }
}

/// Bytes of the manifest, the column files and the dictionaries.
fn dir_bytes(ds: &Dataset) -> u64 {
    let size = |f: &str| std::fs::metadata(ds.dir().join(f)).map_or(0, |m| m.len());
    let mut n = size("manifest.json");
    for v in &ds.manifest().variables {
        n += size(&v.file);
        if let Some(d) = &v.dictionary {
            n += size(d);
        }
    }
    n
}

/// The survey design in one line: its weight, and its replicate weights
/// (kind, scale, coefficients, centre, degrees of freedom) or its Taylor
/// linearization (strata, PSUs, finite population correction, single-PSU
/// strata, degrees of freedom).
pub fn design_summary(d: &Design) -> String {
    if let Some(t) = &d.taylor {
        let mut parts = vec![format!("weight {}", d.weight)];
        if let Some(s) = &t.strata {
            parts.push(format!("strata {s} ({})", t.psus.len()));
        }
        parts.push(match &t.cluster {
            Some(c) => format!("PSUs {c} ({})", t.psus.iter().sum::<u64>()),
            None => format!("each of the {} records a PSU", t.rows),
        });
        if let Some(f) = &t.fpc {
            parts.push(format!("finite population correction {f}"));
        }
        if let Some(c) = &t.calibration {
            let how = match c.method.as_str() {
                "poststrata" => "post-stratified by",
                "rake" => "raked to",
                _ => "calibrated to",
            };
            parts.push(format!(
                "{} {how} {} (its residuals kept in the variance)",
                c.source, c.terms
            ));
        }
        let lonely = t.psus.iter().filter(|&&n| n == 1).count();
        if lonely > 0 {
            parts.push(format!(
                "{lonely} strata with a single PSU: {}",
                t.lonely_psu.name()
            ));
        }
        return format!(
            "{}; Taylor linearization, t intervals with {} df",
            parts.join(", "),
            t.weighted_psus as i64 - t.weighted_strata as i64
        );
    }
    let Some(r) = &d.replicates else {
        return format!("weight {}", d.weight);
    };
    let df = match r.rank {
        // R's degf(): the replicate weights' rank − 1.
        Some(k) if k < r.weights.len() => format!(
            "{} df (the replicate weights' rank {k} − 1: some replicates are linear combinations of others)",
            k as i64 - 1
        ),
        Some(k) => format!("{} df", k as i64 - 1),
        None => format!(
            "{} df (if the replicate weights are of full rank)",
            r.weights.len() - 1
        ),
    };
    format!(
        "weight {}, {} replicate weights {}…{} ({}{}, scale {}, {}), variance = scale × Σ c_r (replicate − {})², t intervals with {df}",
        d.weight,
        r.weights.len(),
        r.weights[0],
        r.weights[r.weights.len() - 1],
        r.kind.name(),
        r.rho.map(|x| format!(" ρ = {x}")).unwrap_or_default(),
        fmt_sig(r.scale, 6),
        if r.rscales.iter().all(|&c| c == 1.0) {
            "c_r = 1"
        } else {
            "c_r per replicate"
        },
        if r.mse {
            "full-sample estimate"
        } else {
            "mean of the replicates"
        },
    )
}
