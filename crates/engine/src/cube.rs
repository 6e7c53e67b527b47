//! The result of a query: a dense cube of counts, weight sums and moments
//! (built from a scan by [`crate::finish`], or from merged partial results).

pub use crate::core::Moments;
pub use crate::layout::Dim;

/// The result of a query: a dense cube, first dimension outermost.
#[derive(Debug, Clone)]
pub struct Cube {
    /// Grouping dimensions.
    pub dims: Vec<Dim>,
    /// Records per cell.
    pub counts: Vec<u64>,
    /// Sum of weights per cell (with `Query::weight`).
    pub weighted: Option<Vec<f64>>,
    /// Moments of the analysis variable per cell (with `Query::measure`).
    pub moments: Option<Vec<Moments>>,
    /// Replicate sums per cell (with `Query::replicates`).
    pub replicates: Option<RepCells>,
    /// Design covariances of the cells' totals (with `Query::taylor`).
    pub taylor: Option<crate::taylor::TaylorCells>,
    /// Each cell's weighted distribution of the analysis variable (with
    /// `Query::distribution`).
    pub distribution: Option<Vec<crate::quantile::Distribution>>,
}

/// The sums of each replicate weight per cell, in displayed units.
#[derive(Debug, Clone, PartialEq)]
pub struct RepCells {
    /// `w[r][cell]`: Σ w_r over the cell's rows.
    pub w: Vec<Vec<f64>>,
    /// `wx[r][cell]`: Σ w_r·x over the cell's rows (with a measure).
    pub wx: Option<Vec<Vec<f64>>>,
}

impl Cube {
    /// Number of categories per dimension.
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().map(|d| d.categories.len()).collect()
    }

    /// The category tuple of cell `c` (the inverse of [`Self::cell`]).
    pub fn index_of(&self, c: usize) -> Vec<usize> {
        let shape: Vec<usize> = self
            .dims
            .iter()
            .map(|d| d.categories.len().max(1))
            .collect();
        crate::layout::unravel(c, &shape)
    }

    /// The categories of cell `c`, outermost first.
    pub fn categories_of(&self, c: usize) -> Vec<&crate::Category> {
        self.index_of(c)
            .iter()
            .zip(&self.dims)
            .map(|(&i, d)| &d.categories[i])
            .collect()
    }

    /// Cell index of a category tuple.
    pub fn cell(&self, idx: &[usize]) -> usize {
        let mut c = 0;
        for (d, &i) in self.dims.iter().zip(idx) {
            c = c * d.categories.len() + i;
        }
        c
    }
}
