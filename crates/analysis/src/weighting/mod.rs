//! Making weights: post-stratification, raking and calibration of a
//! weight (and of every replicate weight the same way), trimming, and
//! replicate weights built from a design's strata and PSUs. Each writes
//! its new columns in a new generation of the dataset and sets the design
//! that uses them.

// Used by the weighting and replicate steps that land next.
pub mod replicate;
#[allow(dead_code)]
pub(crate) mod write;
