//! What the engine's integration tests share: a seeded generator and a
//! dataset imported from CSV text.

use microtab_ingest::{import_csv, CsvOptions};
use microtab_store::Dataset;

/// Marsaglia's xorshift64 from `seed` (not 0): the same records on every
/// run and machine.
pub fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut st = seed;
    move || {
        st ^= st << 13;
        st ^= st >> 7;
        st ^= st << 17;
        st
    }
}

/// `csv` (a header line and records) imported as `NAME.mtab` in a new
/// temporary folder, with `missing` codes per variable.
pub fn import(name: &str, csv: &str, missing: &[(&str, &[&str])]) -> (tempfile::TempDir, Dataset) {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join(format!("{name}.csv"));
    std::fs::write(&src, csv).unwrap();
    let out = dir.path().join(format!("{name}.mtab"));
    let opts = CsvOptions {
        missing: missing
            .iter()
            .map(|(v, codes)| (v.to_string(), codes.iter().map(|c| c.to_string()).collect()))
            .collect(),
        ..CsvOptions::default()
    };
    import_csv(&src, &out, false, &opts).unwrap();
    let ds = Dataset::open(&out).unwrap();
    (dir, ds)
}
