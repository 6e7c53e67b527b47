//! Replicate weights built from a dataset's stored Taylor design (its
//! weight, strata, first-stage PSUs and FPC), as R `survey`'s
//! `as.svrepdesign` builds them: delete-one jackknife (`JK1`), stratified
//! jackknife (`JKn`), balanced repeated replication and Fay's variant
//! (`BRR`, `Fay`), the Rao–Wu rescaling bootstrap (R's `subbootstrap`) and
//! successive-difference replication (Fay & Train). The replicate weights
//! are written as new float columns in a new generation of the dataset and
//! the design that uses them is set (docs/SURVEY.md, "Replicate weights
//! built from a design").
//!
//! The analysis weight of replicate r for record i is `w_i ·
//! f(r, PSU(i))`: one factor per PSU and replicate, made one replicate at
//! a time (memory: a PSU index per record, the weight, and one replicate's
//! factors), never a records × replicates matrix.
//!
//! Orders, as R: PSUs in order of first appearance in the data; JKn's
//! strata in order of first appearance; BRR's strata in the string order
//! of their values (bytes, R's `order(as.character(strata))` in the C
//! locale), pairs of a stratum with more than two PSUs in order of
//! appearance, R's Hadamard matrices (`survey:::hadamard`).
//!
//! The bootstrap draws with xoshiro256** seeded by SplitMix64 from the
//! seed and the replicate's number, and Lemire's unbiased bounded draws:
//! the same seed gives the same weights on every machine and thread count.

use crate::weighting::write::write_f64_columns;
use microtab_store::{
    Dataset, DatasetWriter, Design, Kind, LonelyPsu, RepType, Replicates, Taylor, Variable,
};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Replicates made when none are asked for (bootstrap; SDR when the design
/// has more PSUs than fit a smaller Hadamard matrix).
pub const DEFAULT_REPLICATES: usize = 80;
/// The bootstrap's seed when none is given.
pub const DEFAULT_SEED: u64 = 1;
/// Fay's coefficient when none is given.
pub const DEFAULT_FAY_RHO: f64 = 0.5;
/// The most replicates a jackknife or BRR may make (one per PSU, or per
/// pair of strata): beyond it a bootstrap or SDR of a chosen size is
/// the practical choice.
pub const MAX_FIXED_REPLICATES: usize = 1000;
/// The most replicates a bootstrap or SDR may be asked for.
pub const MAX_REPLICATES: usize = 10_000;
/// Budget of multiply-adds for finding the replicate weights' rank (its
/// Gram matrix over PSUs): larger designs leave the rank unknown.
const RANK_BUDGET: usize = 1 << 31;
/// Most PSU × replicate factors held to find the rank.
const RANK_CELLS: usize = 1 << 24;

/// How replicate weights are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Delete-one jackknife over the PSUs of an unstratified design.
    Jk1,
    /// Stratified jackknife: one replicate per PSU, deleting it.
    Jkn,
    /// Balanced repeated replication: two PSUs per stratum, half-samples
    /// from a Hadamard matrix.
    Brr,
    /// Fay's BRR: the half-samples weighted 2 − ρ and ρ.
    Fay,
    /// Rao–Wu rescaling bootstrap (n_h − 1 PSUs drawn with replacement).
    Bootstrap,
    /// Successive-difference replication (Fay & Train).
    Sdr,
}

impl Method {
    /// The lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Method::Jk1 => "jk1",
            Method::Jkn => "jkn",
            Method::Brr => "brr",
            Method::Fay => "fay",
            Method::Bootstrap => "bootstrap",
            Method::Sdr => "sdr",
        }
    }

    /// The kind of replicate design it makes.
    pub fn rep_type(self) -> RepType {
        match self {
            Method::Jk1 => RepType::Jk1,
            Method::Jkn => RepType::Jkn,
            Method::Brr => RepType::Brr,
            Method::Fay => RepType::Fay,
            Method::Bootstrap => RepType::Bootstrap,
            Method::Sdr => RepType::Sdr,
        }
    }
}

impl std::str::FromStr for Method {
    type Err = String;

    /// A method by its name, any case.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let all = [
            Method::Jk1,
            Method::Jkn,
            Method::Brr,
            Method::Fay,
            Method::Bootstrap,
            Method::Sdr,
        ];
        all.into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                format!(
                    "unknown replicate type '{s}': expected jk1, jkn, brr, fay, bootstrap or sdr"
                )
            })
    }
}

/// What to make.
#[derive(Debug, Clone)]
pub struct ReplicateOptions {
    /// The method.
    pub method: Method,
    /// How many replicates (bootstrap and SDR; the others' number is fixed
    /// by the design, and a number given must equal it).
    pub replicates: Option<usize>,
    /// The bootstrap's seed.
    pub seed: u64,
    /// Names are `{prefix}1 … {prefix}R` (`None`: the weight's name and
    /// `_REP`).
    pub prefix: Option<String>,
    /// Fay's coefficient ρ (method Fay; `None`: [`DEFAULT_FAY_RHO`]).
    pub rho: Option<f64>,
    /// Replace variables of the replicate weights' names.
    pub replace: bool,
}

impl ReplicateOptions {
    /// `method` with every default.
    pub fn new(method: Method) -> Self {
        ReplicateOptions {
            method,
            replicates: None,
            seed: DEFAULT_SEED,
            prefix: None,
            rho: None,
            replace: false,
        }
    }
}

/// Something the user should know of replicate weights made.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplicateNote {
    /// The design's finite population correction is not part of this
    /// method's weights (BRR, Fay, the Rao–Wu bootstrap and SDR are
    /// with-replacement methods; R drops it the same way).
    FpcDropped {
        /// The FPC variable.
        fpc: String,
    },
    /// SDR with more PSUs than usable rows of the Hadamard matrix: rows
    /// are reused in turn (as the ACS does), so the variance of a total is
    /// no longer exactly the successive-difference formula.
    RowsCycle {
        /// PSUs.
        units: u64,
        /// Usable rows (replicates − 1).
        rows: usize,
    },
    /// Strata with a single PSU get no replicate (factor 1: no variance
    /// from them) under the design's lonely-PSU option.
    LonelyStrata {
        /// How many.
        count: usize,
        /// The design's option.
        option: LonelyPsu,
    },
    /// The design's weight was adjusted to population totals: the
    /// replicate weights are made from it as it is, and the adjustment
    /// is not repeated in each of them (nor kept by the new design).
    Adjusted {
        /// The design's weight.
        weight: String,
        /// The weight it was adjusted from.
        source: String,
    },
}

impl std::fmt::Display for ReplicateNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplicateNote::FpcDropped { fpc } => write!(
                f,
                "the finite population correction {fpc} is not used by this method (with-replacement replicates, as R drops it)"
            ),
            ReplicateNote::RowsCycle { units, rows } => write!(
                f,
                "{units} PSUs share the {rows} usable rows of the Hadamard matrix in turn: the variance is the ACS approximation of the successive-difference estimator, exact only with more replicates than PSUs"
            ),
            ReplicateNote::LonelyStrata { count, option } => write!(
                f,
                "{count} {} a single PSU: no variance from {} ({})",
                if *count == 1 { "stratum has" } else { "strata have" },
                if *count == 1 { "it" } else { "them" },
                option.name()
            ),
            ReplicateNote::Adjusted { weight, source } => write!(
                f,
                "{weight} was adjusted from {source} to population totals: the replicate weights carry {weight} as it is, not the adjustment (their standard errors leave its reduction out); to carry it, make replicate weights from a design on {source} and adjust {source} on that design"
            ),
        }
    }
}

