//! `manifest.json`: the dataset's table of contents.

use crate::PhysType;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the on-disk format written by this build.
pub const FORMAT_VERSION: u32 = 4;

/// What a variable's values mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Integers, possibly scaled by `10^decimals` (stored exactly).
    Int,
    /// Floating point.
    Float,
    /// Text, stored as integer codes into a sorted dictionary.
    String,
}

/// A stored value in the manifest: integers stay exact (all of `i64`),
/// floats are floats.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Number {
    /// An integer (int and string kinds).
    Int(i64),
    /// A float (float kind).
    Float(f64),
}

impl Number {
    /// As a float (rounded beyond ±2^53).
    pub fn as_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        }
    }

    /// As an integer (floats truncated).
    pub fn as_i64(self) -> i64 {
        match self {
            Number::Int(i) => i,
            Number::Float(f) => f as i64,
        }
    }
}

/// One variable of a dataset.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Variable {
    /// Name as given in the input (matched case-insensitively by queries).
    pub name: String,
    /// Descriptive label, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Longer description (e.g. a DDI codebook's `txt`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Logical kind.
    pub kind: Kind,
    /// Physical type of the stored values (for strings: of the codes).
    #[serde(rename = "type")]
    pub ty: PhysType,
    /// Column file, relative to the dataset directory.
    pub file: String,
    /// Payload size in bytes (without the 4096-byte header).
    pub bytes: u64,
    /// How the values are bit-packed (`None`: a plain array of `ty`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packing: Option<crate::Packing>,
    /// `xxh3:<16 hex digits>` of the payload.
    pub checksum: String,
    /// Implied decimals: the stored integer is the value times `10^decimals`.
    #[serde(default)]
    pub decimals: u32,
    /// Number of system-missing (empty) values.
    #[serde(default)]
    pub nulls: u64,
    /// Stored code marking system-missing in integer and string columns
    /// (float columns use NaN); absent when the column has no nulls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub null_code: Option<i64>,
    /// Smallest non-null value, in stored units (`null` if all are null).
    #[serde(default)]
    pub min: Option<Number>,
    /// Largest non-null value, in stored units.
    #[serde(default)]
    pub max: Option<Number>,
    /// User-missing codes, in stored units (e.g. `9999999` for "N/A").
    #[serde(default)]
    pub missing_codes: Vec<f64>,
    /// Value labels keyed by the value as displayed (`"1": "Male"`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub value_labels: BTreeMap<String, String>,
    /// For string variables: the dictionary file (JSON array, sorted), relative
    /// to the dataset directory; code `i` is entry `i`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dictionary: Option<String>,
    /// `xxh3:<16 hex digits>` of the dictionary file (format version 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dictionary_checksum: Option<String>,
}

impl Variable {
    /// A variable with no file yet; [`ColumnWriter::finish`](crate::ColumnWriter::finish) fills in the rest.
    pub fn new(name: &str, kind: Kind, ty: PhysType) -> Self {
        Variable {
            name: name.to_string(),
            label: None,
            description: None,
            kind,
            ty,
            file: String::new(),
            bytes: 0,
            packing: None,
            checksum: String::new(),
            decimals: 0,
            nulls: 0,
            null_code: None,
            min: None,
            max: None,
            missing_codes: Vec::new(),
            value_labels: BTreeMap::new(),
            dictionary: None,
            dictionary_checksum: None,
        }
    }

    /// `10^decimals` as a float: stored value / scale = displayed value.
    pub fn scale(&self) -> f64 {
        10f64.powi(self.decimals as i32)
    }
}

/// The whole manifest.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    /// Always `"microtab"`.
    pub format: String,
    /// Format version ([`FORMAT_VERSION`]).
    pub version: u32,
    /// `xxh3:<16 hex digits>` of the manifest file's bytes with these 16
    /// digits written as zeros (format version 3): a changed byte anywhere
    /// in the manifest is detected when it is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
    /// Incremented on every change; column files carry it in their names.
    pub generation: u64,
    /// The dataset's identity: 32 random hex digits drawn when its records
    /// are written (an import, a subset, a part of a split, and again by
    /// an import that replaces it), kept by changes that leave the records
    /// as they are (labels, missing codes, a design, derived variables).
    /// A copy of the directory has the same id, so readers that take
    /// several datasets tell the same records twice by it, whatever their
    /// paths. `None`: written before datasets carried one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Number of records.
    pub rows: u64,
    /// Where the data came from (input file name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// For a part of a split: which records of which dataset it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part_of: Option<PartOf>,
    /// The dataset's title (a Stata dataset label, an SPSS file label, a
    /// DDI codebook's study title, or set by a user). `None`: untitled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A longer description of the dataset (a DDI codebook's abstract or
    /// extract description, or set by a user). `None`: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Variables in input order.
    pub variables: Vec<Variable>,
    /// The survey design every query uses unless told not to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design: Option<Design>,
}

