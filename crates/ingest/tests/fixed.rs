//! Fixed-width imports of generated files, with chunks small enough that
//! every chunk boundary (and, for hierarchical files, the cut before a
//! household record) is exercised many times. Expected values come from the
//! generator, not from the parser.

mod common;

use common::values;
use microtab_ingest::{import_fixed, Codebook, Error, FixedOptions};
use microtab_store::{Dataset, Kind};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

/// The codebook `xml`, written to a file in `dir` and read back.
fn codebook(dir: &Path, xml: &str) -> Codebook {
    let path = dir.join("codebook.xml");
    std::fs::write(&path, xml).unwrap();
    Codebook::read(&path).unwrap()
}

fn small_chunks() -> FixedOptions {
    FixedOptions {
        chunk_size: 4096,
        threads: 3,
        ..FixedOptions::default()
    }
}

fn strings(ds: &Dataset, name: &str) -> Vec<Option<String>> {
    let v = ds.variable(name).unwrap().clone();
    let dict = ds.dictionary(&v).unwrap();
    values(ds, name)
        .into_iter()
        .map(|c| {
            if Some(c as i64) == v.null_code {
                None
            } else {
                Some(dict[c as usize].clone())
            }
        })
        .collect()
}

const RECT: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<codeBook xmlns="ddi:codebook:2_5"><fileDscr><fileTxt><fileName>r.dat</fileName>
<fileStrc type="rectangular"/><fileType charset="ISO-8859-1"/></fileTxt></fileDscr><dataDscr>
<var name="ID" dcml="0"><location StartPos="1" EndPos="6" width="6"/><labl>Id</labl></var>
<var name="WT" dcml="4"><location StartPos="7" EndPos="16" width="10"/><labl>Weight</labl></var>
<var name="INC" dcml="0"><location StartPos="17" EndPos="24" width="8"/><labl>Income</labl>
  <txt>Income in dollars.

Second paragraph.</txt>
  <catgry missing="Y"><catValu>99999998</catValu><labl>Missing</labl></catgry></var>
<var name="SEX" dcml="0"><location StartPos="25" EndPos="25" width="1"/>
  <catgry><catValu>1</catValu><labl>Male</labl></catgry>
  <catgry><catValu>2</catValu><labl>Female</labl></catgry>
  <invalrng><item VALUE="9"/></invalrng></var>
<var name="CITY"><location StartPos="26" EndPos="29" width="4"/><varFormat type="character"/>
  <catgry><catValu>Lyon</catValu><labl>Lyon, France</labl></catgry></var>
</dataDscr></codeBook>"#;

/// Record `i` of the rectangular file and its expected values.
fn rect_record(i: usize) -> (String, [Option<f64>; 4], Option<&'static str>) {
    let wt = (i * 7919 % 1_000_000) as f64 + 0.25 * (i % 4) as f64;
    let inc: i64 = match i % 50 {
        0 => 99_999_998,
        1 => -((i % 9000) as i64),
        _ => (i * 31 % 250_000) as i64,
    };
    let sex = if i.is_multiple_of(97) { 9 } else { 1 + i % 2 };
    let city = ["Lyon", "Oslo", " Rio", "    "][i % 4];
    // WT: 10 digits, 4 implied decimals; some blank (system-missing).
    let wt_field = if i % 333 == 5 {
        " ".repeat(10)
    } else {
        format!("{:010}", (wt * 10_000.0).round() as i64)
    };
    let inc_field = if inc < 0 {
        format!("-{:07}", -inc)
    } else {
        format!("{inc:08}")
    };
    let line = format!("{i:06}{wt_field}{inc_field}{sex}{city}");
    let wt_val = (i % 333 != 5).then_some(wt);
    (
        line,
        [Some(i as f64), wt_val, Some(inc as f64), Some(sex as f64)],
        match city.trim() {
            "" => None,
            "Lyon" => Some("Lyon"),
            "Oslo" => Some("Oslo"),
            _ => Some("Rio"),
        },
    )
}

fn write_gz(path: &Path, text: &[u8]) {
    let f = std::fs::File::create(path).unwrap();
    let mut e = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    e.write_all(text).unwrap();
    e.finish().unwrap();
}

#[test]
fn rectangular_file_plain_and_gzip() {
    let dir = tempfile::tempdir().unwrap();
    let cb = codebook(dir.path(), RECT);
    let n = 20_000;
    let mut text = String::new();
    let mut exp = Vec::new();
    for i in 0..n {
        let (line, vals, city) = rect_record(i);
        // CRLF on some lines, as files moved through Windows have.
        text.push_str(&line);
        text.push_str(if i % 3 == 0 { "\r\n" } else { "\n" });
        exp.push((vals, city));
    }
    let plain = dir.path().join("r.dat");
    std::fs::write(&plain, &text).unwrap();
    let gz = dir.path().join("r.dat.gz");
    write_gz(&gz, text.as_bytes());
    for (input, target) in [(&plain, "p.mtab"), (&gz, "g.mtab")] {
        let target = dir.path().join(target);
        let s = import_fixed(input, &cb, &target, false, &small_chunks()).unwrap();
        assert_eq!(s.rows, n as u64);
        assert_eq!(s.bytes_text, text.len() as u64);
        let ds = Dataset::open(&target).unwrap();
        for (k, name) in ["ID", "WT", "INC", "SEX"].iter().enumerate() {
            let v = ds.variable(name).unwrap();
            let scale = v.scale();
            let nc = v.null_code;
            let got = values(&ds, name);
            for (i, (vals, _)) in exp.iter().enumerate() {
                let g = (Some(got[i] as i64) != nc).then(|| got[i] / scale);
                assert_eq!(g, vals[k], "{name} record {}", i + 1);
            }
        }
        let wt = ds.variable("WT").unwrap();
        assert_eq!((wt.kind, wt.decimals, wt.nulls), (Kind::Int, 4, 61));
        let city = strings(&ds, "CITY");
        assert!(city.iter().zip(&exp).all(|(g, (_, e))| g.as_deref() == *e));
        let inc = ds.variable("INC").unwrap();
        assert_eq!(inc.label.as_deref(), Some("Income"));
        assert_eq!(
            inc.description.as_deref(),
            Some("Income in dollars.\n\nSecond paragraph.")
        );
        assert_eq!(inc.missing_codes, vec![99_999_998.0]);
        assert_eq!(inc.value_labels["99999998"], "Missing");
        let sex = ds.variable("SEX").unwrap();
        assert_eq!(sex.value_labels["2"], "Female");
        assert_eq!(sex.missing_codes, vec![9.0]);
        assert_eq!(
            ds.variable("CITY").unwrap().value_labels["Lyon"],
            "Lyon, France"
        );
    }
}

