//! What an import tells its user besides the data: notes about how the
//! input was read, and the hints that errors and notes carry. Both state
//! facts; the option that would change the outcome is a
//! [`Remedy`](microtab_store::Remedy), which each front end spells itself
//! (a flag in the CLI, `types={"ZIP": "string"}` in Python).

use microtab_store::{Remedied, Remedy};

/// An option that would change an outcome, and what it would do (in
/// words that fit after the option's spelling: "imports the column as
/// text").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hint {
    /// The option.
    pub remedy: Remedy,
    /// What giving it does.
    pub effect: String,
}

impl Hint {
    /// A hint of `remedy` doing `effect`.
    pub fn new(remedy: Remedy, effect: impl Into<String>) -> Hint {
        Hint {
            remedy,
            effect: effect.into(),
        }
    }

    /// The hints as one clause, each option spelled by `spell` and
    /// followed by what it does, the alternatives joined by ", or ".
    pub fn join(hints: &[Hint], spell: impl Fn(&Remedy) -> String) -> String {
        hints
            .iter()
            .map(|h| format!("{} {}", spell(&h.remedy), h.effect))
            .collect::<Vec<_>>()
            .join(", or ")
    }
}

/// One thing the user should know about how the input was read (a
/// detected delimiter, a column read as text and why, codes made
/// missing …): a sentence of facts, and the option that would read it
/// otherwise, if there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// What was found.
    pub text: String,
    /// The option that reads the input otherwise.
    pub hint: Option<Hint>,
}

impl Note {
    /// A note with a hint.
    pub fn hinted(text: impl Into<String>, remedy: Remedy, effect: impl Into<String>) -> Note {
        Note {
            text: text.into(),
            hint: Some(Hint::new(remedy, effect)),
        }
    }

    /// The note as one sentence, its option spelled by `spell`.
    pub fn word(&self, spell: impl Fn(&Remedy) -> String) -> String {
        match &self.hint {
            Some(h) => format!(
                "{}; {}",
                self.text,
                Hint::join(std::slice::from_ref(h), spell)
            ),
            None => self.text.clone(),
        }
    }
}

impl From<String> for Note {
    fn from(text: String) -> Note {
        Note { text, hint: None }
    }
}

impl From<&str> for Note {
    fn from(text: &str) -> Note {
        Note::from(text.to_string())
    }
}

/// The facts only (front ends add the hint with [`Note::word`]).
impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl Remedied for Note {
    fn remedy(&self) -> Option<Remedy> {
        self.hint.as_ref().map(|h| h.remedy.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use microtab_store::ColumnKind;

    #[test]
    fn front_ends_spell_the_option() {
        let n = Note::hinted(
            "column ZIP is read as text",
            Remedy::ColumnType {
                variable: Some("ZIP".into()),
                kind: ColumnKind::Int,
            },
            "reads them as numbers",
        );
        assert_eq!(n.to_string(), "column ZIP is read as text");
        let flag = |r: &Remedy| match r {
            Remedy::ColumnType {
                variable: Some(v),
                kind,
            } => format!("type {v} as {}", kind.word()),
            _ => "?".into(),
        };
        assert_eq!(
            n.word(flag),
            "column ZIP is read as text; type ZIP as int reads them as numbers"
        );
        let hints = [
            Hint::new(Remedy::InferAllRows, "samples every record"),
            Hint::new(
                Remedy::ColumnType {
                    variable: Some("Q".into()),
                    kind: ColumnKind::String,
                },
                "imports the column as text",
            ),
        ];
        let kw = |r: &Remedy| match r {
            Remedy::InferAllRows => "infer_rows=\"all\"".to_string(),
            Remedy::ColumnType { variable, kind } => {
                format!(
                    "types={{\"{}\": \"{}\"}}",
                    variable.as_deref().unwrap(),
                    kind.word()
                )
            }
            _ => "?".into(),
        };
        assert_eq!(
            Hint::join(&hints, kw),
            "infer_rows=\"all\" samples every record, or types={\"Q\": \"string\"} imports the column as text"
        );
        assert_eq!(n.remedy(), Some(n.hint.unwrap().remedy));
    }
}
