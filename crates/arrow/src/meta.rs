//! The metadata an exported file carries, so that `microtab import`
//! (and any reader that looks) gets the variables' labels, value labels,
//! missing codes and implied decimals, and the survey design.

use microtab_store::{Design, Kind, Variable};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The key of the JSON document in the Arrow schema's metadata and the
/// Parquet file's key-value metadata.
pub const METADATA_KEY: &str = "microtab";

/// The document under [`METADATA_KEY`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    /// Always `"microtab"`.
    pub format: String,
    /// Version of this document (1).
    pub version: u32,
    /// Records of the source dataset.
    pub source_rows: u64,
    /// Records exported.
    pub rows: u64,
    /// The filter that chose them, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// `"null"`: user-missing codes were written as nulls; `"codes"`:
    /// kept as values.
    pub missing: String,
    /// `"float"`: implied decimals applied as doubles; `"decimal"`: exact
    /// decimals.
    pub decimals: String,
    /// Whether labelled variables were written as their labels.
    pub labels: bool,
    /// The exported variables, in column order.
    pub variables: Vec<VarMeta>,
    /// The survey design, when it applies to the exported records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design: Option<Design>,
}

/// One variable's metadata.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VarMeta {
    /// Name.
    pub name: String,
    /// Label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Longer description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `int`, `float` or `string`.
    pub kind: Kind,
    /// Implied decimals of an integer variable.
    #[serde(default)]
    pub decimals: u32,
    /// User-missing codes in stored units (integers times
    /// `10^decimals`); for text variables see `missing_text`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_codes: Vec<f64>,
    /// A text variable's user-missing values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_text: Vec<String>,
    /// Value labels keyed by the value as displayed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub value_labels: BTreeMap<String, String>,
    /// System-missing values in the source dataset.
    #[serde(default)]
    pub nulls: u64,
}

impl VarMeta {
    /// The metadata of `var` (`dict`: a text variable's dictionary).
    pub fn of(var: &Variable, dict: &[String]) -> VarMeta {
        let text = var.kind == Kind::String;
        VarMeta {
            name: var.name.clone(),
            label: var.label.clone(),
            description: var.description.clone(),
            kind: var.kind,
            decimals: var.decimals,
            missing_codes: if text {
                Vec::new()
            } else {
                var.missing_codes.clone()
            },
            missing_text: if text {
                var.missing_codes
                    .iter()
                    .filter_map(|&c| dict.get(c as usize).cloned())
                    .collect()
            } else {
                Vec::new()
            },
            value_labels: var.value_labels.clone(),
            nulls: var.nulls,
        }
    }
}
