//! A caller's selection as a filter term (`Term::rows`: a bitmap over the
//! records, as Python's boolean masks cross): queries count exactly the
//! records a plain loop over the bitmap and the other terms keeps, over
//! many morsels; `subset::selection` gives the same records; a bitmap of
//! another size is refused.

mod common;

use microtab_engine::{parse_filter, run, subset, Query, Term};
use std::fmt::Write;

fn data() -> (Vec<(i64, i64)>, Vec<u64>) {
    let mut next = common::xorshift(0x9E37_79B9_7F4A_7C15);
    let recs: Vec<(i64, i64)> = (0..150_000)
        .map(|_| {
            let r = next();
            (r as i64 % 90, 1 + (r >> 20) as i64 % 3)
        })
        .map(|(a, b)| (a.abs(), b))
        .collect();
    let mut bits = vec![0u64; recs.len().div_ceil(64)];
    for (i, w) in bits.iter_mut().enumerate() {
        *w = next();
        if i % 7 == 0 {
            *w = 0; // whole words out
        }
    }
    (recs, bits)
}

fn chosen(bits: &[u64], r: usize) -> bool {
    bits[r / 64] >> (r % 64) & 1 == 1
}

#[test]
fn a_selection_counts_its_records_with_the_other_terms() {
    let (recs, bits) = data();
    let mut t = String::from("AGE,G\n");
    for (a, g) in &recs {
        writeln!(t, "{a},{g}").unwrap();
    }
    let (_dir, ds) = common::import("s", &t, &[]);
    let kept: u64 = (0..recs.len()).filter(|&r| chosen(&bits, r)).count() as u64;
    let sel = Term::rows(bits.clone(), kept);
    let mut filter = parse_filter("AGE >= 25 or G = 3").unwrap();
    filter.push(sel.clone());
    let q = Query {
        filter: filter.clone(),
        group_by: vec!["G".into()],
        ..Query::default()
    };
    let cube = run(&ds, &q).unwrap();
    let mut want = [0u64; 3];
    for (r, (a, g)) in recs.iter().enumerate() {
        if chosen(&bits, r) && (*a >= 25 || *g == 3) {
            want[(*g - 1) as usize] += 1;
        }
    }
    assert_eq!(cube.counts, want);
    // The same records as a selection of the filter's records.
    let (got, n) = subset::selection(&ds, &filter).unwrap();
    assert_eq!(n, want.iter().sum::<u64>());
    for (r, (a, g)) in recs.iter().enumerate() {
        assert_eq!(
            chosen(&got, r),
            chosen(&bits, r) && (*a >= 25 || *g == 3),
            "record {r}"
        );
    }
    // Alone, and nothing chosen.
    let q = Query {
        filter: vec![sel],
        group_by: vec!["G".into()],
        ..Query::default()
    };
    assert_eq!(run(&ds, &q).unwrap().counts.iter().sum::<u64>(), kept);
    let none = Term::rows(vec![0; bits.len()], 0);
    let q = Query {
        filter: vec![none],
        group_by: vec!["G".into()],
        ..Query::default()
    };
    assert_eq!(run(&ds, &q).unwrap().counts.iter().sum::<u64>(), 0);
    // A bitmap of other records than the dataset's is refused.
    let short = Term::rows(bits[1..].to_vec(), 0);
    let q = Query {
        filter: vec![short.clone()],
        group_by: vec!["G".into()],
        ..Query::default()
    };
    let e = run(&ds, &q).unwrap_err().to_string();
    assert!(e.contains("not of the dataset's 150000"), "{e}");
    assert!(subset::selection(&ds, &[short]).is_err());
}
