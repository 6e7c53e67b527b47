//! The physical plan of a query: which columns the scan reads (each role's
//! column by a named slot), how codes map to cells, and the one [`Kernel`]
//! that counts every morsel — chosen once per query from the columns'
//! types, ranges and missing codes ([`Kernel::choose`]).
//!
//! A new per-row sum (regression sums X'WX per cell, say) is either a new
//! [`Kernel`] variant (when it replaces how moments are summed) with its
//! state in `acc`, or, when it follows each row's cell index beside the
//! moments as the replicate, Taylor and distribution sums do, a field of
//! [`Plan`] that turns the fused kernels off ([`Kernel::choose`]'s
//! `per_row` argument) and a state of its own in `acc`.

mod choose;

pub(crate) use choose::*;

use crate::kernels::FusedTab;
use crate::plan::{Exclusion, Mapper};
use microtab_store::{Column, Kind, PhysType};

/// How a means query over byte code columns runs as one fused pass
/// (chosen by [`means_fuse`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct MeansFuse {
    /// Excluded analysis-variable codes that occur in the column (padded
    /// with a value no ≤32-bit column can hold).
    pub(crate) xcodes: [i64; 2],
    /// Morsels whose packed sums may add up before they are folded into
    /// the exact cells (every lane's count, Σw and Σw·x still fit).
    pub(crate) fold_every: usize,
}

/// The kernel that counts a query's morsels, chosen once per query.
pub(crate) enum Kernel {
    /// Each row's cell index from the code columns, then counts (and
    /// weight sums) per cell lane. No analysis variable.
    Counts,
    /// One pass over byte (and at most one `u16`) code columns and the
    /// weight, with no cell-index array: the common survey crosstab.
    /// Morsels of a form it does not take are counted by [`Kernel::Counts`].
    Fused(Fused),
    /// Cell indexes, then the analysis variable's moments in `f64`, each
    /// cell's values shifted by a value near its mean.
    Moments,
    /// Cell indexes, then exact integer moments row by row in `i128`
    /// cells (integer weight and analysis variable, [`exact_ok`]).
    Exact,
    /// [`Kernel::Exact`] with few cells and |w·x| small enough that a
    /// morsel's Σw·x fits in an `i64`: each morsel summed in 64-bit cells
    /// first, folded once per morsel.
    ExactMorsel,
    /// The fused means kernel over byte code columns (exact sums packed
    /// per morsel); morsels of a form it does not take are counted by
    /// [`Kernel::ExactMorsel`].
    FusedMeans(Fused, MeansFuse),
    /// Cell indexes, then weights and moments row by row into
    /// [`ExactSum`](crate::exact::ExactSum)s (partial results whose sums
    /// the integer kernels would not keep exact, extreme floats).
    ExactFloats,
}

/// The per-cell sums a kernel keeps (the state of a worker's
/// accumulator, `acc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SumsKind {
    /// Counts and weight sums per cell lane.
    Tally,
    /// Counts, weight sums and `f64` moments.
    Moments,
    /// Exact integer cells (count, Σw, Σwx, Σwx²).
    Exact,
    /// Counts and exact float sums.
    ExactFloats,
}

impl Kernel {
    /// The kernel's name (as the variant is spelled), for tests that must
    /// cover every kernel ([`crate::run_traced`]).
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Kernel::Counts => "Counts",
            Kernel::Fused(_) => "Fused",
            Kernel::Moments => "Moments",
            Kernel::Exact => "Exact",
            Kernel::ExactMorsel => "ExactMorsel",
            Kernel::FusedMeans(..) => "FusedMeans",
            Kernel::ExactFloats => "ExactFloats",
        }
    }

    /// The sums this kernel keeps.
    pub(crate) fn sums(&self) -> SumsKind {
        match self {
            Kernel::Counts | Kernel::Fused(_) => SumsKind::Tally,
            Kernel::Moments => SumsKind::Moments,
            Kernel::Exact | Kernel::ExactMorsel | Kernel::FusedMeans(..) => SumsKind::Exact,
            Kernel::ExactFloats => SumsKind::ExactFloats,
        }
    }
}

/// How a morsel's filters reach a fused kernel (decided per morsel by how
/// many of its rows pass, `acc`'s `gather`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// The filter columns are code columns of the kernel (no selection).
    Columns = 0,
    /// The selection column is one more code column of the kernel.
    Selection = 1,
    /// The passing rows were gathered: every row passes.
    Gathered = 2,
}

