//! A fold's sums over part of the data (a range of records, one of
//! several datasets) as a partial result that merges exactly with the
//! others': groups by their categories' values, strata by (dataset, key)
//! — the same stratum value in two datasets is refused, its PSU count
//! being each dataset's own — and the PSUs a part may share with another
//! (cut by a range's edge, or not contiguous) kept open by key until the
//! parts are merged.

use super::{PsuTotals, State, ALL};
use crate::sums::{Group, Spec, Sums};
use microtab_engine::{Category, PartStratum};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;

/// One group's sums, serializable.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct PartGroup {
    n: u64,
    t: Vec<f64>,
    reps: Vec<f64>,
}

/// One stratum's sums of its closed PSUs' totals.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct PartStrata {
    s1: Vec<f64>,
    s2: Vec<f64>,
    psus: u64,
}

/// What a part's fold summed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SumsPart {
    /// The vector's length, the replicates, the Taylor sums' length
    /// (`None`: none), their cross products, the group of all.
    k: usize,
    reps: usize,
    m: Option<usize>,
    full: bool,
    all: bool,
    /// The grouping variables' names and planned categories.
    names: Vec<String>,
    categories: Vec<Vec<Category>>,
    /// Per planned cell.
    groups: Vec<PartGroup>,
    /// The design's strata (none without a design: one stratum of every
    /// record, its coefficients from `records`).
    strata: Vec<PartStratum>,
    /// Per slot (0: all groups, `g + 1`: group `g`), per stratum.
    sums: Vec<Vec<PartStrata>>,
    /// Open PSUs: (stratum, PSU key) and per group its total.
    open: Vec<((u32, u64), PsuTotals)>,
    unknown: u64,
    /// Without a design: the records with a weight, and those of weight 0.
    records: (u64, u64),
}

fn add(a: &mut Vec<f64>, b: &[f64]) {
    if a.is_empty() {
        a.extend_from_slice(b);
    } else {
        a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
    }
}

/// The union of two parts' categories of one variable, by value (numbers
/// ascending, then text).
pub(crate) fn unite_categories(a: &[Category], b: &[Category]) -> Vec<Category> {
    unite(a, b).0
}

