//! Which names a mistyped one probably meant: the one matcher behind every
//! "did you mean" (unknown variables here; the command line's
//! subcommands and options use it too).

/// A name reduced to what a typist may get wrong without meaning another
/// name: letters and digits, lower case (`Body Mass (g)` → `bodymassg`).
fn key(s: &str) -> Vec<char> {
    s.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// Edits between `a` and `b`: insertions, deletions, substitutions and
/// swaps of two neighbouring letters (`AEG` is one edit from `AGE`).
pub fn edits(a: &[char], b: &[char]) -> usize {
    let w = b.len() + 1;
    let mut d: Vec<usize> = vec![0; (a.len() + 1) * w];
    for (j, x) in d.iter_mut().enumerate().take(w) {
        *x = j;
    }
    for i in 1..=a.len() {
        d[i * w] = i;
        for j in 1..=b.len() {
            let sub = d[(i - 1) * w + j - 1] + (a[i - 1] != b[j - 1]) as usize;
            let mut best = sub.min(d[(i - 1) * w + j] + 1).min(d[i * w + j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = best;
        }
    }
    d[a.len() * w + b.len()]
}

/// The names of `candidates` that `name` probably meant, best first (at
/// most five): those equal to it but for case, spaces and punctuation;
/// else those an edit away from it (two for six letters or more), or
/// that begin with it (four letters or more).
pub fn close_names<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let want = key(name);
    let most = if want.len() >= 6 { 2 } else { 1 };
    let mut same = Vec::new();
    let mut near: Vec<(usize, String)> = Vec::new();
    for c in candidates {
        let k = key(c);
        if k == want {
            same.push(c.to_string());
        } else if want.len() >= 2 && k.len().abs_diff(want.len()) <= most {
            let n = edits(&want, &k);
            if n <= most && n < want.len() {
                near.push((n, c.to_string()));
            }
        } else if want.len() >= 4 && k.starts_with(&want) {
            near.push((most + 1, c.to_string()));
        }
    }
    let mut out = if same.is_empty() {
        near.sort();
        near.into_iter().map(|(_, c)| c).collect()
    } else {
        same
    };
    out.dedup();
    out.truncate(5);
    out
}

/// ` (did you mean 'a', 'b' or 'c'?)`, or nothing for no names.
pub fn did_you_mean(close: &[String]) -> String {
    match close {
        [] => String::new(),
        [one] => format!(" (did you mean '{one}'?)"),
        [init @ .., last] => format!(
            " (did you mean {} or '{last}'?)",
            init.iter()
                .map(|c| format!("'{c}'"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_names_by_edits_case_and_punctuation() {
        let vars = ["AGE", "SEX", "PERWT", "Body Mass (g)", "INCTOT", "INCWAGE"];
        assert_eq!(close_names("AEG", vars), ["AGE"]);
        assert_eq!(close_names("perwtt", vars), ["PERWT"]);
        assert_eq!(close_names("body_mass_g", vars), ["Body Mass (g)"]);
        assert_eq!(close_names("INCTTO", vars), ["INCTOT"]);
        assert_eq!(close_names("INCW", vars), ["INCWAGE"]);
        assert!(close_names("ZZZ", vars).is_empty());
        assert!(close_names("X", vars).is_empty());
        assert_eq!(edits(&['a', 'b'], &['b', 'a']), 1);
        assert_eq!(
            did_you_mean(&["A".into(), "B".into(), "C".into()]),
            " (did you mean 'A', 'B' or 'C'?)"
        );
    }
}
