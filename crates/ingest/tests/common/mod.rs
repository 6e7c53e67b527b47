//! Helpers shared by the import tests.

use microtab_store::Dataset;

/// The values of variable `name` as `f64`, after checking the column file.
pub fn values(ds: &Dataset, name: &str) -> Vec<f64> {
    let c = ds.column(name).unwrap();
    c.verify().unwrap();
    let d = c.data().unwrap();
    (0..d.len()).map(|i| d.get_f64(i)).collect()
}