/// Replicate weights made and stored.
#[derive(Debug, Clone)]
pub struct Replicated {
    /// The method.
    pub method: Method,
    /// The full-sample weight (unchanged).
    pub weight: String,
    /// The replicate weight variables written, in order.
    pub names: Vec<String>,
    /// The design's overall scale.
    pub scale: f64,
    /// One coefficient per replicate.
    pub rscales: Vec<f64>,
    /// Fay's coefficient (method Fay).
    pub rho: Option<f64>,
    /// The bootstrap's seed.
    pub seed: Option<u64>,
    /// The replicate weights' rank over the records (`None`: not found,
    /// the design too large for it).
    pub rank: Option<usize>,
    /// First-stage PSUs.
    pub psus: u64,
    /// Strata.
    pub strata: usize,
    /// Records.
    pub rows: u64,
    /// The dataset's generation now.
    pub generation: u64,
    /// What the user should know.
    pub notes: Vec<ReplicateNote>,
}

/// Why replicate weights cannot be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplicateError {
    /// Reading or writing the dataset failed.
    #[error(transparent)]
    Store(#[from] microtab_store::Error),
    /// The design or its variables cannot be read (a missing weight, a
    /// stratum without a value …).
    #[error(transparent)]
    Analysis(#[from] crate::Error),
    /// The dataset has no survey design.
    #[error("the dataset has no survey design: replicate weights are built from its weight and (optionally) its strata, PSUs and finite population correction")]
    NoDesign,
    /// The dataset's design is a replicate design already.
    #[error("the dataset's survey design already has {replicates} replicate weights ({first} …): replicate weights are built from a Taylor design (weight, strata, PSUs)")]
    ReplicateDesign {
        /// Its replicate weights.
        replicates: usize,
        /// The first of them.
        first: String,
    },
    /// The Taylor design was set on another number of records.
    #[error("the survey design was set on {set_on} records and the dataset now has {rows}")]
    StaleDesign {
        /// Records when the design was set.
        set_on: u64,
        /// Records now.
        rows: u64,
    },
    /// The data's PSUs are not those the design found when it was set.
    #[error("the data's PSUs differ from those the survey design found when it was set ({found} PSUs now, {stored} then): the data changed since")]
    PsusChanged {
        /// PSUs found now.
        found: u64,
        /// PSUs stored with the design.
        stored: u64,
    },
    /// The dataset has no records.
    #[error("the dataset has no records")]
    NoRecords,
    /// More records than PSU indexes hold.
    #[error("{rows} records: replicate weights are built for at most 4294967295 records")]
    TooManyRecords {
        /// Records.
        rows: u64,
    },
    /// JK1 asked of a stratified design.
    #[error("jk1 replicates are for an unstratified design; this one has {strata} strata of {variable}: jkn (or brr, fay, bootstrap, sdr) replicates work with strata")]
    Stratified {
        /// The strata variable.
        variable: String,
        /// Its strata.
        strata: usize,
    },
    /// JKn, BRR or Fay asked of an unstratified design.
    #[error("{method} replicates need a stratified design, and this one has no strata: jk1, bootstrap or sdr replicates work without strata")]
    Unstratified {
        /// The method's name.
        method: &'static str,
    },
    /// The design has a single PSU.
    #[error("the design has a single PSU: replicates need two or more")]
    SinglePsu,
    /// Every stratum has a single PSU and the lonely-PSU option gives
    /// them no replicate.
    #[error("every stratum has a single PSU: the lonely-PSU option {} leaves no jackknife replicate", .option.name())]
    AllLonely {
        /// The design's option.
        option: LonelyPsu,
    },
    /// A jackknife or BRR would make too many replicates.
    #[error("{method} replicates of this design would be {replicates} columns, more than {limit}: a bootstrap or SDR of a chosen number of replicates suits a design of this many PSUs")]
    TooManyReplicates {
        /// The method's name.
        method: &'static str,
        /// The replicates it would make.
        replicates: usize,
        /// The limit.
        limit: usize,
    },
    /// A number of replicates asked of a method that fixes it.
    #[error("{method} makes {fixed} replicates of this design (its number is fixed by the PSUs and strata), not {asked}")]
    FixedReplicates {
        /// The method's name.
        method: &'static str,
        /// Its number of replicates.
        fixed: usize,
        /// The number asked for.
        asked: usize,
    },
    /// A bootstrap or SDR asked for too few or too many replicates.
    #[error("{asked} replicates: {method} makes from {min} to {max}")]
    ReplicateRange {
        /// The method's name.
        method: &'static str,
        /// The number asked for.
        asked: usize,
        /// The fewest.
        min: usize,
        /// The most.
        max: usize,
    },
    /// No Hadamard matrix of the order asked for (SDR).
    #[error("no Hadamard matrix of order {asked} is built here: SDR takes {below} or {above} replicates (orders of R survey's Hadamard matrices)")]
    NoHadamard {
        /// The number asked for.
        asked: usize,
        /// The nearest order below.
        below: usize,
        /// The nearest order above.
        above: usize,
    },
    /// Strata with a single PSU under the lonely-PSU option `fail`.
    #[error("{} {} of {variable} {} a single PSU (a lonely PSU): no jackknife replicate can be made for {}", if *.count == 1 { "stratum" } else { "strata" }, .strata.join(", "), if *.count == 1 { "has" } else { "have" }, if *.count == 1 { "it" } else { "them" })]
    LonelyPsu {
        /// The strata variable.
        variable: String,
        /// The first few such strata, as displayed.
        strata: Vec<String>,
        /// How many.
        count: usize,
    },
    /// A lonely-PSU option with no form for this method.
    #[error("{count} {} a single PSU and the design's lonely-PSU option is {}: {method} replicates give such strata no variance (remove or certainty), and adjust or average exist for jkn replicates only", if *.count == 1 { "stratum has" } else { "strata have" }, .option.name())]
    LonelyOption {
        /// The method's name.
        method: &'static str,
        /// The option.
        option: LonelyPsu,
        /// Strata with a single PSU.
        count: usize,
    },
    /// BRR or Fay with a stratum of fewer than two PSUs.
    #[error("{} {} of {variable} {} fewer than 2 PSUs: BRR pairs the two PSUs of each stratum", if *.count == 1 { "stratum" } else { "strata" }, .strata.join(", "), if *.count == 1 { "has" } else { "have" })]
    BrrSmall {
        /// The strata variable.
        variable: String,
        /// The first few such strata.
        strata: Vec<String>,
        /// How many.
        count: usize,
    },
    /// BRR or Fay with a stratum of an odd number (above 2) of PSUs.
    #[error("stratum {stratum} of {variable} has {psus} PSUs: BRR pairs the PSUs of a stratum, so each needs 2 (or an even number, split into pairs in order of appearance)")]
    BrrOdd {
        /// The strata variable.
        variable: String,
        /// The stratum.
        stratum: String,
        /// Its PSUs.
        psus: u64,
    },
    /// Fay's coefficient out of range.
    #[error("Fay's coefficient rho must be above 0 and below 1, not {rho} (rho 0 is BRR)")]
    Rho {
        /// The value given.
        rho: f64,
    },
    /// Fay's coefficient given to another method.
    #[error("rho is Fay's coefficient: {method} replicates take none")]
    RhoNotFay {
        /// The method's name.
        method: &'static str,
    },
    /// A replicate weight's name is taken.
    #[error("{name} exists in the dataset: replicate weights are new variables")]
    NameTaken {
        /// The variable.
        name: String,
    },
    /// A replicate weight's name is a variable of the design.
    #[error("{name} is part of the survey design (weight, strata, PSUs or FPC) and cannot be replaced by a replicate weight")]
    DesignVariable {
        /// The variable.
        name: String,
    },
}

impl microtab_store::Remedied for ReplicateError {
    /// The store's and the analysis layer's remedies; replacing names
    /// taken; the design for a missing or unusable one.
    fn remedy(&self) -> Option<microtab_store::Remedy> {
        use microtab_store::Remedy;
        match self {
            ReplicateError::Store(e) => e.remedy(),
            ReplicateError::Analysis(e) => e.remedy(),
            ReplicateError::NameTaken { .. } => Some(Remedy::Replace),
            ReplicateError::NoDesign
            | ReplicateError::ReplicateDesign { .. }
            | ReplicateError::StaleDesign { .. }
            | ReplicateError::PsusChanged { .. } => Some(Remedy::SetDesign),
            ReplicateError::LonelyPsu { .. }
            | ReplicateError::LonelyOption { .. }
            | ReplicateError::AllLonely { .. } => Some(Remedy::LonelyPsu),
            _ => None,
        }
    }
}

type Result<T> = std::result::Result<T, ReplicateError>;

/// The first-stage PSUs of a design over the records.
struct Psus {
    /// Each record's PSU (`None`: record i is PSU i).
    of_record: Option<Vec<u32>>,
    /// Each PSU's stratum (an index into the design's strata keys), the
    /// PSUs numbered in order of first appearance.
    stratum: Vec<u32>,
    /// The strata in order of first appearance.
    order: Vec<u32>,
    /// Each stratum's PSUs in order of first appearance.
    members: Vec<Vec<u32>>,
}

impl Psus {
    fn count(&self) -> usize {
        self.stratum.len()
    }
}

/// Finds each record's PSU under the Taylor design `t` (a PSU is a cluster
/// within its stratum), checked against the PSU counts stored with it.
fn find_psus(ds: &Dataset, t: &Taylor) -> Result<Psus> {
    let rows = ds.rows() as usize;
    let h = t.strata_keys.len();
    let strata: Vec<u32> = match &t.strata {
        None => vec![0; rows],
        Some(name) => {
            let v = ds.variable(name)?.clone();
            let keys = crate::taylor::keys(ds, &v, "strata")?;
            let mut unknown = 0u64;
            let s = keys
                .iter()
                .map(|k| match t.strata_keys.binary_search(k) {
                    Ok(x) => x as u32,
                    Err(_) => {
                        unknown += 1;
                        0
                    }
                })
                .collect();
            if unknown > 0 {
                return Err(crate::Error::UnknownStrata { records: unknown }.into());
            }
            s
        }
    };
    let (of_record, stratum) = match &t.cluster {
        None => (None, strata),
        Some(name) => {
            let v = ds.variable(name)?.clone();
            let c = crate::taylor::keys(ds, &v, "cluster")?;
            let mut of = Vec::with_capacity(rows);
            let mut stratum: Vec<u32> = Vec::new();
            if t.contiguous {
                // Each PSU is one run of records.
                for i in 0..rows {
                    if i == 0 || strata[i] != strata[i - 1] || c[i] != c[i - 1] {
                        stratum.push(strata[i]);
                    }
                    of.push((stratum.len() - 1) as u32);
                }
            } else {
                let mut seen: std::collections::HashMap<(u32, i64), u32> =
                    std::collections::HashMap::new();
                for i in 0..rows {
                    let key = (strata[i], c[i]);
                    let next = seen.len() as u32;
                    let p = *seen.entry(key).or_insert(next);
                    if p == next {
                        stratum.push(strata[i]);
                    }
                    of.push(p);
                }
            }
            (Some(of), stratum)
        }
    };
    let mut members = vec![Vec::new(); h];
    let mut order = Vec::new();
    for (p, &s) in stratum.iter().enumerate() {
        if members[s as usize].is_empty() {
            order.push(s);
        }
        members[s as usize].push(p as u32);
    }
    let stored: u64 = t.psus.iter().sum();
    let same = members
        .iter()
        .zip(&t.psus)
        .all(|(m, &n)| m.len() as u64 == n);
    if !same || members.len() != t.psus.len() {
        return Err(ReplicateError::PsusChanged {
            found: stratum.len() as u64,
            stored,
        });
    }
    Ok(Psus {
        of_record,
        stratum,
        order,
        members,
    })
}

/// One replicate of a stratified jackknife.
#[derive(Debug, Clone, Copy)]
enum Jrep {
    /// PSU `psu` of stratum `stratum` deleted; the stratum's other PSUs
    /// weighted `c` = n_h/(n_h − 1).
    Delete { psu: u32, stratum: u32, c: f64 },
    /// R's `adjust` replicate of a lonely stratum: its PSU deleted, every
    /// other PSU weighted `c` = strata/(strata − 1).
    Adjust { stratum: u32, c: f64 },
}

/// How each replicate's PSU factors are made.
#[derive(Debug, Clone)]
enum Plan {
    /// Replicate r deletes PSU r; the others are weighted `c` = n/(n − 1).
    Jk1 { c: f64 },
    /// Stratified jackknife.
    Jkn { reps: Vec<Jrep> },
    /// BRR and Fay: each PSU's pair and whether it is the pair's first;
    /// pair k takes row k + 1 of the 0/1 Hadamard matrix `h`.
    Brr {
        pair: Vec<(u32, bool)>,
        h: Vec<Vec<u8>>,
        rho: f64,
    },
    /// Rao–Wu bootstrap.
    Boot { seed: u64 },
    /// SDR: each PSU's two rows of the 0/1 Hadamard matrix `h`.
    Sdr {
        rows: Vec<(u32, u32)>,
        h: Vec<Vec<u8>>,
    },
}

/// The PSU factors of the replicate being written and the thread making
/// the next one's.
struct Factors<'scope, 'env> {
    /// The replicate and its factors.
    current: Option<(usize, Arc<Vec<f64>>)>,
    /// The next replicate and the thread making its factors.
    next: Option<(usize, std::thread::ScopedJoinHandle<'scope, Vec<f64>>)>,
    /// (`'env`: what the threads borrow.)
    _env: std::marker::PhantomData<&'env ()>,
}

/// 2^(−3/2), the SDR coefficient.
const SDR_C: f64 = 0.353_553_390_593_273_8;

/// The SDR factor of a PSU with rows `a` and `b` of `h` in replicate `r`.
fn sdr_factor(h: &[Vec<u8>], (a, b): (u32, u32), r: usize) -> f64 {
    let pm = |x: u8| if x == 1 { 1.0 } else { -1.0 };
    1.0 + SDR_C * (pm(h[a as usize][r]) - pm(h[b as usize][r]))
}

impl Plan {
    /// Replicate `r`'s factor of every PSU.
    fn factor_vec(&self, psus: &Psus, r: usize) -> Vec<f64> {
        let mut v = vec![0.0; psus.count()];
        self.factors(psus, r, &mut v);
        v
    }

    /// Replicate `r`'s factor of every PSU, into `out`.
    fn factors(&self, psus: &Psus, r: usize, out: &mut [f64]) {
        match self {
            Plan::Jk1 { c } => {
                out.fill(*c);
                out[r] = 0.0;
            }
            Plan::Jkn { reps } => match reps[r] {
                Jrep::Delete { psu, stratum, c } => {
                    out.fill(1.0);
                    for &m in &psus.members[stratum as usize] {
                        out[m as usize] = c;
                    }
                    out[psu as usize] = 0.0;
                }
                Jrep::Adjust { stratum, c } => {
                    out.fill(c);
                    for &m in &psus.members[stratum as usize] {
                        out[m as usize] = 0.0;
                    }
                }
            },
            Plan::Brr { pair, h, rho } => {
                for (o, &(k, first)) in out.iter_mut().zip(pair) {
                    let on = h[k as usize + 1][r] == 1;
                    *o = if on == first { 2.0 - rho } else { *rho };
                }
            }
            Plan::Boot { seed } => {
                // Each stratum's counts in a small buffer (its PSUs may lie
                // anywhere in `out`), then one write per PSU.
                let mut rng = Rng::new(*seed, r as u64);
                let mut counts: Vec<u32> = Vec::new();
                for &s in &psus.order {
                    let m = &psus.members[s as usize];
                    let n = m.len();
                    if n < 2 {
                        out[m[0] as usize] = 1.0;
                        continue;
                    }
                    counts.clear();
                    counts.resize(n, 0);
                    for _ in 0..n - 1 {
                        counts[rng.below(n as u64) as usize] += 1;
                    }
                    let f = n as f64 / (n - 1) as f64;
                    for (&p, &c) in m.iter().zip(&counts) {
                        out[p as usize] = f64::from(c) * f;
                    }
                }
            }
            Plan::Sdr { rows, h } => {
                for (o, &ab) in out.iter_mut().zip(rows) {
                    *o = sdr_factor(h, ab, r);
                }
            }
        }
    }
}

/// A seeded random stream: xoshiro256** whose state is four outputs of
/// SplitMix64 started from the seed and the stream's number.
struct Rng([u64; 4]);

/// SplitMix64's output function (a bijection of 64-bit words).
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// Stream `stream` of seed `seed`.
    fn new(seed: u64, stream: u64) -> Rng {
        let mut x = mix64(mix64(seed).wrapping_add(stream));
        let mut s = [0u64; 4];
        for v in &mut s {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            *v = mix64(x);
        }
        Rng(s)
    }

    /// The next 64 random bits (xoshiro256**).
    fn next(&mut self) -> u64 {
        let s = &mut self.0;
        let out = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        out
    }

    /// A uniform integer in `0..n` (Lemire's multiply-and-reject: no
    /// bias).
    fn below(&mut self, n: u64) -> u64 {
        let mut m = u128::from(self.next()) * u128::from(n);
        if (m as u64) < n {
            let t = n.wrapping_neg() % n;
            while (m as u64) < t {
                m = u128::from(self.next()) * u128::from(n);
            }
        }
        (m >> 64) as u64
    }
}

// ------------------------------------------------------------ Hadamard

/// R survey's precooked 0/1 Hadamard matrices (`survey:::hadamard.list`),
/// of orders 4, 16, 28 and 36.
const PRECOOKED: [&[&str]; 4] = [
    &["1111", "1010", "1100", "1001"],
    &[
        "1111111111111111",
        "1010101010101010",
        "1100110011001100",
        "1001100110011001",
        "1111000011110000",
        "1010010110100101",
        "1100001111000011",
        "1001011010010110",
        "1111111100000000",
        "1010101001010101",
        "1100110000110011",
        "1001100101100110",
        "1111000000001111",
        "1010010101011010",
        "1100001100111100",
        "1001011001101001",
    ],
    &[
        "1111111111111111111111111111",
        "1001110001110001110001111000",
        "1000001111001101001101111000",
        "1000001110110010111001100110",
        "1001101000001111100011010110",
        "1001010100101100010110101110",
        "1000110011010010001110011110",
        "0101100010101010011111110000",
        "0100010110110101100111010100",
        "0100011011001011110010101100",
        "0101011000010111011101001010",
        "0100101101100100111010011010",
        "0101100101011001101100100110",
        "0010110100011110101011101000",
        "0011011001100110101100110100",
        "0010101100111011010100011100",
        "0011000111010111010010110010",
        "0011001011111000100111001010",
        "0010110011101101011001000110",
        "1110101001010100010111100100",
        "1111000101100011001011001100",
        "1111000010011100111000011100",
        "1110010101001010110101010010",
        "1110011000111001001010110010",
        "1110100010100111100100101010",
        "1101111111111110000000000000",
        "1011111110000001111110000000",
        "0111111110000000000001111110",
    ],
    &[
        "111111111111111111111111111111111111",
        "010111000111110111001000010101100100",
        "101110001111101110010000101011001000",
        "011100011111011100100001010110010010",
        "111000111110111001000010101100100100",
        "110001111101110010000101011001001010",
        "100011111011100100001010110010010110",
        "000111110111001000010101100100101110",
        "001111101110010000101011001001011100",
        "011111011100100001010110010010111000",
        "111110111001000010101100100101110000",
        "111101110010000101011001001011100010",
        "111011100100001010110010010111000110",
        "110111001000010101100100101110001110",
        "101110010000101011001001011100011110",
        "011100100001010110010010111000111110",
        "111001000010101100100101110001111100",
        "110010000101011001001011100011111010",
        "100100001010110010010111000111110110",
        "001000010101100100101110001111101110",
        "010000101011001001011100011111011100",
        "100001010110010010111000111110111000",
        "000010101100100101110001111101110010",
        "000101011001001011100011111011100100",
        "001010110010010111000111110111001000",
        "010101100100101110001111101110010000",
        "101011001001011100011111011100100000",
        "010110010010111000111110111001000010",
        "101100100101110001111101110010000100",
        "011001001011100011111011100100001010",
        "110010010111000111110111001000010100",
        "100100101110001111101110010000101010",
        "001001011100011111011100100001010110",
        "010010111000111110111001000010101100",
        "100101110001111101110010000101011000",
        "001011100011111011100100001010110010",
    ],
];
/// Their orders (`survey:::hadamard.sizes`).
const SIZES: [usize; 4] = [4, 16, 28, 36];
/// The largest prime of R's Paley constructions.
const MAX_PRIME: usize = 7919;

/// Whether `p` is one of R's Paley primes: a prime ≡ 3 (mod 4) from 3 to
/// 7919.
fn paley_prime(p: usize) -> bool {
    (3..=MAX_PRIME).contains(&p)
        && p % 4 == 3
        && (3..)
            .step_by(2)
            .take_while(|d| d * d <= p)
            .all(|d| !p.is_multiple_of(d))
}

/// How a Hadamard matrix is built: a precooked one or a Paley matrix of a
/// prime, doubled some times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Construction {
    Precooked { index: usize, doublings: u32 },
    Paley { prime: usize, doublings: u32 },
}