/// The records of another dataset that a part of a split holds (the
/// catalog of parts checks every part against it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartOf {
    /// The [`Manifest::id`] of the dataset the records were cut from
    /// (`None`: it had none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<String>,
    /// The first record's number in that dataset (from 1).
    pub first_record: u64,
    /// The records, consecutive from `first_record`.
    pub rows: u64,
}

/// A new dataset id ([`Manifest::id`]): 128 random bits as 32 hex digits,
/// from the system's random source (`/dev/urandom`), else from a hash of
/// the time, the process and a counter seeded by the standard library's
/// per-process random keys.
pub fn new_dataset_id() -> String {
    use std::io::Read;
    let mut b = [0u8; 16];
    let from_os = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_ok();
    if !from_os {
        use std::hash::{BuildHasher, Hasher};
        static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for (i, chunk) in b.chunks_mut(8).enumerate() {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u128(now);
            h.write_u32(std::process::id());
            h.write_u64(n);
            h.write_usize(i);
            chunk.copy_from_slice(&h.finish().to_le_bytes());
        }
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A dataset's survey design: the full-sample weight and how the standard
/// errors of its estimates are computed (docs/SURVEY.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Design {
    /// The full-sample weight variable.
    pub weight: String,
    /// Replicate weights and how their estimates combine (replicate
    /// designs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicates: Option<Replicates>,
    /// Strata, clusters and finite population corrections (Taylor
    /// linearization designs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taylor: Option<Taylor>,
}

impl Design {
    /// Every variable the design uses: the weight, the replicate weights,
    /// the strata, clusters and FPC.
    pub fn variables(&self) -> Vec<&String> {
        let mut v = vec![&self.weight];
        if let Some(r) = &self.replicates {
            v.extend(&r.weights);
        }
        if let Some(t) = &self.taylor {
            v.extend(t.strata.iter().chain(&t.cluster).chain(&t.fpc));
            if let Some(c) = &t.calibration {
                v.push(&c.source);
                v.extend(&c.variables);
            }
        }
        v
    }
}

/// What to do with a stratum that has a single PSU (R survey's
/// `options(survey.lonely.psu)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LonelyPsu {
    /// Refuse the design (R's default).
    Fail,
    /// The stratum adds nothing to the variance.
    Remove,
    /// The PSU was sampled with certainty: it adds nothing (single-stage
    /// designs).
    Certainty,
    /// The PSU's total is centred at zero (R's `adjust`: the grand mean
    /// for means and proportions).
    Adjust,
    /// The variance of the other strata, scaled by strata / strata with
    /// two or more PSUs.
    Average,
}

/// `FromStr` for an enum by the names its `name()` gives, in any case:
/// the type, what a message calls one, and every variant.
macro_rules! from_name {
    ($t:ident, $what:literal, [$($v:ident),*]) => {
        impl std::str::FromStr for $t {
            type Err = String;

            /// A variant by its name, any case.
            fn from_str(s: &str) -> Result<Self, String> {
                by_name(s, &[$($t::$v),*], $t::name, $what)
            }
        }
    };
}

from_name!(
    LonelyPsu,
    "lonely-PSU option",
    [Fail, Remove, Certainty, Adjust, Average]
);

/// The one of `all` that `name` calls `s` (any case, spaces around it
/// ignored), or a message that `s` is no `what` and lists the names.
fn by_name<T: Copy>(
    s: &str,
    all: &[T],
    name: fn(T) -> &'static str,
    what: &str,
) -> Result<T, String> {
    all.iter()
        .copied()
        .find(|&k| name(k).eq_ignore_ascii_case(s.trim()))
        .ok_or_else(|| {
            let names: Vec<&str> = all.iter().map(|&k| name(k)).collect();
            let (last, rest) = names.split_last().expect("a closed set of names");
            format!(
                "unknown {what} '{s}': expected {} or {last}",
                rest.join(", ")
            )
        })
}

impl LonelyPsu {
    /// The lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            LonelyPsu::Fail => "fail",
            LonelyPsu::Remove => "remove",
            LonelyPsu::Certainty => "certainty",
            LonelyPsu::Adjust => "adjust",
            LonelyPsu::Average => "average",
        }
    }
}

