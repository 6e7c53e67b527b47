//! The command line's words for what would help: a library error carries a
//! [`Remedy`] (facts, never a flag), and this module says it as the
//! command's flag or command. The `microtab-arrow` binary (export and
//! Parquet import) includes this file too, so both say it alike.

use microtab_store::{ColumnKind, Remedy};

/// The advice for `r` in the command line's flags, appended to the error
/// message; `None` for a remedy the command line has no words for.
pub fn words(r: &Remedy) -> Option<String> {
    Some(match r {
        Remedy::Force => "give --force to replace it".into(),
        Remedy::Replace => "give --replace to overwrite it".into(),
        Remedy::MaxCells { cells: Some(c) } => format!("raise the limit with --max-cells {c}"),
        Remedy::MaxCells { cells: None } => {
            "raise the limit with --max-cells N (memory grows with it)".into()
        }
        Remedy::AllowNegativeWeights => "give --allow-negative-weights to use them".into(),
        Remedy::NoDesign => "answer without the survey design with --no-design, or change the design with `microtab design`".into(),
        Remedy::LonelyPsu => {
            "choose how to treat it with `microtab design … --lonely-psu remove|certainty|adjust|average`".into()
        }
        Remedy::SetDesign => "set the design again with `microtab design`".into(),
        Remedy::Filter => "query the full dataset with --filter instead".into(),
        Remedy::ColumnType { variable, kind } => {
            let name = variable.as_deref().unwrap_or("NAME");
            match kind {
                ColumnKind::IntOrString => {
                    format!("import it again with --type {name}=int, or --type {name}=string")
                }
                k => format!("import it again with --type {name}={}", k.word()),
            }
        }
        Remedy::Encoding => {
            "for a Latin-1 or Windows-1252 file give --encoding latin1 or --encoding windows-1252"
                .into()
        }
        Remedy::InferAllRows => "give --infer-rows all to sample every record".into(),
        Remedy::NaText => "--na-text lists the texts read as missing in text columns".into(),
        Remedy::KeepNiu => "--keep-niu keeps them as values".into(),
        Remedy::RecordType => "--rectype chooses another record type".into(),
        Remedy::ExactDecimals => {
            "export with --exact-decimals to carry such values exactly, or import without --ddi"
                .into()
        }
        Remedy::NoLabels => "export without --labels to keep the codes".into(),
        Remedy::NoCodebook => "import without --ddi to keep the values as they are".into(),
        Remedy::DecimalComma => "import it again with --decimal-comma".into(),
        _ => return None,
    })
}

/// A remedy as the bare option (or command) that applies it, for import's
/// notes and errors, whose library text says what the option does.
pub fn flag(r: &Remedy) -> String {
    match r {
        Remedy::ColumnType { variable, kind } => format!(
            "--type {}={}",
            variable.as_deref().unwrap_or("VAR"),
            kind.word()
        ),
        Remedy::Encoding => "--encoding latin1 (or windows-1252)".into(),
        Remedy::InferAllRows => "--infer-rows all".into(),
        Remedy::NaText => "--na-text".into(),
        Remedy::KeepTextTokens => "--na-text ''".into(),
        Remedy::KeepNiu => "--keep-niu".into(),
        Remedy::RecordType => "--rectype TYPE".into(),
        Remedy::DecimalComma => "--decimal-comma".into(),
        Remedy::Delimiter { delimiter } => match delimiter {
            Some('\t') => "-d tab".into(),
            Some(c) => format!("-d {c}"),
            None => "-d".into(),
        },
        Remedy::MissingCodes { variable, codes } if codes.is_empty() => {
            format!("`microtab missing DATASET {variable} CODE…`")
        }
        Remedy::MissingCodes { variable, codes } => {
            format!("`microtab missing DATASET {variable} {}`", codes.join(" "))
        }
        r => format!("{r:?}"),
    }
}

/// `message`, with the advice for `remedy` appended when there is one.
pub fn with_hint(message: &str, remedy: Option<&Remedy>) -> String {
    match remedy.and_then(words) {
        Some(h) => format!("{message}; {h}"),
        None => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hint_names_a_flag_or_command() {
        let all = [
            Remedy::Force,
            Remedy::Replace,
            Remedy::MaxCells { cells: Some(12) },
            Remedy::AllowNegativeWeights,
            Remedy::NoDesign,
            Remedy::LonelyPsu,
            Remedy::SetDesign,
            Remedy::Filter,
            Remedy::ColumnType {
                variable: Some("X".into()),
                kind: ColumnKind::Int,
            },
            Remedy::Encoding,
            Remedy::InferAllRows,
            Remedy::NaText,
            Remedy::KeepNiu,
            Remedy::RecordType,
            Remedy::ExactDecimals,
            Remedy::NoLabels,
            Remedy::NoCodebook,
            Remedy::DecimalComma,
        ];
        for r in &all {
            let w = words(r).unwrap();
            assert!(w.contains("--") || w.contains("`microtab "), "{r:?}: {w}");
        }
        assert_eq!(
            with_hint("x exists", Some(&Remedy::Force)),
            "x exists; give --force to replace it"
        );
        assert!(words(&Remedy::MaxCells { cells: Some(12) })
            .unwrap()
            .ends_with("--max-cells 12"));
    }
}