impl Construction {
    fn order(self) -> usize {
        match self {
            Construction::Precooked { index, doublings } => SIZES[index] << doublings,
            Construction::Paley { prime, doublings } => (prime + 1) << doublings,
        }
    }
}

/// R's `survey:::paley(n, nmax)`: a Paley construction of order above
/// `n`, or none.
fn paley(n: usize, nmax: usize) -> Option<Construction> {
    let nceil = n + 4 - n % 4;
    if n % 4 + 4 == n % 8 {
        let mut nn = nceil;
        while nn.is_multiple_of(8) {
            nn /= 2;
        }
        if paley_prime(nn - 1) {
            let mut doublings = 0;
            let mut x = nn;
            while x < nceil {
                x *= 2;
                doublings += 1;
            }
            return Some(Construction::Paley {
                prime: nn - 1,
                doublings,
            });
        }
    }
    if n > MAX_PRIME {
        return None;
    }
    let p = (n..=MAX_PRIME).find(|&p| paley_prime(p))?;
    if p + 1 > nceil + 4 && nceil + 4 < nmax {
        return paley(nceil + 3, 2 * (nceil + 3));
    }
    if p > nmax {
        return None;
    }
    Some(Construction::Paley {
        prime: p,
        doublings: 0,
    })
}

/// R's `survey:::hadamard(n)`: which Hadamard matrix (of order above
/// `n`) R uses for `n` strata.
fn construction(n: usize) -> Construction {
    let m = n - n % 4;
    if let Some(index) = (0..4).find(|&i| m < SIZES[i] && m + 4 >= SIZES[i]) {
        return Construction::Precooked {
            index,
            doublings: 0,
        };
    }
    // Each precooked size doubled until above n.
    let doubled: Vec<(usize, u32)> = SIZES
        .iter()
        .map(|&s| {
            let mut k = 0;
            while (s << k) < n + 1 {
                k += 1;
            }
            (s << k, k)
        })
        .collect();
    let best = (0..4)
        .min_by_key(|&i| doubled[i].0 - n)
        .expect("four sizes");
    if doubled[best].0 - n > 4 {
        if let Some(c) = paley(n, doubled[best].0) {
            return c;
        }
    }
    Construction::Precooked {
        index: best,
        doublings: doubled[best].1,
    }
}

