//! Advice the command line adds to an error beyond a library's
//! [`Remedy`](microtab_store::Remedy) (`hint.rs`): the names a mistyped
//! subcommand, option or option value probably meant, how to see every
//! variable of a dataset, and how to quote a variable name with spaces or
//! punctuation inside an argument.

use clap::error::{ContextKind, ContextValue, ErrorKind};
use microtab_store::close_names;

/// `e` with the subcommand, option or value it probably meant (clap is
/// built without its own suggestions; the matcher is the one unknown
/// variables use, so `FREQ`, `frq` and `--wieght` are all understood).
pub fn clap_error(mut e: clap::Error, cmd: &clap::Command) -> clap::Error {
    let text = |k| match e.get(k) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    match e.kind() {
        ErrorKind::InvalidSubcommand => {
            let Some(bad) = text(ContextKind::InvalidSubcommand) else {
                return e;
            };
            let names = cmd.get_subcommands().map(|c| c.get_name());
            let close = close_names(&bad, names);
            if !close.is_empty() {
                e.insert(
                    ContextKind::SuggestedSubcommand,
                    ContextValue::Strings(close),
                );
            }
        }
        ErrorKind::UnknownArgument => {
            let Some(bad) = text(ContextKind::InvalidArg) else {
                return e;
            };
            if !bad.starts_with('-') {
                // A name the shell cut at its spaces (`--weight Body Mass`).
                let args: Vec<String> = std::env::args().skip(2).collect();
                let q = quoting(&args, &named_datasets_variables(&args))
                    .or_else(|| split_filter(&args, &bad));
                if let Some(q) = q {
                    let tip = clap::builder::StyledStr::from(q);
                    e.insert(ContextKind::Suggested, ContextValue::StyledStrs(vec![tip]));
                }
                return e;
            }
            if !bad.starts_with("--") {
                // A value that starts with '-' (`-99=Refused`, `-X`),
                // read as short options: clap's tip would pass a piece of
                // it (`-- -9`), so the whole command is shown with `--`.
                let args: Vec<String> = std::env::args().skip(1).collect();
                let sub = args.first().and_then(|s| cmd.find_subcommand(s));
                if let (Some(k), Some(sub)) =
                    (args.iter().skip(1).position(|a| a.starts_with(&bad)), sub)
                {
                    let k = k + 1;
                    // Options after the value go before `--` (with their
                    // values).
                    let (mut opts, mut values) = (Vec::new(), Vec::new());
                    let mut i = k;
                    while i < args.len() {
                        let a = &args[i];
                        let long = a
                            .strip_prefix("--")
                            .map(|l| l.split('=').next().unwrap_or(l));
                        match long
                            .and_then(|l| sub.get_arguments().find(|x| x.get_long() == Some(l)))
                        {
                            Some(o) => {
                                opts.push(a.as_str());
                                let takes = o.get_action().takes_values() && !a.contains('=');
                                if takes && i + 1 < args.len() {
                                    opts.push(args[i + 1].as_str());
                                    i += 1;
                                }
                            }
                            None => values.push(a.as_str()),
                        }
                        i += 1;
                    }
                    let shown: Vec<String> = std::iter::once("microtab")
                        .chain(args[..k].iter().map(String::as_str))
                        .chain(opts)
                        .chain(std::iter::once("--"))
                        .chain(values)
                        .map(shell_quote)
                        .collect();
                    let tip = clap::builder::StyledStr::from(format!(
                        "a value that starts with '-' goes after '--', which ends the options: {}",
                        shown.join(" ")
                    ));
                    e.insert(ContextKind::Suggested, ContextValue::StyledStrs(vec![tip]));
                }
                return e;
            }
            let word = bad.trim_start_matches('-');
            let word = word.split('=').next().unwrap_or(word);
            // The subcommand is the first argument that is no option.
            let sub = std::env::args()
                .skip(1)
                .find(|a| !a.starts_with('-'))
                .and_then(|s| cmd.find_subcommand(&s).cloned());
            let Some(sub) = sub else {
                return e;
            };
            let longs: Vec<&str> = sub.get_arguments().filter_map(|a| a.get_long()).collect();
            if let Some(best) = close_names(word, longs.iter().copied()).first() {
                e.insert(
                    ContextKind::SuggestedArg,
                    ContextValue::String(format!("--{best}")),
                );
                // clap's "to pass it as a value, use '-- --x'" tip would
                // mislead next to the option meant.
                e.insert(ContextKind::Suggested, ContextValue::StyledStrs(Vec::new()));
            }
        }
        ErrorKind::InvalidValue => {
            let (Some(bad), Some(ContextValue::Strings(valid))) = (
                text(ContextKind::InvalidValue),
                e.get(ContextKind::ValidValue),
            ) else {
                return e;
            };
            if let Some(best) = close_names(&bad, valid.iter().map(String::as_str)).first() {
                e.insert(
                    ContextKind::SuggestedValue,
                    ContextValue::String(best.clone()),
                );
            }
        }
        _ => {}
    }
    e
}

