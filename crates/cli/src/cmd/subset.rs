//! `microtab subset`: the records that pass a filter and chosen variables,
//! as a new dataset (same labels, missing codes and decimals) or, for an
//! output ending in `.csv`, a CSV file with a codebook and setup files that
//! read it into Stata (`.do`), SPSS/PSPP (`.sps`), SAS (`.sas`) and R
//! (`.R`) with its labels and missing codes, as SDA's SUBSET writes them.

use crate::common::{open, var_names};
use crate::render::{csv_line, exact_value};
use anyhow::{bail, Context, Result};
use microtab_engine::{list_cases, parse_filter, ListQuery};
use microtab_store::{codec, Dataset, Kind, Variable};
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Arguments of `subset`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Dataset directory.
    dataset: PathBuf,
    /// Output: a new dataset directory, or a file ending in `.csv` (with
    /// `.do`, `.sps`, `.sas`, `.R` and `.codebook.txt` beside it).
    out: PathBuf,
    /// Variables to keep (default: all), separated by commas or spaces.
    #[arg(long, num_args = 1.., value_name = "VAR")]
    vars: Vec<String>,
    /// SDA-style filter: only the records that pass it.
    #[arg(long)]
    filter: Option<String>,
    /// Replace an existing output.
    #[arg(long)]
    force: bool,
}