/// The 0/1 matrix of a construction, rows of bytes.
fn build(c: Construction) -> Vec<Vec<u8>> {
    let (mut h, doublings) = match c {
        Construction::Precooked { index, doublings } => (
            PRECOOKED[index]
                .iter()
                .map(|r| r.bytes().map(|b| b - b'0').collect())
                .collect::<Vec<Vec<u8>>>(),
            doublings,
        ),
        Construction::Paley {
            prime: p,
            doublings,
        } => {
            let mut residue = vec![false; p];
            residue[0] = true;
            for i in 1..=((p - 1) / 2).max(2) {
                residue[(i * i) % p] = true;
            }
            let mut h = vec![vec![1u8; p + 1]];
            for i in 0..p {
                let mut row = vec![1u8];
                row.extend((0..p).map(|j| u8::from(!residue[(i + j) % p])));
                h.push(row);
            }
            (h, doublings)
        }
    };
    for _ in 0..doublings {
        let n = h.len();
        let mut d = Vec::with_capacity(2 * n);
        for r in &h {
            let mut row = r.clone();
            row.extend_from_slice(r);
            d.push(row);
        }
        for r in h.iter().take(n) {
            let mut row = r.clone();
            row.extend(r.iter().map(|&x| 1 - x));
            d.push(row);
        }
        h = d;
    }
    h
}