/// The index kernels' way past a selective filter: each morsel's filters
/// evaluated into a selection first and, when few rows pass, those rows
/// gathered and counted by the plan without its filters (`acc`'s
/// `morsel_sieved`). For the kernels that build a cell index per row
/// (not the fused ones, which gather for themselves) and plans whose
/// sums do not depend on the rows left out (no Taylor sums, no fold).
pub(crate) struct Sieve<'a> {
    /// The plan without its filters.
    pub(crate) plan: Plan<'a>,
    /// How each filter is evaluated ([`Fused::selection`]).
    pub(crate) kinds: Vec<FilterEval>,
    /// The distinct columns [`Sieve::plan`] reads (those gathered).
    pub(crate) reads: Vec<bool>,
}

impl<'a> Sieve<'a> {
    /// The sieve of `p` over `columns` distinct columns, when it has one.
    pub(crate) fn of(p: &Plan<'a>, columns: usize) -> Option<Sieve<'a>> {
        let index = matches!(
            p.kernel,
            Kernel::Counts
                | Kernel::Moments
                | Kernel::Exact
                | Kernel::ExactMorsel
                | Kernel::ExactFloats
        );
        if !index || p.filters.is_empty() || p.taylor.is_some() || p.fold.is_some() {
            return None;
        }
        let kinds = sieve_kinds(&p.filters)?;
        let plan = p.without_filters();
        let reads = plan.reads(columns);
        Some(Sieve { plan, kinds, reads })
    }
}

/// Most ranges of byte codes a filter's selection compares each row with
/// ([`Fused::selection`]).
pub(crate) const MAX_BYTE_RANGES: usize = 4;

/// The byte codes a filter passes, as ranges `(lo, hi − lo)`.
pub(crate) type ByteRanges = Vec<(u8, u8)>;

/// How a filter is evaluated into a selection byte column (one byte a
/// row, 0: the row passes), [`Fused::selection`] and [`Sieve::kinds`].
#[derive(Clone)]
pub(crate) enum FilterEval {
    /// A byte code column: the codes that pass, as at most
    /// [`MAX_BYTE_RANGES`] ranges `(lo, hi − lo)` compared branch-free.
    Bytes(ByteRanges),
    /// A `u16` code column: the codes that pass, as at most
    /// [`MAX_BYTE_RANGES`] ranges `(lo, hi − lo)` compared branch-free.
    Words(Vec<(u16, u16)>),
    /// A `u16` code column: one bit a code, set for those that pass (8
    /// KiB, which stay in L1, where the mapper's 256 KiB table does not:
    /// PUMA's table was a quarter of a three-filter query's time).
    WordBits(Box<[u64; 1024]>),
    /// Through the filter's mapper.
    Mapper,
}

/// The fused kernels' part of a plan.
#[derive(Clone)]
pub(crate) struct Fused {
    /// The tables of the dimensions, then of the filters
    /// ([`fused_table`](crate::kernels::fused_table)).
    pub(crate) tabs: Vec<FusedTab>,
    /// The filters are evaluated first, per morsel, into a selection byte
    /// column (0: the row passes) that the fused kernels read as one more
    /// code column: two or more filters, or any filter on a column that is
    /// not a byte code (u16 tables, integer ranges). Per filter, how it
    /// is evaluated ([`FilterEval`]).
    pub(crate) selection: Option<Vec<FilterEval>>,
    /// The selection serves only to gather the passing rows when few
    /// pass; otherwise the kernel reads the filter columns as code
    /// columns ([`Form::Columns`]), not the selection column.
    pub(crate) gather_only: bool,
    /// Count and Σw share one word per cell lane (integer weights ≥ 0, a
    /// morsel's Σw < 2^40, a small table).
    pub(crate) pack: bool,
    /// Per [`Form`], whether the kernel takes a morsel of that form: the
    /// kernels are compiled for a few numbers of code columns and weight
    /// types, and the selection column is one column more.
    pub(crate) fits: [bool; 3],
}

impl Fused {
    /// Whether the kernel takes a morsel of form `f`.
    #[inline]
    pub(crate) fn takes(&self, f: Form) -> bool {
        self.fits[f as usize]
    }
}

/// Where each role's column is among the distinct columns the scan reads
/// (a variable used in two roles — a filter on a grouping or analysis
/// variable — is read, checked and unpacked once).
#[derive(Debug, Clone, Default)]
pub(crate) struct Slots {
    /// Grouping variables, outermost first.
    pub(crate) dims: Vec<usize>,
    /// Filters, in the order of [`Plan::filters`].
    pub(crate) filters: Vec<usize>,
    /// The weight.
    pub(crate) weight: Option<usize>,
    /// The analysis variable.
    pub(crate) measure: Option<usize>,
    /// Replicate weights, in the order of [`Plan::replicates`].
    pub(crate) replicates: Vec<usize>,
    /// The Taylor design's strata.
    pub(crate) strata: Option<usize>,
    /// The Taylor design's PSUs.
    pub(crate) cluster: Option<usize>,
    /// The Taylor sums' variable ([`crate::TaylorQuery::times`]).
    pub(crate) times: Option<usize>,
    /// The variables of a fold ([`crate::Query::fold`]).
    pub(crate) values: Vec<usize>,
    /// The variable of the per-cell split.
    pub(crate) split: Option<usize>,
}

impl Slots {
    /// Every slot in use.
    fn all(&self) -> impl Iterator<Item = usize> + '_ {
        self.dims
            .iter()
            .chain(&self.filters)
            .chain(&self.weight)
            .chain(&self.measure)
            .chain(&self.replicates)
            .chain(&self.strata)
            .chain(&self.cluster)
            .chain(&self.times)
            .chain(&self.split)
            .chain(&self.values)
            .copied()
    }
}