#[test]
fn bad_field_deep_in_a_gzip_file_names_record_and_variable() {
    let dir = tempfile::tempdir().unwrap();
    let cb = codebook(dir.path(), RECT);
    let mut text = String::new();
    for i in 0..9000 {
        let (mut line, _, _) = rect_record(i);
        if i == 7321 {
            line.replace_range(19..20, "?");
        }
        writeln!(text, "{line}").unwrap();
    }
    let gz = dir.path().join("bad.dat.gz");
    write_gz(&gz, text.as_bytes());
    let target = dir.path().join("bad.mtab");
    let e = import_fixed(&gz, &cb, &target, false, &small_chunks()).unwrap_err();
    assert!(
        matches!(&e, Error::Field { record: 7322, name, start: 17, end: 24, .. } if name == "INC"),
        "{e}"
    );
    assert!(!target.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

const HIER: &str = r#"<codeBook><fileDscr><fileTxt><fileStrc type="hierarchical">
  <recGrp rectype="H" recidvar="RECTYPE"><labl>Household</labl></recGrp>
  <recGrp rectype="P" recidvar="RECTYPE" keyvar="SERIAL"><labl>Person</labl></recGrp>
</fileStrc></fileTxt></fileDscr><dataDscr>
<var name="RECTYPE" rectype="H P"><location StartPos="1" EndPos="1"/><varFormat type="character"/></var>
<var name="SERIAL" rectype="H P"><location StartPos="2" EndPos="7"/></var>
<var name="STATE" rectype="H"><location StartPos="8" EndPos="9"/></var>
<var name="HHWT" rectype="H" dcml="2"><location StartPos="10" EndPos="16"/></var>
<var name="PERNUM" rectype="P"><location StartPos="8" EndPos="9"/></var>
<var name="AGE" rectype="P"><location StartPos="10" EndPos="12"/></var>
</dataDscr></codeBook>"#;

#[test]
fn hierarchical_households_stay_whole_across_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let cb = codebook(dir.path(), HIER);
    let mut text = String::new();
    // (serial, state, hhwt, pernum, age) per person; households per H.
    let mut persons = Vec::new();
    let mut households = Vec::new();
    for h in 0..6000usize {
        let state = 1 + h % 56;
        let hhwt = (h * 37 % 99_999) as f64 + 0.5;
        writeln!(text, "H{h:06}{state:02}{:07}", (hhwt * 100.0) as i64).unwrap();
        households.push((h, state, hhwt));
        // 0..=4 persons: some households are vacant.
        for p in 1..=(h % 5) {
            let age = (h + 7 * p) % 100;
            writeln!(text, "P{h:06}{p:02}{age:03}").unwrap();
            persons.push((h, state, hhwt, p, age));
        }
    }
    let dat = dir.path().join("h.dat");
    std::fs::write(&dat, &text).unwrap();

    let target = dir.path().join("p.mtab");
    let s = import_fixed(&dat, &cb, &target, false, &small_chunks()).unwrap();
    assert_eq!(s.rows, persons.len() as u64);
    let ds = Dataset::open(&target).unwrap();
    let names: Vec<&str> = ds
        .manifest()
        .variables
        .iter()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["RECTYPE", "SERIAL", "STATE", "HHWT", "PERNUM", "AGE"]
    );
    let (serial, state, hhwt, pernum, age) = (
        values(&ds, "SERIAL"),
        values(&ds, "STATE"),
        values(&ds, "HHWT"),
        values(&ds, "PERNUM"),
        values(&ds, "AGE"),
    );
    for (i, &(h, st, w, p, a)) in persons.iter().enumerate() {
        assert_eq!(
            (serial[i], state[i], hhwt[i] / 100.0, pernum[i], age[i]),
            (h as f64, st as f64, w, p as f64, a as f64),
            "person row {i}"
        );
    }
    assert!(strings(&ds, "RECTYPE")
        .iter()
        .all(|r| r.as_deref() == Some("P")));

    let target = dir.path().join("h.mtab");
    let s = import_fixed(
        &dat,
        &cb,
        &target,
        false,
        &FixedOptions {
            record_type: Some("H".into()),
            ..small_chunks()
        },
    )
    .unwrap();
    assert_eq!(s.rows, households.len() as u64);
    let ds = Dataset::open(&target).unwrap();
    assert_eq!(ds.manifest().variables.len(), 4);
    let st = values(&ds, "STATE");
    assert!(households
        .iter()
        .enumerate()
        .all(|(i, &(_, s, _))| st[i] == s as f64));
}