/// R's `survey:::hadamard(n)`, 0/1.
fn hadamard(n: usize) -> Vec<Vec<u8>> {
    build(construction(n))
}

/// Whether SDR can have `r` replicates: R's construction for `r − 1`
/// rows has order `r`.
fn sdr_order(r: usize) -> bool {
    r >= 4 && construction(r - 1).order() == r
}

/// The strata as displayed, in key order, for messages and BRR's order.
fn strata_shown(ds: &Dataset, t: &Taylor) -> Result<Vec<String>> {
    let shown = crate::taylor::strata_values(ds)?;
    Ok(if shown.len() == t.strata_keys.len() {
        shown
    } else {
        t.strata_keys.iter().map(|k| k.to_string()).collect()
    })
}

/// The replicate weights' names, checked: new, or replaced with
/// `replace` and no variable of the design.
fn target_names(
    ds: &Dataset,
    design: &Design,
    prefix: &str,
    n: usize,
    replace: bool,
) -> Result<Vec<String>> {
    let used = design.variables();
    (1..=n)
        .map(|i| {
            let name = format!("{prefix}{i}");
            microtab_engine::check_name(&name).map_err(crate::Error::from)?;
            match ds.variable(&name) {
                Err(_) => Ok(name),
                Ok(v) if used.iter().any(|u| u.eq_ignore_ascii_case(&v.name)) => {
                    Err(ReplicateError::DesignVariable {
                        name: v.name.clone(),
                    })
                }
                Ok(v) if replace => Ok(v.name.clone()),
                Ok(v) => Err(ReplicateError::NameTaken {
                    name: v.name.clone(),
                }),
            }
        })
        .collect()
}

/// The finite population correction `1 − n/N` of a stratum with `n` PSUs
/// of a population of `pop` (1 without one).
fn fpc_factor(pop: Option<&Vec<f64>>, x: usize, n: f64) -> f64 {
    match pop.map(|p| p[x]) {
        Some(p) if p.is_finite() && p > 0.0 => (p - n) / p,
        _ => 1.0,
    }
}

/// A plan with its scale and coefficients.
struct Made {
    plan: Plan,
    scale: f64,
    rscales: Vec<f64>,
    notes: Vec<ReplicateNote>,
}

/// Checks `method` against the design before any data is read, and
/// returns its number of replicates when the design fixes it.
fn fixed_count(method: Method, t: &Taylor, asked: Option<usize>) -> Result<Option<usize>> {
    let total: u64 = t.psus.iter().sum();
    let name = method.name();
    match method {
        Method::Jk1 => {
            if let Some(s) = &t.strata {
                return Err(ReplicateError::Stratified {
                    variable: s.clone(),
                    strata: t.strata_keys.len(),
                });
            }
        }
        Method::Jkn | Method::Brr | Method::Fay => {
            if t.strata.is_none() {
                return Err(ReplicateError::Unstratified { method: name });
            }
        }
        Method::Bootstrap | Method::Sdr => {}
    }
    if total < 2 {
        return Err(ReplicateError::SinglePsu);
    }
    let lonely = t.psus.iter().filter(|&&n| n == 1).count();
    let fixed = match method {
        Method::Jk1 => Some(total as usize),
        Method::Jkn => {
            let big: u64 = t.psus.iter().filter(|&&n| n > 1).sum();
            let extra = if t.lonely_psu == LonelyPsu::Adjust {
                lonely
            } else {
                0
            };
            Some(big as usize + extra)
        }
        Method::Brr | Method::Fay => {
            let pairs: u64 = t.psus.iter().map(|&n| n / 2).sum();
            Some(construction(pairs.max(1) as usize).order())
        }
        Method::Bootstrap | Method::Sdr => {
            if lonely > 0 && !matches!(t.lonely_psu, LonelyPsu::Remove | LonelyPsu::Certainty) {
                return Err(ReplicateError::LonelyOption {
                    method: name,
                    option: t.lonely_psu,
                    count: lonely,
                });
            }
            None
        }
    };
    if let Some(n) = fixed {
        if n > MAX_FIXED_REPLICATES {
            return Err(ReplicateError::TooManyReplicates {
                method: name,
                replicates: n,
                limit: MAX_FIXED_REPLICATES,
            });
        }
        if let Some(a) = asked.filter(|&a| a != n) {
            return Err(ReplicateError::FixedReplicates {
                method: name,
                fixed: n,
                asked: a,
            });
        }
    }
    Ok(fixed)
}

