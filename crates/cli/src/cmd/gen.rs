//! `microtab gen census`: synthetic demo and benchmark data.

use anyhow::{Context, Result};
use microtab_bench::census::{header, write_block, BLOCK};
use microtab_io::{BlockWriter, IoConfig};
use rayon::prelude::*;
use std::path::PathBuf;
use std::time::Instant;

/// What to generate.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Kind {
    /// IPUMS-style person records (YEAR, SERIAL, PERWT, SEX, AGE, EDUC, INCTOT, …).
    Census,
}

/// Arguments of `gen`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Kind of data.
    #[arg(value_enum)]
    kind: Kind,
    /// Number of person records.
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    /// Output CSV file.
    #[arg(long)]
    out: PathBuf,
    /// Random seed (same seed, same file).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Add this many person replicate weights REPWTP1… (household-level
    /// successive-difference factors of PERWT, as the ACS's), for
    /// `microtab design … --type sdr`; the other variables are the same.
    #[arg(long, default_value_t = 0, value_name = "R")]
    repweights: usize,
    /// Add a STRATA variable (state × band of PUMAs, about 2,350 strata)
    /// for a Taylor design: `microtab design … --strata STRATA --cluster
    /// SERIAL`; the other variables are the same.
    #[arg(long)]
    strata: bool,
}

/// Writes the file block by block: blocks are generated in parallel and
/// written in order.
pub fn run(a: Args) -> Result<()> {
    let Kind::Census = a.kind;
    let t = Instant::now();
    let mut w = BlockWriter::create(&a.out, &IoConfig::default())
        .with_context(|| format!("cannot create {}", a.out.display()))?;
    w.write_all(header(a.repweights, a.strata).as_bytes())?;
    let nblocks = a.rows.div_ceil(BLOCK as u64);
    let group = (rayon::current_num_threads() * 2) as u64;
    let bar = crate::progress::bar(
        a.rows,
        &format!("generating {}", a.out.display()),
        "{human_pos}/{human_len} records ({eta})",
    );
    let mut b = 0;
    while b < nblocks {
        let end = (b + group).min(nblocks);
        let bufs: Vec<Vec<u8>> = (b..end)
            .into_par_iter()
            .map(|i| {
                let rows = (a.rows - i * BLOCK as u64).min(BLOCK as u64) as usize;
                let mut out = Vec::with_capacity(rows * (90 + 8 * a.repweights));
                write_block(a.seed, i, rows, (a.repweights, a.strata), &mut out);
                out
            })
            .collect();
        for buf in bufs {
            w.write_all(&buf)?;
        }
        b = end;
        if let Some(pb) = &bar {
            pb.set_position((end * BLOCK as u64).min(a.rows));
        }
    }
    let stats = w.finish()?;
    if let Some(pb) = bar {
        pb.finish_and_clear();
    }
    eprintln!(
        "wrote {} records ({:.1} MB) to {} in {:.2} s",
        a.rows,
        stats.bytes as f64 / 1e6,
        a.out.display(),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}