/// The union of two parts' categories of one variable (by value, numbers
/// ascending, then text), and where each part's go in it.
fn unite(a: &[Category], b: &[Category]) -> (Vec<Category>, [Vec<usize>; 2]) {
    let key = |c: &Category| (c.display.clone(), c.missing);
    let mut all: Vec<Category> = a.to_vec();
    for c in b {
        if !all.iter().any(|x| key(x) == key(c)) {
            all.push(c.clone());
        }
    }
    let num = |c: &Category| match &c.value {
        microtab_engine::Value::Int(i) => Some(*i as f64),
        microtab_engine::Value::Num(x) => Some(*x),
        _ => None,
    };
    all.sort_by(|x, y| match (num(x), num(y)) {
        (Some(p), Some(q)) => p.total_cmp(&q).then(x.missing.cmp(&y.missing)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => (&x.display, x.missing).cmp(&(&y.display, y.missing)),
    });
    let at = |list: &[Category]| {
        list.iter()
            .map(|c| all.iter().position(|x| key(x) == key(c)).expect("united"))
            .collect()
    };
    let maps = [at(a), at(b)];
    (all, maps)
}

impl SumsPart {
    /// A part from its fold's merged state (open PSUs left open).
    pub(super) fn of(
        st: State,
        (categories, names): (Vec<Vec<Category>>, Vec<String>),
        strata: Vec<PartStratum>,
        records: (u64, u64),
    ) -> SumsPart {
        let spec = st.spec.clone();
        let reps = if spec.replicates {
            st.at.replicates.len()
        } else {
            0
        };
        let group = |g: &Group| PartGroup {
            n: g.n,
            t: g.t.clone(),
            reps: g.reps.clone(),
        };
        let mut open: Vec<_> = st
            .open
            .into_iter()
            .map(|((h, p), u)| ((h as u32, p), u))
            .collect();
        open.sort_by_key(|e| e.0);
        SumsPart {
            k: spec.k,
            reps,
            m: spec
                .taylor
                .as_ref()
                .map(|h| h.as_ref().map_or(spec.k, |h| h.1)),
            full: spec.full,
            all: spec.all,
            names,
            categories,
            groups: st.groups.iter().map(group).collect(),
            strata,
            sums: (0..st.strata.slots())
                .map(|sl| {
                    st.strata
                        .slot(sl)
                        .map(|s| match s.psus {
                            0 => PartStrata::default(),
                            psus => PartStrata {
                                s1: s.s1.to_vec(),
                                s2: s.s2.to_vec(),
                                psus,
                            },
                        })
                        .collect()
                })
                .collect(),
            open,
            unknown: st.unknown,
            records,
        }
    }

    /// The grouping variables' planned categories, and per planned cell
    /// its records.
    pub(crate) fn cells(&self) -> (Vec<Vec<Category>>, Vec<u64>) {
        let n = self.groups.iter().map(|g| g.n).collect();
        (self.categories.clone(), n)
    }

    /// Without a design, the records of non-zero weight (each its own
    /// PSU: R's `degf` is one fewer).
    pub(crate) fn records(&self) -> u64 {
        self.records.0 - self.records.1
    }

    /// Unites two parts of the same sums (exact but for the order of
    /// floating-point additions).
    pub(crate) fn merge(self, o: SumsPart) -> crate::Result<SumsPart> {
        let err = |m: &str| crate::Error::Design(format!("cannot merge partial sums: {m}"));
        if (self.k, self.reps, self.m, self.full, self.all) != (o.k, o.reps, o.m, o.full, o.all)
            || self.categories.len() != o.categories.len()
        {
            return Err(err("they are of different requests or designs"));
        }
        // Categories by value; each part's cells to the united cells.
        let mut cats = Vec::new();
        let mut maps: [Vec<Vec<usize>>; 2] = [Vec::new(), Vec::new()];
        for (a, b) in self.categories.iter().zip(&o.categories) {
            let (u, [ma, mb]) = unite(a, b);
            cats.push(u);
            maps[0].push(ma);
            maps[1].push(mb);
        }
        let shape: Vec<usize> = cats.iter().map(|c| c.len().max(1)).collect();
        let cell_map = |old: &[Vec<Category>], map: &[Vec<usize>]| -> Vec<usize> {
            let old_shape: Vec<usize> = old.iter().map(|c| c.len().max(1)).collect();
            let n: usize = old_shape.iter().product();
            (0..n)
                .map(|c| {
                    let idx = microtab_engine::unravel(c, &old_shape);
                    idx.iter().enumerate().fold(0, |acc, (d, &i)| {
                        acc * shape[d] + map[d].get(i).copied().unwrap_or(0)
                    })
                })
                .collect()
        };
        let cm = [
            cell_map(&self.categories, &maps[0]),
            cell_map(&o.categories, &maps[1]),
        ];
        // Strata by (dataset, key); a value in two datasets is refused
        // unless its PSUs are not centred (the engine's rule).
        let stratified = self
            .strata
            .iter()
            .chain(&o.strata)
            .any(|s| !s.value.is_empty());
        let (strata, [sa, sb]) =
            microtab_engine::unite_strata(&self.strata, &o.strata, stratified)?;
        // Without a design every part has the one stratum 0.
        let smaps = if strata.is_empty() {
            [vec![0], vec![0]]
        } else {
            [sa, sb]
        };
        let cells: usize = shape.iter().product();
        let mut out = SumsPart {
            categories: cats,
            groups: vec![PartGroup::default(); cells],
            strata,
            sums: Vec::new(),
            open: Vec::new(),
            unknown: self.unknown + o.unknown,
            records: (self.records.0 + o.records.0, self.records.1 + o.records.1),
            names: self.names.clone(),
            ..self.clone()
        };
        let mut open: HashMap<(u32, u64), PsuTotals> = HashMap::new();
        for (i, part) in [self, o].into_iter().enumerate() {
            let (cm, smap) = (&cm[i], &smaps[i]);
            let group = |g: u32| if g == ALL { ALL } else { cm[g as usize] as u32 };
            for (c, g) in part.groups.into_iter().enumerate() {
                let to = &mut out.groups[cm[c]];
                to.n += g.n;
                add(&mut to.t, &g.t);
                add(&mut to.reps, &g.reps);
            }
            for (sl, by) in part.sums.into_iter().enumerate() {
                let to_slot = if sl == 0 { 0 } else { cm[sl - 1] + 1 };
                if out.sums.len() <= to_slot {
                    out.sums.resize(to_slot + 1, Vec::new());
                }
                for (h, s) in by.into_iter().enumerate() {
                    if s.psus == 0 && s.s1.is_empty() {
                        continue;
                    }
                    let th = smap[h];
                    let dst = &mut out.sums[to_slot];
                    if dst.len() <= th {
                        dst.resize(th + 1, PartStrata::default());
                    }
                    let d = &mut dst[th];
                    add(&mut d.s1, &s.s1);
                    add(&mut d.s2, &s.s2);
                    d.psus += s.psus;
                }
            }
            for ((h, p), u) in part.open {
                let e = open.entry((smap[h as usize] as u32, p)).or_default();
                for (g, v) in u {
                    let g = group(g);
                    match e.iter_mut().find(|(x, _)| *x == g) {
                        Some((_, w)) => add(w, &v),
                        None => e.push((g, v)),
                    }
                }
            }
        }
        out.open = open.into_iter().collect();
        out.open.sort_by_key(|e| e.0);
        Ok(out)
    }

    /// The finished sums of the merged parts.
    pub(crate) fn finish(self) -> crate::Result<Sums> {
        // A state of the same shape, to close the open PSUs and finish as
        // over one dataset.
        let spec = Arc::new(Spec {
            k: self.k,
            values: 0,
            record: Arc::new(|_, _| false),
            replicates: self.reps > 0,
            taylor: self.m.map(|m| {
                (m != self.k).then(|| {
                    let f: super::Influence = Arc::new(|_, _, _, _| {});
                    (f, m)
                })
            }),
            full: self.full,
            all: self.all,
            skip_zero: false,
        });
        let at = Arc::new(super::Places {
            weight: None,
            strata: None,
            cluster: None,
            replicates: 0..self.reps,
            keys: None,
        });
        let mut st = State::new(&spec, &at, None);
        st.groups = self
            .groups
            .into_iter()
            .map(|g| Group {
                n: g.n,
                t: g.t,
                reps: g.reps,
            })
            .collect();
        for (sl, by) in self.sums.iter().enumerate() {
            for (h, s) in by.iter().enumerate().filter(|(_, s)| s.psus > 0) {
                st.strata.set(sl, h, (s.psus, &s.s1, &s.s2));
            }
        }
        st.open = self
            .open
            .into_iter()
            .map(|((h, p), u)| ((h as usize, p), u))
            .collect();
        st.unknown = self.unknown;
        let coef = (!self.strata.is_empty()).then(|| {
            (
                self.strata.iter().map(|s| [s.c, s.d]).collect(),
                if self.strata.iter().any(|s| s.lonely) {
                    self.strata.iter().map(|s| s.lonely).collect()
                } else {
                    Vec::new()
                },
            )
        });
        super::finish(st, (self.categories, self.names), &coef, self.records.0)
    }
}