/// The stratified jackknife of R's `jknweights` (compressed form):
/// strata in order of first appearance, one replicate per PSU; lonely
/// strata per the design's option.
fn jkn(ds: &Dataset, t: &Taylor, psus: &Psus) -> Result<Made> {
    let nstrat = t.strata_keys.len() as f64;
    let mut reps = Vec::new();
    let mut rscales = Vec::new();
    let mut lonely = Vec::new();
    for &s in &psus.order {
        let m = &psus.members[s as usize];
        let n = m.len() as f64;
        if m.len() == 1 {
            lonely.push(s);
            if t.lonely_psu == LonelyPsu::Adjust {
                reps.push(Jrep::Adjust {
                    stratum: s,
                    c: nstrat / (nstrat - 1.0),
                });
                rscales.push((nstrat - 1.0) / nstrat);
            }
            continue;
        }
        let f = fpc_factor(t.population.as_ref(), s as usize, n);
        for &p in m {
            reps.push(Jrep::Delete {
                psu: p,
                stratum: s,
                c: n / (n - 1.0),
            });
            rscales.push(f * (n - 1.0) / n);
        }
    }
    if !lonely.is_empty() && t.lonely_psu == LonelyPsu::Fail {
        let shown = strata_shown(ds, t)?;
        return Err(ReplicateError::LonelyPsu {
            variable: t.strata.clone().unwrap_or_default(),
            strata: lonely
                .iter()
                .take(5)
                .map(|&s| shown[s as usize].clone())
                .collect(),
            count: lonely.len(),
        });
    }
    if reps.is_empty() {
        return Err(ReplicateError::AllLonely {
            option: t.lonely_psu,
        });
    }
    let mut scale = 1.0;
    let mut notes = Vec::new();
    if reps.len() < psus.count() && t.lonely_psu == LonelyPsu::Average {
        scale = psus.count() as f64 / reps.len() as f64;
    }
    if !lonely.is_empty() && t.lonely_psu != LonelyPsu::Adjust {
        notes.push(ReplicateNote::LonelyStrata {
            count: lonely.len(),
            option: t.lonely_psu,
        });
    }
    Ok(Made {
        plan: Plan::Jkn { reps },
        scale,
        rscales,
        notes,
    })
}

/// BRR and Fay as R's `brrweights` (`small = "fail"`, `large = "split"`):
/// strata in the string order of their values; strata of more than two
/// PSUs (an even number) split into pairs first, then the strata of two.
fn brr(ds: &Dataset, t: &Taylor, psus: &Psus, rho: f64) -> Result<Made> {
    let shown = strata_shown(ds, t)?;
    let mut by_text: Vec<usize> = (0..t.strata_keys.len()).collect();
    by_text.sort_by(|&a, &b| shown[a].as_bytes().cmp(shown[b].as_bytes()));
    let variable = t.strata.clone().unwrap_or_default();
    let small: Vec<usize> = by_text.iter().copied().filter(|&s| t.psus[s] < 2).collect();
    if !small.is_empty() {
        return Err(ReplicateError::BrrSmall {
            variable,
            strata: small.iter().take(5).map(|&s| shown[s].clone()).collect(),
            count: small.len(),
        });
    }
    if let Some(&s) = by_text
        .iter()
        .find(|&&s| t.psus[s] > 2 && t.psus[s] % 2 == 1)
    {
        return Err(ReplicateError::BrrOdd {
            variable,
            stratum: shown[s].clone(),
            psus: t.psus[s],
        });
    }
    let mut pair = vec![(0u32, false); psus.count()];
    let mut k = 0u32;
    let large = by_text.iter().filter(|&&s| t.psus[s] > 2);
    let two = by_text.iter().filter(|&&s| t.psus[s] == 2);
    for &s in large.chain(two) {
        for (j, &p) in psus.members[s].iter().enumerate() {
            pair[p as usize] = (k + (j / 2) as u32, j % 2 == 0);
        }
        k += (psus.members[s].len() / 2) as u32;
    }
    let h = hadamard(k as usize);
    let r = h[0].len();
    let mut notes = Vec::new();
    if let Some(f) = &t.fpc {
        notes.push(ReplicateNote::FpcDropped { fpc: f.clone() });
    }
    Ok(Made {
        plan: Plan::Brr { pair, h, rho },
        scale: 1.0 / (r as f64 * (1.0 - rho) * (1.0 - rho)),
        rscales: vec![1.0; r],
        notes,
    })
}

/// The default number of SDR replicates for `units` PSUs: the smallest
/// order of R's Hadamard matrices with more rows than PSUs (every PSU its
/// own rows, the variance of a total exactly the successive-difference
/// estimator), up to [`DEFAULT_REPLICATES`].
fn sdr_default(units: usize) -> usize {
    if units < DEFAULT_REPLICATES {
        construction(units).order().min(DEFAULT_REPLICATES)
    } else {
        DEFAULT_REPLICATES
    }
}

/// SDR: PSUs in order of first appearance within strata taken in order
/// of first appearance; PSU k of the sequence takes row 1 + k (mod R − 1)
/// of the Hadamard matrix (row 0, all ones, unused) and the next PSU of
/// its stratum's row, the last PSU of a stratum its first's (circular).
fn sdr(t: &Taylor, psus: &Psus, r: usize) -> Made {
    let usable = r - 1;
    let mut rows = vec![(0u32, 0u32); psus.count()];
    let mut k = 0usize;
    for &s in &psus.order {
        let m = &psus.members[s as usize];
        for (j, &p) in m.iter().enumerate() {
            let next = k - j + (j + 1) % m.len();
            rows[p as usize] = ((1 + k % usable) as u32, (1 + next % usable) as u32);
            k += 1;
        }
    }
    let mut notes = Vec::new();
    if let Some(f) = &t.fpc {
        notes.push(ReplicateNote::FpcDropped { fpc: f.clone() });
    }
    if psus.count() > usable {
        notes.push(ReplicateNote::RowsCycle {
            units: psus.count() as u64,
            rows: usable,
        });
    }
    lonely_note(t, &mut notes);
    Made {
        plan: Plan::Sdr {
            rows,
            h: build(construction(r - 1)),
        },
        scale: 4.0 / r as f64,
        rscales: vec![1.0; r],
        notes,
    }
}

/// The note of strata with a single PSU (factor 1: no variance).
fn lonely_note(t: &Taylor, notes: &mut Vec<ReplicateNote>) {
    let count = t.psus.iter().filter(|&&n| n == 1).count();
    if count > 0 {
        notes.push(ReplicateNote::LonelyStrata {
            count,
            option: t.lonely_psu,
        });
    }
}