/// A stratified cluster design for Taylor linearization (with-replacement
/// ultimate clusters, each PSU within its stratum), with the PSU counts
/// found in the data when the design was set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Taylor {
    /// The strata variable (`None`: one stratum).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strata: Option<String>,
    /// The PSU (cluster) variable (`None`: every record is its own PSU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// The finite population correction variable (population PSUs per
    /// stratum, or the sampling fraction when at most 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fpc: Option<String>,
    /// Strata with a single PSU.
    pub lonely_psu: LonelyPsu,
    /// The strata's stored values, ascending (`[0]` without strata).
    pub strata_keys: Vec<i64>,
    /// PSUs per stratum (`n_h`), in the order of `strata_keys`.
    pub psus: Vec<u64>,
    /// Population PSUs per stratum (`N_h`, with an FPC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub population: Option<Vec<f64>>,
    /// Whether each PSU's records are contiguous (one run of rows).
    pub contiguous: bool,
    /// PSUs and strata with a record of non-zero weight: the design's
    /// degrees of freedom are their difference.
    pub weighted_psus: u64,
    /// Strata with a record of non-zero weight.
    pub weighted_strata: u64,
    /// Records when the design was set (a design is refused once the
    /// dataset has changed).
    pub rows: u64,
    /// The adjustment the weight was made by (post-stratification,
    /// raking or calibration to population totals): the linearized
    /// variance subtracts its residuals (R's calibrated `survey.design2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Calibration>,
}

/// How a design's weight was adjusted to population totals, kept so that
/// the linearized variance can take the adjustment into account.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// The weight that was adjusted.
    pub source: String,
    /// `poststrata`, `rake` or `calibrate`.
    pub method: String,
    /// The method's terms, as given (`AGEGRP*SEX`, `A; B`, `X + factor(A)`).
    pub terms: String,
    /// The variables the terms use (kept unchanged while the design
    /// stands).
    pub variables: Vec<String>,
    /// The population totals: variable, value, total.
    pub totals: Vec<(String, String, f64)>,
    /// Records outside the totals' categories kept their weight.
    #[serde(default)]
    pub allow_missing_cells: bool,
    /// The adjusted weights were trimmed afterwards.
    #[serde(default)]
    pub trimmed: bool,
}

/// The kind of a replicate design, which fixes its default scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RepType {
    /// Successive-difference replication (ACS, CPS): scale 4/R.
    Sdr,
    /// Balanced repeated replication: scale 1/R.
    Brr,
    /// Fay's BRR with coefficient ρ: scale 1/(R(1−ρ)²).
    Fay,
    /// Delete-one jackknife: scale (R−1)/R.
    Jk1,
    /// Stratified jackknife: scale 1, per-replicate coefficients.
    Jkn,
    /// Bootstrap: scale 1/(R−1).
    Bootstrap,
    /// A scale and coefficients given by the user.
    Other,
}

from_name!(
    RepType,
    "replicate design type",
    [Sdr, Brr, Fay, Jk1, Jkn, Bootstrap, Other]
);

impl RepType {
    /// The lowercase name (`sdr`, `brr`, …).
    pub fn name(self) -> &'static str {
        match self {
            RepType::Sdr => "sdr",
            RepType::Brr => "brr",
            RepType::Fay => "fay",
            RepType::Jk1 => "jk1",
            RepType::Jkn => "jkn",
            RepType::Bootstrap => "bootstrap",
            RepType::Other => "other",
        }
    }
}

/// Replicate weights and the variance formula
/// `v = scale · Σ_r rscales[r] · (θ_r − θ̃)²`, θ̃ the full-sample estimate
/// (`mse`) or the mean of the replicates' estimates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replicates {
    /// The kind of replication.
    #[serde(rename = "type")]
    pub kind: RepType,
    /// The replicate weight variables, in order.
    pub weights: Vec<String>,
    /// The overall scale `C`.
    pub scale: f64,
    /// One coefficient per replicate.
    pub rscales: Vec<f64>,
    /// Centre on the full-sample estimate (the Census Bureau / IPUMS
    /// formula) rather than on the mean of the replicate estimates.
    pub mse: bool,
    /// Fay's coefficient (type `fay`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rho: Option<f64>,
    /// The rank of the replicate weights (records × replicates) of the
    /// records the design was set on, found then: the design's degrees of
    /// freedom are rank − 1 (R's `degf()`). `None`: set before it was
    /// stored (found again when needed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<usize>,
}

#[cfg(test)]
mod tests {
    #[test]
    fn dataset_ids_are_128_random_bits() {
        let a = super::new_dataset_id();
        let b = super::new_dataset_id();
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    /// Names read in any case with spaces around them; an unknown one is
    /// refused with every name listed (the messages as written by hand).
    #[test]
    fn named_options_parse_and_list_the_names() {
        assert_eq!(
            " Certainty ".parse::<super::LonelyPsu>(),
            Ok(super::LonelyPsu::Certainty)
        );
        assert_eq!("JK1".parse::<super::RepType>(), Ok(super::RepType::Jk1));
        assert_eq!(
            "x".parse::<super::LonelyPsu>().unwrap_err(),
            "unknown lonely-PSU option 'x': expected fail, remove, certainty, adjust or average"
        );
        assert_eq!(
            "jk2".parse::<super::RepType>().unwrap_err(),
            "unknown replicate design type 'jk2': expected sdr, brr, fay, jk1, jkn, bootstrap or other"
        );
    }
}