/// The variables of the datasets `args` name (the directories holding a
/// manifest), for advice given before the command opened any.
fn named_datasets_variables(args: &[String]) -> Vec<String> {
    args.iter()
        .filter(|a| std::path::Path::new(a).join("manifest.json").is_file())
        .filter_map(|a| microtab_store::Dataset::open(std::path::Path::new(a)).ok())
        .flat_map(|d| {
            d.manifest()
                .variables
                .iter()
                .map(|v| v.name.clone())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The store's error within `c`, through the libraries' wrappers of it.
fn store_error<'a>(c: &'a (dyn std::error::Error + 'static)) -> Option<&'a microtab_store::Error> {
    use microtab_analysis::Error as A;
    use microtab_engine::Error as E;
    if let Some(x) = c.downcast_ref::<microtab_store::Error>() {
        return Some(x);
    }
    match c.downcast_ref::<E>() {
        Some(E::Store(x)) => return Some(x),
        Some(_) => return None,
        None => {}
    }
    if let Some(microtab_ingest::Error::Store(x)) = c.downcast_ref() {
        return Some(x);
    }
    match c.downcast_ref::<A>()? {
        A::Store(x) | A::Engine(E::Store(x)) => Some(x),
        A::InDataset { error, .. } => store_error(error.as_ref()),
        _ => None,
    }
}

/// How to see every variable, when an unknown variable's error listed
/// only the first few of a dataset's.
pub fn all_variables(e: &anyhow::Error) -> Option<String> {
    e.chain().find_map(|c| match store_error(c)? {
        microtab_store::Error::UnknownVariable {
            dataset,
            known,
            count,
            ..
        } if *count > known.len() => Some(format!(
            "`microtab info {}` lists all {count}",
            shell_quote(&dataset.to_string_lossy())
        )),
        _ => None,
    })
}

/// Whether `e` may come of a name misread: an unknown variable, a filter
/// or grouping argument that does not parse (the errors after which
/// [`quoting`]'s advice is given).
pub fn about_names(e: &anyhow::Error) -> bool {
    use microtab_engine::Error as E;
    e.chain().any(|c| {
        matches!(
            store_error(c),
            Some(microtab_store::Error::UnknownVariable { .. })
        ) || matches!(
            c.downcast_ref::<E>()
                .or_else(|| match c.downcast_ref::<microtab_analysis::Error>() {
                    Some(microtab_analysis::Error::Engine(x)) => Some(x),
                    _ => None,
                }),
            Some(E::Filter { .. } | E::Invalid(_) | E::Grouping { .. })
        )
    })
}

/// `s` as a shell reads it back: as it is when it has nothing the shell
/// would take apart, else in single quotes.
pub fn shell_quote(s: &str) -> String {
    let plain = |c: char| c.is_alphanumeric() || "_-./:=,@%+".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Whether a name must be quoted inside a longer argument (the grammar's
/// bare names are letters, digits and `_ . $ # @`).
fn needs_quotes(name: &str) -> bool {
    !name
        .chars()
        .all(|c| c.is_alphanumeric() || "_.$#@".contains(c))
}

/// How to quote a variable name with spaces or punctuation that `args`
/// (the command's arguments, after the subcommand) give unquoted inside a
/// longer argument, or that the shell cut into several arguments: the
/// argument as it should be written. `names` are the variables of the
/// datasets the command opened.
pub fn quoting(args: &[String], names: &[String]) -> Option<String> {
    let mut names: Vec<&String> = names.iter().filter(|n| needs_quotes(n)).collect();
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    // The option an argument is the value of, as the advice repeats it.
    let option = |i: usize| match i.checked_sub(1).map(|j| &args[j]) {
        Some(o) if o.starts_with('-') && !o.contains('=') => format!("{o} "),
        _ => String::new(),
    };
    for name in &names {
        let lower = name.to_ascii_lowercase();
        for (i, a) in args.iter().enumerate() {
            if a.eq_ignore_ascii_case(name) {
                continue;
            }
            // The shell cut the name at its spaces: `--weight Body Mass`.
            for j in i + 1..args.len() {
                let joined = args[i..=j].join(" ").to_ascii_lowercase();
                if joined.len() > name.len() {
                    break;
                }
                // The whole name, or its words up to punctuation the
                // shell would have refused unquoted (`Body Mass (g)`).
                if lower.starts_with(&joined) {
                    return Some(format!(
                        "{name} has spaces: quote it for the shell, as one argument: {}{}",
                        option(i),
                        shell_quote(name)
                    ));
                }
            }
            let al = a.to_ascii_lowercase();
            let Some(at) = unquoted_at(&al, &lower) else {
                continue;
            };
            let (value, prefix) = match a.split_once('=') {
                Some((o, v)) if o.starts_with("--") && at > o.len() => (v, format!("{o}=")),
                _ => (a.as_str(), String::new()),
            };
            let at = at - prefix.len();
            let fixed = format!(
                "{}`{}`{}",
                &value[..at],
                value[at..at + name.len()].replace('`', "``"),
                &value[at + name.len()..]
            );
            return Some(format!(
                "inside a longer argument a name with spaces or punctuation is quoted with backticks (or double quotes): {}{prefix}{}",
                option(i),
                shell_quote(&fixed)
            ));
        }
    }
    None
}

/// How to write a filter the shell cut at its spaces (`--filter AGE >= 25`
/// arrives as `--filter AGE` and a stray `25`, the `>=` having sent the
/// output to a file named `=`): `bad`, the argument clap found no place
/// for, is one of the words after the filter's value.
pub fn split_filter(args: &[String], bad: &str) -> Option<String> {
    let (i, first) = args.iter().enumerate().find_map(|(i, a)| {
        if a == "--filter" {
            args.get(i + 1).map(|v| (i + 1, v.clone()))
        } else {
            a.strip_prefix("--filter=").map(|v| (i, v.to_string()))
        }
    })?;
    let rest: Vec<&String> = args[i + 1..]
        .iter()
        .take_while(|a| !a.starts_with("--"))
        .collect();
    if !rest.iter().any(|a| *a == bad) {
        return None;
    }
    let mut words = vec![first.as_str()];
    words.extend(rest.iter().map(|a| a.as_str()));
    Some(format!(
        "a filter with spaces is one argument: quote it for the shell, as in --filter {} (unquoted, the shell splits it at its spaces, and a < or > in it sends the output to a file or reads one)",
        shell_quote(&words.join(" "))
    ))
}

/// Where `name` stands in `arg` outside backticks and double quotes
/// (both already lower case), if it does.
fn unquoted_at(arg: &str, name: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(p) = arg[from..].find(name) {
        let at = from + p;
        let quote = None::<char>;
        let inside = arg[..at].chars().fold(quote, |q, c| match (q, c) {
            (None, '`' | '"') => Some(c),
            (Some(open), c) if c == open => None,
            (q, _) => q,
        });
        if inside.is_none() {
            return Some(at);
        }
        from = at + name.len().max(1);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn quoting_shows_the_argument_quoted() {
        let names = s(&["AGE", "Body Mass (g)", "Flipper Length, mm"]);
        assert_eq!(
            quoting(&s(&["DS", "AGE", "--by", "Body Mass (g), SEX"]), &names).unwrap(),
            "inside a longer argument a name with spaces or punctuation is quoted with backticks (or double quotes): --by '`Body Mass (g)`, SEX'"
        );
        assert_eq!(
            quoting(&s(&["DS", "AGE", "--weight", "Body", "Mass", "(g)"]), &names).unwrap(),
            "Body Mass (g) has spaces: quote it for the shell, as one argument: --weight 'Body Mass (g)'"
        );
        assert_eq!(
            quoting(&s(&["DS", "--filter=body mass (g)>3"]), &names).unwrap(),
            "inside a longer argument a name with spaces or punctuation is quoted with backticks (or double quotes): --filter='`body mass (g)`>3'"
        );
        // Quoted already, or whole: nothing to say.
        assert!(quoting(&s(&["DS", "--by", "`Body Mass (g)`, SEX"]), &names).is_none());
        assert!(quoting(&s(&["DS", "--by", "\"Body Mass (g)\""]), &names).is_none());
        assert!(quoting(&s(&["DS", "--by", "Body Mass (g)"]), &names).is_none());
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