/// The replicate weights' rank over the records (R's `degf()` + 1:
/// `qr(weights(design, "analysis"), tol = 1e-5)$rank`), from their Gram
/// matrix summed over PSUs (`Σ_p (Σ_{i∈p} w_i²) f_a(p) f_b(p)`), when it
/// is cheap enough.
fn rank(plan: &Plan, psus: &Psus, w: &[f64], r: usize) -> Option<usize> {
    let mut s2 = vec![0.0f64; psus.count()];
    match &psus.of_record {
        Some(ix) => {
            for (&p, &x) in ix.iter().zip(w) {
                s2[p as usize] += x * x;
            }
        }
        None => {
            for (o, &x) in s2.iter_mut().zip(w) {
                *o = x * x;
            }
        }
    }
    // SDR: PSUs of the same two rows have the same factors.
    let (weights, table): (Vec<f64>, Vec<Vec<f64>>) = if let Plan::Sdr { rows, h } = plan {
        let mut by: std::collections::HashMap<(u32, u32), f64> = Default::default();
        for (&ab, &x) in rows.iter().zip(&s2) {
            *by.entry(ab).or_default() += x;
        }
        let mut keys: Vec<_> = by.into_iter().collect();
        keys.sort_by_key(|k| k.0);
        if keys.len().saturating_mul(r) > RANK_CELLS {
            return None;
        }
        let table = (0..r)
            .map(|c| keys.iter().map(|&(ab, _)| sdr_factor(h, ab, c)).collect())
            .collect();
        (keys.iter().map(|k| k.1).collect(), table)
    } else {
        let p = psus.count();
        if p.saturating_mul(r) > RANK_CELLS {
            return None;
        }
        let table = (0..r)
            .map(|c| {
                let mut f = vec![0.0; p];
                plan.factors(psus, c, &mut f);
                f
            })
            .collect();
        (s2, table)
    };
    let n = weights.len();
    if n.saturating_mul(r * (r + 1) / 2) > RANK_BUDGET {
        return None;
    }
    let mut g = vec![0.0f64; r * r];
    for a in 0..r {
        for b in 0..=a {
            g[a * r + b] = (0..n).map(|i| weights[i] * table[a][i] * table[b][i]).sum();
        }
    }
    Some(crate::design::gram_rank(&g, r, 1e-5))
}

/// The plan of `method` with its scale, coefficients and notes (`rho`,
/// `seed`, `count`: Fay's coefficient, the bootstrap's seed, the number
/// of replicates).
fn make(
    method: Method,
    ds: &Dataset,
    t: &Taylor,
    psus: &Psus,
    (rho, seed, count): (f64, u64, usize),
) -> Result<Made> {
    Ok(match method {
        Method::Jk1 => {
            let n = psus.count() as f64;
            let f = fpc_factor(t.population.as_ref(), 0, n);
            Made {
                plan: Plan::Jk1 { c: n / (n - 1.0) },
                scale: f * (n - 1.0) / n,
                rscales: vec![1.0; psus.count()],
                notes: Vec::new(),
            }
        }
        Method::Jkn => jkn(ds, t, psus)?,
        Method::Brr | Method::Fay => brr(ds, t, psus, rho)?,
        Method::Bootstrap => {
            let mut notes = Vec::new();
            if let Some(f) = &t.fpc {
                notes.push(ReplicateNote::FpcDropped { fpc: f.clone() });
            }
            lonely_note(t, &mut notes);
            Made {
                plan: Plan::Boot { seed },
                scale: 1.0 / (count as f64 - 1.0),
                rscales: vec![1.0; count],
                notes,
            }
        }
        Method::Sdr => sdr(t, psus, count),
    })
}

/// Fay's coefficient of `method` (0 for the others), checked.
fn fay_rho(method: Method, given: Option<f64>) -> Result<f64> {
    match (method, given) {
        (Method::Fay, r) => {
            let r = r.unwrap_or(DEFAULT_FAY_RHO);
            if !(r > 0.0 && r < 1.0) {
                return Err(ReplicateError::Rho { rho: r });
            }
            Ok(r)
        }
        (_, Some(_)) => Err(ReplicateError::RhoNotFay {
            method: method.name(),
        }),
        (_, None) => Ok(0.0),
    }
}

/// The number of replicates of `method` on the design `t` (`asked`: the
/// number asked for), checked.
fn replicate_count(method: Method, t: &Taylor, asked: Option<usize>) -> Result<usize> {
    let fixed = fixed_count(method, t, asked)?;
    let units: u64 = t.psus.iter().sum();
    Ok(match (fixed, method) {
        (Some(n), _) => n,
        (None, Method::Sdr) => {
            let r = asked.unwrap_or_else(|| sdr_default(units as usize));
            if !(4..=MAX_REPLICATES).contains(&r) {
                return Err(ReplicateError::ReplicateRange {
                    method: method.name(),
                    asked: r,
                    min: 4,
                    max: MAX_REPLICATES,
                });
            }
            if !sdr_order(r) {
                let below = (4..r).rev().find(|&x| sdr_order(x)).unwrap_or(4);
                let above = (r + 1..).find(|&x| sdr_order(x)).expect("a larger order");
                return Err(ReplicateError::NoHadamard {
                    asked: r,
                    below,
                    above,
                });
            }
            r
        }
        (None, _) => {
            let r = asked.unwrap_or(DEFAULT_REPLICATES);
            if !(2..=MAX_REPLICATES).contains(&r) {
                return Err(ReplicateError::ReplicateRange {
                    method: method.name(),
                    asked: r,
                    min: 2,
                    max: MAX_REPLICATES,
                });
            }
            r
        }
    })
}

