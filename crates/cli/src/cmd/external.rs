//! Subcommands served by sibling executables (as git runs its external
//! commands): `export` and Parquet `import` by `microtab-arrow`, whose
//! Arrow and Parquet libraries would otherwise triple this executable and
//! slow every command's start, and `serve` by `microtab-serve` (tokio,
//! hyper).

use anyhow::{bail, Result};
use std::ffi::OsString;
use std::path::PathBuf;

/// Arguments of `export`, passed on unparsed (`microtab export --help`
/// shows the sibling's help).
#[derive(clap::Args, Debug)]
#[command(disable_help_flag = true)]
pub struct ExportArgs {
    /// DATASET OUT.parquet [--vars A,B] [--filter F] [--labels]
    /// [--keep-missing-codes] [--exact-decimals] [--compression C] [--force];
    /// DATASET OUT.dta|OUT.sav [--vars A,B] [--filter F] [--labels|--no-labels]
    /// [--force]. `--labels` differs: Parquet writes codes (labels in its
    /// metadata) unless --labels writes the labels' text in their place;
    /// Stata and SPSS files always hold the codes and write the value
    /// labels as label sets (--labels, the default) unless --no-labels
    /// (`microtab export DS OUT.dta --help` for the rest)
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    args: Vec<OsString>,
}

/// Arguments of `serve`, passed on unparsed to `microtab-serve`.
#[derive(clap::Args, Debug)]
#[command(disable_help_flag = true)]
pub struct ServeArgs {
    /// DIR [--bind 127.0.0.1] [--port 8080] [--max-scans N] [--timeout S]
    /// [--max-cells N]
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    args: Vec<OsString>,
}

/// `microtab serve …`.
pub fn serve(a: ServeArgs) -> Result<()> {
    exec("microtab-serve", "", a.args)
}

/// The sibling executable `name`: beside this one, else on the PATH.
fn sibling(name: &str) -> Result<PathBuf> {
    let name = &format!("{name}{}", std::env::consts::EXE_SUFFIX);
    if let Some(p) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join(name)))
        .filter(|p| p.is_file())
    {
        return Ok(p);
    }
    if let Some(p) = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    }) {
        return Ok(p);
    }
    bail!("{name} is not installed beside microtab or on the PATH; it comes with microtab: `pip install microtab` puts the three executables in one bin/ (run that bin/'s microtab, or link to it rather than copy it), and `cargo build --release` builds them in target/release")
}

/// Replaces this process with `name sub args…` (on Windows, which cannot
/// replace a process: runs it and exits with its status).
pub fn exec(name: &str, sub: &str, args: Vec<OsString>) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let p = sibling(name)?;
        let mut c = std::process::Command::new(&p);
        if !sub.is_empty() {
            c.arg(sub);
        }
        let e = c.args(args).exec();
        bail!("could not run {}: {e}", p.display())
    }
    #[cfg(not(unix))]
    {
        run(name, sub, args)?;
        std::process::exit(0)
    }
}

/// Runs `name sub args…` and waits for it (when work follows it).
pub fn run(name: &str, sub: &str, args: Vec<OsString>) -> Result<()> {
    let p = sibling(name)?;
    let mut c = std::process::Command::new(&p);
    if !sub.is_empty() {
        c.arg(sub);
    }
    let status = c
        .args(args)
        .status()
        .map_err(|e| anyhow::anyhow!("could not run {}: {e}", p.display()))?;
    if !status.success() {
        // It said why on stderr.
        std::process::exit(status.code().unwrap_or(1));
    }
    Ok(())
}

/// `microtab export DS OUT.dta|OUT.sav`: a Stata or SPSS file, written
/// here.
#[derive(clap::Parser, Debug)]
#[command(
    name = "microtab export",
    about = "Write a dataset (some variables and records) as a Stata file (release 118, OUT.dta) or an SPSS system file (OUT.sav) with its labels and missing values"
)]
struct DtaArgs {
    /// Dataset directory.
    dataset: PathBuf,
    /// Output file (`.dta`).
    out: PathBuf,
    /// Variables to write (default: all), separated by commas or spaces.
    #[arg(long = "vars", num_args = 1..)]
    vars: Vec<String>,
    /// SDA-style filter: only the records that pass it.
    #[arg(long)]
    filter: Option<String>,
    /// Write the value labels as the file's label sets, beside the codes
    /// (the default; unlike Parquet's --labels, the values stay codes).
    #[arg(long, overrides_with = "no_labels")]
    labels: bool,
    /// Write the codes without value-label sets; variable labels are still
    /// written and missing values still declared.
    #[arg(long, overrides_with = "labels")]
    no_labels: bool,
    /// Replace an existing file.
    #[arg(long)]
    force: bool,
}

/// `microtab export …`: a Stata file here, anything else by
/// `microtab-arrow`.
pub fn export(a: ExportArgs) -> Result<()> {
    let ours = a.args.iter().any(|x| {
        let s = x.to_string_lossy().to_ascii_lowercase();
        !s.starts_with('-') && (s.ends_with(".dta") || s.ends_with(".sav"))
    });
    if !ours {
        return exec("microtab-arrow", "export", a.args);
    }
    let args = <DtaArgs as clap::Parser>::try_parse_from(
        std::iter::once(OsString::from("microtab export")).chain(a.args),
    )
    .unwrap_or_else(|e| e.exit());
    export_dta(args)
}

fn export_dta(a: DtaArgs) -> Result<()> {
    let t = std::time::Instant::now();
    let ds = crate::common::open(&a.dataset)?;
    let names = crate::common::var_names(&ds, &a.vars);
    let vars: Vec<microtab_store::Variable> = if names.is_empty() {
        ds.manifest().variables.clone()
    } else {
        names
            .iter()
            .map(|n| Ok(ds.variable(n)?.clone()))
            .collect::<Result<_>>()?
    };
    let sel = match a.filter.as_deref().filter(|f| !f.trim().is_empty()) {
        Some(f) => {
            let terms = microtab_engine::parse_filter(f)?;
            Some(microtab_engine::subset::selection(&ds, &terms)?)
        }
        None => None,
    };
    if a.out.exists() && !a.force {
        bail!("{} exists (give --force to replace it)", a.out.display());
    }
    let sav = a
        .out
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("sav"));
    let sel = sel.as_ref().map(|(b, n)| (b.as_slice(), *n));
    let opts = microtab_ingest::WriteOptions {
        force: a.force,
        value_labels: !a.no_labels,
    };
    let busy = crate::progress::busy(format!("writing {}", a.out.display()));
    let w = if sav {
        microtab_ingest::write_sav(&ds, &vars, sel, &a.out, opts)?
    } else {
        microtab_ingest::write_dta(&ds, &vars, sel, &a.out, opts)?
    };
    drop(busy);
    for n in &w.notes {
        eprintln!("note: {n}");
    }
    eprintln!(
        "wrote {} records × {} variables to {} ({}) in {:.2} s",
        w.rows,
        w.vars,
        a.out.display(),
        if sav {
            "SPSS system file, bytecode-compressed"
        } else {
            "Stata release 118"
        },
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Whether `path` is a Parquet file (by its magic bytes, else its name).
pub fn is_parquet(path: &std::path::Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    match std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic)) {
        Ok(()) => &magic == b"PAR1",
        Err(_) => path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("parquet")),
    }
}