/// The distinct columns a scan reads, gathered role by role.
#[derive(Default)]
pub(crate) struct Distinct<'a> {
    /// The columns, in the order their slots were first asked for.
    pub(crate) cols: Vec<&'a Column>,
}

impl<'a> Distinct<'a> {
    /// The slot of `c` (matched by variable name), added when new.
    pub(crate) fn slot(&mut self, c: &'a Column) -> usize {
        match self.cols.iter().position(|d| d.var().name == c.var().name) {
            Some(i) => i,
            None => {
                self.cols.push(c);
                self.cols.len() - 1
            }
        }
    }
}

pub(crate) struct Plan<'a> {
    pub(crate) cells: usize,
    pub(crate) dims: Vec<(&'a Column, Mapper)>,
    pub(crate) filters: Vec<(&'a Column, Mapper)>,
    pub(crate) weight: Option<(&'a Column, Exclusion)>,
    pub(crate) measure: Option<(&'a Column, Exclusion)>,
    /// The kernel counting every morsel.
    pub(crate) kernel: Kernel,
    /// Each role's column among the distinct columns.
    pub(crate) slots: Slots,
    /// Replicate weights, summed per cell after the weight and measure.
    pub(crate) replicates: Vec<&'a Column>,
    /// The replicate sums are exact integers (see [`replicates_exact`]).
    pub(crate) replicates_exact: bool,
    /// Taylor linearization sums.
    pub(crate) taylor: Option<std::sync::Arc<crate::taylor::TaylorPlan<'a>>>,
    /// Distributions of the measure per cell ([`crate::Query::distribution`]).
    pub(crate) distribution: bool,
    /// The split at per-cell thresholds.
    pub(crate) split: Option<std::sync::Arc<crate::quantile::SplitPlan>>,
    /// The caller's fold, its variables (with their missing values and
    /// their scale to displayed units) at [`Slots::values`].
    pub(crate) fold: Option<FoldPlan<'a>>,
}

/// A fold's part of a plan.
#[derive(Clone)]
pub(crate) struct FoldPlan<'a> {
    pub(crate) make: std::sync::Arc<dyn Fn() -> Box<dyn crate::fold::FoldState> + Send + Sync>,
    pub(crate) values: Vec<(&'a Column, Exclusion, f64)>,
    /// Each grouping variable's planned categories.
    pub(crate) categories: std::sync::Arc<Vec<Vec<crate::Category>>>,
}

impl<'a> Plan<'a> {
    /// The same query without its filters: the plan of morsels whose every
    /// row passes them (by the filter columns' zone maps). It counts into
    /// the same accumulators (they depend on the cells, weight and measure
    /// only) and reads none of the columns used only as filters.
    pub(crate) fn without_filters(&self) -> Plan<'a> {
        self.keeping_filters(|_| false)
    }

    /// The same query with only the filters `keep` names (by their index
    /// in [`Plan::filters`]): the plan of morsels whose zone maps settle
    /// the others (every row passes them).
    pub(crate) fn keeping_filters(&self, keep: impl Fn(usize) -> bool) -> Plan<'a> {
        let nd = self.dims.len();
        let kept: Vec<usize> = (0..self.filters.len()).filter(|&i| keep(i)).collect();
        let filters: Vec<(&'a Column, Mapper)> =
            kept.iter().map(|&i| self.filters[i].clone()).collect();
        let unfiltered = |f: &Fused, x: Option<&Column>| {
            let (selection, gather_only) = selection(&filters);
            let mut f = Fused {
                tabs: (f.tabs[..nd].iter())
                    .chain(kept.iter().map(|&i| &f.tabs[nd + i]))
                    .cloned()
                    .collect(),
                selection,
                gather_only,
                pack: f.pack,
                fits: [false; 3],
            };
            f.fits = fused_fits(&f, nd, self.weight.as_ref().map(|(c, _)| *c), x);
            f
        };
        let kernel = match &self.kernel {
            Kernel::Counts => Kernel::Counts,
            Kernel::Fused(f) => Kernel::Fused(unfiltered(f, None)),
            Kernel::Moments => Kernel::Moments,
            Kernel::Exact => Kernel::Exact,
            Kernel::ExactMorsel => Kernel::ExactMorsel,
            Kernel::FusedMeans(f, m) => {
                Kernel::FusedMeans(unfiltered(f, self.measure.as_ref().map(|(c, _)| *c)), *m)
            }
            Kernel::ExactFloats => Kernel::ExactFloats,
        };
        Plan {
            cells: self.cells,
            dims: self.dims.clone(),
            filters,
            weight: self.weight.as_ref().map(|(c, e)| (*c, e.clone())),
            measure: self.measure.as_ref().map(|(c, e)| (*c, e.clone())),
            kernel,
            slots: Slots {
                filters: kept.iter().map(|&i| self.slots.filters[i]).collect(),
                ..self.slots.clone()
            },
            replicates: self.replicates.clone(),
            replicates_exact: self.replicates_exact,
            taylor: self.taylor.clone(),
            distribution: self.distribution,
            split: self.split.clone(),
            fold: self.fold.clone(),
        }
    }

    /// Which of the `n` distinct columns this plan reads.
    pub(crate) fn reads(&self, n: usize) -> Vec<bool> {
        let mut r = vec![false; n];
        for s in self.slots.all() {
            r[s] = true;
        }
        r
    }
}

/// For each [`Form`], whether the fused kernels take it: the code columns
/// of that form (the dimensions; the filters too without a selection; the
/// selection column with one) are byte codes and at most one `u16`, at
/// most four for the counts kernel beside the leading one (two for the
/// means kernel, `x` its analysis variable), and the weight (and `x`) of a
/// type the kernel is compiled for.
pub(crate) fn fused_fits(
    f: &Fused,
    nd: usize,
    weight: Option<&Column>,
    x: Option<&Column>,
) -> [bool; 3] {
    let forms = [Form::Columns, Form::Selection, Form::Gathered];
    forms.map(|form| {
        let n = if form == Form::Columns {
            f.tabs.len()
        } else {
            nd
        };
        let (mut bytes, mut words) = (0usize, 0usize);
        for t in &f.tabs[..n] {
            match t {
                FusedTab::Byte(_) => bytes += 1,
                FusedTab::Word(_) if words == 0 => words += 1,
                _ => return false,
            }
        }
        bytes += (form == Form::Selection) as usize;
        if bytes + words == 0 {
            return false;
        }
        // The leading column is the `u16` one, else the first byte column.
        let cols = if words == 1 { bytes } else { bytes - 1 };
        let ty = |c: &Column| c.var().ty;
        let narrow = |c: &Column| {
            matches!(
                ty(c),
                PhysType::U8 | PhysType::U16 | PhysType::U32 | PhysType::I32
            )
        };
        match x {
            // The means kernel.
            Some(x) => {
                cols <= 2
                    && matches!(
                        ty(x),
                        PhysType::U8
                            | PhysType::I8
                            | PhysType::U16
                            | PhysType::I16
                            | PhysType::U32
                            | PhysType::I32
                    )
                    && weight.is_none_or(narrow)
            }
            // The counts kernel (packed lanes when fewer than three code
            // columns follow the leading one).
            None => {
                cols <= 3
                    && weight.is_none_or(|w| {
                        if (f.pack && cols < 3) || w.var().kind == Kind::Int {
                            narrow(w)
                        } else {
                            matches!(ty(w), PhysType::F32 | PhysType::F64)
                        }
                    })
            }
        }
    })
}