/// Makes replicate weights from the Taylor design of the dataset `dir`,
/// writes them as new columns `{prefix}1 … {prefix}R` in a new generation
/// and sets the replicate design that uses them (the weight unchanged,
/// deviations from the full-sample estimate). Holds the dataset's writers'
/// lock throughout; nothing changes unless every column is written.
pub fn replicate(dir: &Path, o: &ReplicateOptions) -> Result<Replicated> {
    let mut w = DatasetWriter::extend(dir)?;
    let ds = w.snapshot().expect("an extending writer");
    let design = ds
        .manifest()
        .design
        .clone()
        .ok_or(ReplicateError::NoDesign)?;
    if let Some(r) = &design.replicates {
        return Err(ReplicateError::ReplicateDesign {
            replicates: r.weights.len(),
            first: r.weights.first().cloned().unwrap_or_default(),
        });
    }
    let t = design.taylor.clone().ok_or(ReplicateError::NoDesign)?;
    let rows = ds.rows();
    if rows == 0 {
        return Err(ReplicateError::NoRecords);
    }
    if t.rows != rows {
        return Err(ReplicateError::StaleDesign {
            set_on: t.rows,
            rows,
        });
    }
    if rows > u64::from(u32::MAX) {
        return Err(ReplicateError::TooManyRecords { rows });
    }
    let method = o.method;
    let rho = fay_rho(method, o.rho)?;
    let count = replicate_count(method, &t, o.replicates)?;
    let wvar: Variable = ds.variable(&design.weight)?.clone();
    if wvar.kind == Kind::String {
        return Err(
            crate::Error::Design(format!("the weight {} is a text variable", wvar.name)).into(),
        );
    }
    let prefix = o
        .prefix
        .clone()
        .unwrap_or_else(|| format!("{}_REP", wvar.name));
    let names = target_names(&ds, &design, &prefix, count, o.replace)?;
    let psus = find_psus(&ds, &t)?;
    let weights = crate::taylor::values(&ds, &wvar, "weight")?;
    let made = make(method, &ds, &t, &psus, (rho, o.seed, count))?;
    debug_assert_eq!(made.rscales.len(), count);
    let rank = rank(&made.plan, &psus, &weights, count);
    let plan = &made.plan;
    let psus = &psus;
    let weights = &weights;
    // One replicate's PSU factors at a time: the first block of a column
    // takes them and starts the next replicate's on a thread of its own
    // (the bootstrap's draws are serial), so that they are made while
    // this column is filled and written.
    std::thread::scope(|sc| {
        let state: Mutex<Factors<'_, '_>> = Mutex::new(Factors {
            current: None,
            next: None,
            _env: std::marker::PhantomData,
        });
        write_f64_columns::<ReplicateError, _>(&mut w, rows as usize, &names, |col, start, out| {
            let f = {
                let mut g = state.lock().unwrap_or_else(|e| e.into_inner());
                match &g.current {
                    Some((c, f)) if *c == col => f.clone(),
                    _ => {
                        let f = match g.next.take() {
                            Some((c, h)) if c == col => h.join().expect("a replicate's factors"),
                            _ => plan.factor_vec(psus, col),
                        };
                        let f = Arc::new(f);
                        g.current = Some((col, f.clone()));
                        if col + 1 < count {
                            let next = col + 1;
                            g.next = Some((next, sc.spawn(move || plan.factor_vec(psus, next))));
                        }
                        f
                    }
                }
            };
            let wts = &weights[start..start + out.len()];
            match &psus.of_record {
                Some(ix) => {
                    for ((o, &x), &q) in out.iter_mut().zip(wts).zip(&ix[start..]) {
                        *o = x * f[q as usize] + 0.0;
                    }
                }
                None => {
                    for ((o, &x), &q) in out.iter_mut().zip(wts).zip(&f[start..]) {
                        *o = x * q + 0.0;
                    }
                }
            }
            Ok(())
        })
    })?;
    let kind = method.rep_type();
    w.set_design(Design {
        weight: wvar.name.clone(),
        replicates: Some(Replicates {
            kind,
            weights: names.clone(),
            scale: made.scale,
            rscales: made.rscales.clone(),
            mse: true,
            rho: (method == Method::Fay).then_some(rho),
            rank,
        }),
        taylor: None,
    });
    let generation = ds.manifest().generation + 1;
    w.commit(rows)?;
    Ok(Replicated {
        method,
        weight: wvar.name,
        names,
        scale: made.scale,
        rscales: made.rscales,
        rho: (method == Method::Fay).then_some(rho),
        seed: (method == Method::Bootstrap).then_some(o.seed),
        rank,
        psus: psus.count() as u64,
        strata: t.strata_keys.len(),
        rows,
        generation,
        notes: {
            let mut notes = made.notes;
            if let Some(c) = &t.calibration {
                notes.push(ReplicateNote::Adjusted {
                    weight: design.weight.clone(),
                    source: c.source.clone(),
                });
            }
            notes
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The orders R's `survey:::hadamard(n)` gives for n = 1 … 60 (printed
    /// by `sapply(1:60, function(n) ncol(survey:::hadamard(n)))`): not
    /// always the next multiple of 4 (48 … 55 → 56).
    #[test]
    fn hadamard_orders_are_rs() {
        let r = [
            4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, 16, 16, 16, 16, 20, 20, 20, 20, 24, 24, 24, 24,
            28, 28, 28, 28, 32, 32, 32, 32, 36, 36, 36, 36, 40, 40, 40, 40, 44, 44, 44, 44, 48, 48,
            48, 48, 56, 56, 56, 56, 56, 56, 56, 56, 60, 60, 60, 60, 64,
        ];
        for (n, &want) in (1..=60).zip(&r) {
            assert_eq!(construction(n).order(), want, "n = {n}");
            assert_eq!(hadamard(n).len(), want, "n = {n}");
        }
    }

    /// Every matrix built is Hadamard: ±1 rows pairwise orthogonal, the
    /// first row all ones (so the others are balanced).
    #[test]
    fn hadamard_matrices_are_orthogonal() {
        for n in (1..=130).chain([200, 250, 333]) {
            let h = hadamard(n);
            let k = h.len();
            assert!(h.iter().all(|r| r.len() == k));
            assert!(h[0].iter().all(|&x| x == 1), "n = {n}");
            for a in 0..k {
                for b in 0..a {
                    let dot: i64 = (0..k)
                        .map(|c| if h[a][c] == h[b][c] { 1 } else { -1 })
                        .sum();
                    assert_eq!(dot, 0, "n = {n}, rows {a} and {b}");
                }
            }
        }
    }

    /// R's `hadamard(4)` (T24): Sylvester's 8 × 8 in natural order.
    #[test]
    fn hadamard_of_four_strata_is_rs() {
        let want = [
            "11111111", "10101010", "11001100", "10011001", "11110000", "10100101", "11000011",
            "10010110",
        ];
        let h = hadamard(4);
        let got: Vec<String> = h
            .iter()
            .map(|r| r.iter().map(|x| char::from(b'0' + x)).collect())
            .collect();
        assert_eq!(got, want);
    }

    /// SDR orders: 80 (Paley of 79), 4, 12; not 52 (R builds 56 for 51).
    #[test]
    fn sdr_orders() {
        assert!(sdr_order(80) && sdr_order(4) && sdr_order(12) && sdr_order(56));
        assert!(!sdr_order(52) && !sdr_order(10) && !sdr_order(3));
        assert_eq!(sdr_default(8), 12);
        assert_eq!(sdr_default(79), 80);
        assert_eq!(sdr_default(5000), 80);
    }

    /// The stream is fixed by the seed and the replicate (the same on
    /// every machine: these are its first words), and bounded draws are
    /// uniform (a χ² over 7 cells of 70,000 draws).
    #[test]
    fn the_random_stream_is_fixed_and_uniform() {
        let mut a = Rng::new(1, 0);
        let mut b = Rng::new(1, 0);
        let mut c = Rng::new(1, 1);
        let x: Vec<u64> = (0..3).map(|_| a.next()).collect();
        assert_eq!(x, (0..3).map(|_| b.next()).collect::<Vec<_>>());
        assert_ne!(x, (0..3).map(|_| c.next()).collect::<Vec<_>>());
        let mut counts = [0u32; 7];
        for _ in 0..70_000 {
            counts[a.below(7) as usize] += 1;
        }
        let chi2: f64 = counts
            .iter()
            .map(|&k| (f64::from(k) - 10_000.0).powi(2) / 10_000.0)
            .sum();
        // 99.9th percentile of χ² with 6 df: 22.46.
        assert!(chi2 < 22.46, "{counts:?}");
    }

    /// SDR rows: circular within each stratum, strata in order of first
    /// appearance, rows 1 … R − 1 in turn.
    #[test]
    fn sdr_rows_are_circular_within_strata() {
        // Stratum 1 appears first with PSUs 0, 2, 3; stratum 0 has 1, 4.
        let psus = Psus {
            of_record: None,
            stratum: vec![1, 0, 1, 1, 0],
            order: vec![1, 0],
            members: vec![vec![1, 4], vec![0, 2, 3]],
        };
        let t = Taylor {
            strata: Some("S".into()),
            cluster: None,
            fpc: None,
            lonely_psu: LonelyPsu::Fail,
            strata_keys: vec![0, 1],
            psus: vec![2, 3],
            population: None,
            contiguous: true,
            weighted_psus: 5,
            weighted_strata: 2,
            rows: 5,
            calibration: None,
        };
        let made = sdr(&t, &psus, 8);
        let Plan::Sdr { rows, .. } = &made.plan else {
            panic!("an SDR plan")
        };
        assert_eq!(rows, &vec![(1, 2), (4, 5), (2, 3), (3, 1), (5, 4)]);
        assert!(made.notes.is_empty());
        // 4 usable rows for 5 PSUs: in turn.
        let made = sdr(&t, &psus, 4);
        let Plan::Sdr { rows, .. } = &made.plan else {
            panic!("an SDR plan")
        };
        assert_eq!(rows, &vec![(1, 2), (1, 2), (2, 3), (3, 1), (2, 1)]);
        assert_eq!(made.notes.len(), 1);
    }
}