/// Writes the subset.
pub fn run(a: Args) -> Result<()> {
    let t = std::time::Instant::now();
    let ds = open(&a.dataset)?;
    let vars = var_names(&ds, &a.vars);
    let filter = match &a.filter {
        Some(f) => parse_filter(f)?,
        None => Vec::new(),
    };
    let is_csv = a
        .out
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"));
    if !is_csv {
        let busy = crate::progress::busy(format!("writing {}", a.out.display()));
        let r = microtab_engine::subset::subset(&ds, &a.out, &vars, &filter, a.force)?;
        drop(busy);
        eprintln!(
            "wrote {} records × {} variables to {} in {:.2} s{}",
            r.rows,
            r.vars.len(),
            a.out.display(),
            t.elapsed().as_secs_f64(),
            match (&r.design, &r.design_note) {
                (Some(_), _) => "; the survey design is carried over".to_string(),
                (None, Some(n)) => format!("; {n}"),
                _ => String::new(),
            }
        );
        return Ok(());
    }
    let chosen: Vec<Variable> = if vars.is_empty() {
        ds.manifest().variables.clone()
    } else {
        vars.iter()
            .map(|n| Ok(ds.variable(n)?.clone()))
            .collect::<Result<_>>()?
    };
    let setups = setup_paths(&a.out);
    if !a.force {
        for p in std::iter::once(&a.out).chain(setups.iter().map(|(_, p)| p)) {
            if p.exists() {
                bail!("{} exists (give --force to replace it)", p.display());
            }
        }
    }
    // Written beside the targets, renamed into place when complete.
    let tmp = |p: &Path| -> PathBuf {
        let mut s = p.as_os_str().to_owned();
        s.push(format!(".tmp-{}", std::process::id()));
        PathBuf::from(s)
    };
    let csv_tmp = tmp(&a.out);
    let q = ListQuery {
        vars: chosen.iter().map(|v| v.name.clone()).collect(),
        filter,
        rows: None,
    };
    let busy = crate::progress::busy(format!("writing {}", a.out.display()));
    let result = (|| -> Result<u64> {
        let f = std::fs::File::create(&csv_tmp)
            .with_context(|| format!("cannot create {}", csv_tmp.display()))?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, f);
        out.write_all(csv_line(&q.vars).as_bytes())?;
        let mut err = None;
        let n = list_cases(&ds, &q, |_, cells| {
            let line: Vec<String> = cells.iter().map(exact_value).collect();
            match out.write_all(csv_line(&line).as_bytes()) {
                Ok(()) => true,
                Err(e) => {
                    err = Some(e);
                    false
                }
            }
        })?;
        if let Some(e) = err {
            return Err(e.into());
        }
        out.into_inner()?.sync_all()?;
        Ok(n)
    })();
    drop(busy);
    let rows = match result {
        Ok(n) => n,
        Err(e) => {
            let _ = std::fs::remove_file(&csv_tmp);
            return Err(e);
        }
    };
    let csv_name = a
        .out
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let info = Setup::new(&ds, &chosen, &csv_name)?;
    let texts = [
        ("do", info.stata()),
        ("sps", info.spss()),
        ("sas", info.sas()),
        ("R", info.r()),
        (
            "codebook.txt",
            info.codebook(&ds, rows, a.filter.as_deref()),
        ),
    ];
    for ((_, path), (_, text)) in setups.iter().zip(texts.iter()) {
        std::fs::write(tmp(path), text)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    for (_, path) in &setups {
        std::fs::rename(tmp(path), path)?;
    }
    std::fs::rename(&csv_tmp, &a.out)?;
    eprintln!(
        "wrote {rows} records × {} variables to {} in {:.2} s, with {}",
        chosen.len(),
        a.out.display(),
        t.elapsed().as_secs_f64(),
        setups
            .iter()
            .map(|(_, p)| p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

/// The setup files' paths: `OUT.do`, `.sps`, `.sas`, `.R`, `.codebook.txt`.
fn setup_paths(out: &Path) -> Vec<(&'static str, PathBuf)> {
    ["do", "sps", "sas", "R", "codebook.txt"]
        .into_iter()
        .map(|e| (e, out.with_extension(e)))
        .collect()
}

/// What the setup files need of each variable.
struct Var {
    name: String,
    label: Option<String>,
    text: bool,
    float: bool,
    decimals: u32,
    /// Widest value, in bytes (text variables).
    width: usize,
    /// Value labels: (value as written in the CSV, label).
    labels: Vec<(String, String)>,
    /// Missing codes as written in the CSV.
    missing: Vec<String>,
}

struct Setup {
    csv: String,
    vars: Vec<Var>,
}

/// `s` in double quotes, inner quotes doubled (SPSS, SAS).
fn dq(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// `s` as an R string literal.
fn rq(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A label on one line (setup languages have no multi-line strings).
fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

fn is_int_text(s: &str) -> bool {
    let b = s.strip_prefix('-').unwrap_or(s);
    !b.is_empty() && b.bytes().all(|c| c.is_ascii_digit())
}

impl Setup {
    fn new(ds: &Dataset, vars: &[Variable], csv: &str) -> Result<Setup> {
        let mut out = Vec::new();
        for v in vars {
            let text = v.kind == Kind::String;
            let width = if text {
                ds.dictionary(v)?
                    .iter()
                    .map(|e| e.len())
                    .max()
                    .unwrap_or(1)
                    .max(1)
            } else {
                0
            };
            let mut labels: Vec<(String, String)> = v
                .value_labels
                .iter()
                .map(|(k, l)| (k.clone(), one_line(l)))
                .collect();
            if !text {
                labels.sort_by(|a, b| {
                    let f = |s: &str| s.parse::<f64>().unwrap_or(f64::NAN);
                    f(&a.0).total_cmp(&f(&b.0))
                });
            }
            out.push(Var {
                name: v.name.clone(),
                label: v.label.as_deref().map(one_line),
                text,
                float: v.kind == Kind::Float,
                decimals: v.decimals,
                width,
                labels,
                missing: v
                    .missing_codes
                    .iter()
                    .map(|&c| {
                        if text {
                            // A text variable's missing codes are dictionary positions.
                            ds.dictionary(v)
                                .ok()
                                .and_then(|d| d.get(c as usize).cloned())
                                .unwrap_or_default()
                        } else {
                            codec::display_code(v, c)
                        }
                    })
                    .collect(),
            });
        }
        Ok(Setup {
            csv: csv.to_string(),
            vars: out,
        })
    }

    fn stata(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "* Stata setup for {}, written by microtab subset.",
            self.csv
        );
        let _ = writeln!(s, "* Run it from the directory that holds the CSV file.");
        let strings: Vec<String> = self
            .vars
            .iter()
            .enumerate()
            .filter(|(_, v)| v.text)
            .map(|(i, _)| (i + 1).to_string())
            .collect();
        let _ = writeln!(
            s,
            "import delimited using \"{}\", varnames(1) case(preserve) encoding(\"utf-8\") delimiters(\",\") bindquote(strict){} clear",
            self.csv,
            if strings.is_empty() {
                String::new()
            } else {
                format!(" stringcols({})", strings.join(" "))
            }
        );
        for v in &self.vars {
            if let Some(l) = &v.label {
                let _ = writeln!(s, "label variable {} `\"{}\"'", v.name, l);
            }
            // Stata labels integer values only.
            let ints: Vec<&(String, String)> = v
                .labels
                .iter()
                .filter(|(k, _)| !v.text && is_int_text(k))
                .collect();
            if !ints.is_empty() {
                let _ = write!(s, "label define {}_lbl", v.name);
                for (k, l) in ints {
                    let _ = write!(s, " {k} `\"{l}\"'");
                }
                let _ = writeln!(s, ", replace");
                let _ = writeln!(s, "label values {} {}_lbl", v.name, v.name);
            }
            for (i, m) in v.missing.iter().enumerate() {
                let ext = (b'a' + (i as u8).min(25)) as char;
                if v.text {
                    let _ = writeln!(s, "replace {} = \"\" if {} == `\"{m}\"'", v.name, v.name);
                } else {
                    let _ = writeln!(s, "replace {} = .{ext} if {} == {m}", v.name, v.name);
                }
            }
        }
        s
    }

    fn spss(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "* SPSS / PSPP setup for {}, written by microtab subset.",
            self.csv
        );
        let _ = writeln!(
            s,
            "GET DATA\n  /TYPE=TXT\n  /FILE={}\n  /ENCODING='UTF8'\n  /ARRANGEMENT=DELIMITED\n  /DELCASE=LINE\n  /FIRSTCASE=2\n  /DELIMITERS=\",\"\n  /QUALIFIER='\"'\n  /VARIABLES=",
            dq(&self.csv)
        );
        for v in &self.vars {
            let fmt = if v.text {
                format!("A{}", v.width)
            } else if v.float {
                "F40.16".to_string()
            } else {
                format!("F20.{}", v.decimals.min(16))
            };
            let _ = writeln!(s, "    {} {fmt}", v.name);
        }
        let _ = writeln!(s, ".");
        let labeled: Vec<&Var> = self.vars.iter().filter(|v| v.label.is_some()).collect();
        if !labeled.is_empty() {
            let _ = writeln!(s, "VARIABLE LABELS");
            for (i, v) in labeled.iter().enumerate() {
                let _ = writeln!(
                    s,
                    "  {}{} {}",
                    if i > 0 { "/" } else { "" },
                    v.name,
                    dq(v.label.as_deref().unwrap_or_default())
                );
            }
            let _ = writeln!(s, ".");
        }
        let with: Vec<&Var> = self.vars.iter().filter(|v| !v.labels.is_empty()).collect();
        if !with.is_empty() {
            let _ = writeln!(s, "VALUE LABELS");
            for (i, v) in with.iter().enumerate() {
                let _ = write!(s, "  {}{}", if i > 0 { "/" } else { "" }, v.name);
                for (k, l) in &v.labels {
                    let key = if v.text { dq(k) } else { k.clone() };
                    let _ = write!(s, " {key} {}", dq(l));
                }
                let _ = writeln!(s);
            }
            let _ = writeln!(s, ".");
        }
        for v in self.vars.iter().filter(|v| !v.missing.is_empty()) {
            // SPSS takes up to three discrete missing values.
            let vals: Vec<String> = v
                .missing
                .iter()
                .take(3)
                .map(|m| if v.text { dq(m) } else { m.clone() })
                .collect();
            let _ = writeln!(s, "MISSING VALUES {} ({}).", v.name, vals.join(", "));
            if v.missing.len() > 3 {
                let _ = writeln!(
                    s,
                    "* {} has {} missing codes; SPSS holds three: also {}.",
                    v.name,
                    v.missing.len(),
                    v.missing[3..].join(", ")
                );
            }
        }
        let _ = writeln!(s, "EXECUTE.");
        s
    }

    fn sas(&self) -> String {
        let mut s = String::new();
        let member: String = Path::new(&self.csv)
            .file_stem()
            .map(|x| x.to_string_lossy().into_owned())
            .unwrap_or_else(|| "subset".into())
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .take(32)
            .collect();
        let member = if member.starts_with(|c: char| c.is_ascii_digit()) {
            format!("_{member}")
        } else {
            member
        };
        let _ = writeln!(
            s,
            "/* SAS setup for {}, written by microtab subset. */",
            self.csv
        );
        let with: Vec<&Var> = self.vars.iter().filter(|v| !v.labels.is_empty()).collect();
        let fname = |v: &Var| {
            let base: String = v.name.chars().take(26).collect();
            format!("{}{base}_f", if v.text { "$" } else { "" })
        };
        if !with.is_empty() {
            let _ = writeln!(s, "PROC FORMAT;");
            for v in &with {
                let _ = write!(s, "  VALUE {}", fname(v));
                for (k, l) in &v.labels {
                    let key = if v.text { dq(k) } else { k.clone() };
                    let _ = write!(s, " {key} = {}", dq(l));
                }
                let _ = writeln!(s, ";");
            }
            let _ = writeln!(s, "RUN;");
        }
        let _ = writeln!(s, "DATA {member};");
        let _ = writeln!(
            s,
            "  INFILE {} DSD DLM=',' FIRSTOBS=2 LRECL=1048576 TRUNCOVER ENCODING='utf-8';",
            dq(&self.csv)
        );
        let _ = write!(s, "  INPUT");
        for v in &self.vars {
            if v.text {
                let _ = write!(s, " {} :${}.", v.name, v.width);
            } else {
                let _ = write!(s, " {}", v.name);
            }
        }
        let _ = writeln!(s, ";");
        for v in self.vars.iter().filter(|v| v.label.is_some()) {
            let _ = writeln!(
                s,
                "  LABEL {} = {};",
                v.name,
                dq(v.label.as_deref().unwrap_or_default())
            );
        }
        for v in &with {
            let _ = writeln!(s, "  FORMAT {} {}.;", v.name, fname(v));
        }
        for v in &self.vars {
            for (i, m) in v.missing.iter().enumerate() {
                if v.text {
                    let _ = writeln!(s, "  IF {} = {} THEN {} = '';", v.name, dq(m), v.name);
                } else {
                    let ext = (b'A' + (i as u8).min(25)) as char;
                    let _ = writeln!(s, "  IF {} = {m} THEN {} = .{ext};", v.name, v.name);
                }
            }
        }
        let _ = writeln!(s, "RUN;");
        s
    }

    fn r(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# R setup for {}, written by microtab subset.", self.csv);
        let _ = writeln!(
            s,
            "# Labels are attributes: \"label\" (the variable's) and \"labels\" (named values),\n# as haven::labelled() uses them; missing codes are set to NA."
        );
        let classes: Vec<String> = self
            .vars
            .iter()
            .map(|v| {
                format!(
                    "{} = {}",
                    rq(&v.name),
                    rq(if v.text { "character" } else { "numeric" })
                )
            })
            .collect();
        let _ = writeln!(
            s,
            "d <- read.csv({}, na.strings = \"\", stringsAsFactors = FALSE, check.names = FALSE,\n              encoding = \"UTF-8\", colClasses = c({}))",
            rq(&self.csv),
            classes.join(", ")
        );
        for v in &self.vars {
            let col = format!("d[[{}]]", rq(&v.name));
            if !v.missing.is_empty() {
                let vals: Vec<String> = v
                    .missing
                    .iter()
                    .map(|m| if v.text { rq(m) } else { m.clone() })
                    .collect();
                let _ = writeln!(s, "{col}[{col} %in% c({})] <- NA", vals.join(", "));
            }
            if let Some(l) = &v.label {
                let _ = writeln!(s, "attr({col}, \"label\") <- {}", rq(l));
            }
            if !v.labels.is_empty() {
                let pairs: Vec<String> = v
                    .labels
                    .iter()
                    .map(|(k, l)| format!("{} = {}", rq(l), if v.text { rq(k) } else { k.clone() }))
                    .collect();
                let _ = writeln!(s, "attr({col}, \"labels\") <- c({})", pairs.join(", "));
            }
        }
        s
    }

    fn codebook(&self, ds: &Dataset, rows: u64, filter: Option<&str>) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "Codebook of {} (written by microtab subset)", self.csv);
        let _ = writeln!(s, "Source: {}", ds.dir().display());
        let _ = writeln!(s, "Filter: {}", filter.unwrap_or("(none: every record)"));
        let _ = writeln!(s, "Records: {rows}");
        let _ = writeln!(s, "Variables: {}\n", self.vars.len());
        for v in &self.vars {
            let kind = if v.text {
                "text".to_string()
            } else if v.float {
                "floating point".to_string()
            } else if v.decimals > 0 {
                format!("number with {} decimals", v.decimals)
            } else {
                "integer".to_string()
            };
            let _ = writeln!(s, "{}  ({kind})", v.name);
            if let Some(l) = &v.label {
                let _ = writeln!(s, "    label: {l}");
            }
            if !v.missing.is_empty() {
                let _ = writeln!(s, "    missing codes: {}", v.missing.join(", "));
            }
            for (k, l) in &v.labels {
                let _ = writeln!(s, "    {k:>10}  {l}");
            }
            let _ = writeln!(s);
        }
        let _ = writeln!(
            s,
            "Empty fields are system-missing. Setup files beside this one read the CSV into Stata (.do), SPSS/PSPP (.sps), SAS (.sas) and R (.R)."
        );
        s
    }
}
