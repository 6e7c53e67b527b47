//! Programs, filters and recodes as typed nodes, and the tabulation of
//! subexpressions over small-domain inputs into lookup tables.

use super::parser::parse;
use super::typer::Typer;
use super::types::{b, boolean, Case, Input, Node, Op, TabIn, Table, Ty, MAX_TABLE};
use super::{Program, NA};
use crate::filter::resolve;
use crate::physical::dict_of;
use crate::Result;
use microtab_store::{ColumnData, Dataset, Kind, Variable};

impl Program {
    /// Parses and types `text` against `ds`'s variables.
    pub fn parse(ds: &Dataset, text: &str) -> Result<Program> {
        let ast = parse(text)?;
        let mut t = Typer {
            ds,
            inputs: Vec::new(),
            text,
        };
        let root = t.node(&ast)?;
        if matches!(root.ty, Ty::Text) {
            return t.bad(
                "the result is a text variable; compute numbers (copying text variables is not supported)"
                    .into(),
            );
        }
        Ok(Program {
            root,
            inputs: t.inputs,
            text: text.to_string(),
        })
    }
}

/// A filter (terms that must all hold) as a program whose value is 1 for
/// the records that pass (0 or missing for the others: a record whose
/// variable is missing fails the term, as in every query; `not`, `and`
/// and `or` of a term combining several variables follow SQL's
/// three-valued logic); `None` for no terms.
/// The filter `terms` as one program over their inputs. With `judge`, a
/// text value no record of `ds` has is an error (one dataset answered
/// alone); without, it matches none (a part of several, whose values were
/// judged over all of them).
pub(crate) fn filter_program(
    ds: &Dataset,
    terms: &[crate::Term],
    judge: bool,
) -> Result<Option<Program>> {
    let mut t = Typer {
        ds,
        inputs: Vec::new(),
        text: "",
    };
    let mut root: Option<Node> = None;
    for term in terms {
        let n = term_node(ds, &mut t, term, judge)?;
        root = Some(match root {
            None => n,
            Some(a) => {
                let na = a.na || n.na;
                boolean(Op::And(b(a), b(n)), na)
            }
        });
    }
    Ok(root.map(|root| Program {
        root,
        inputs: t.inputs,
        text: terms
            .iter()
            .map(|t| t.text.as_str())
            .collect::<Vec<_>>()
            .join(" "),
    }))
}

/// A term's node: membership of its variable's value in its predicate,
/// or a combination of terms on several variables.
fn term_node(ds: &Dataset, t: &mut Typer<'_>, term: &crate::Term, judge: bool) -> Result<Node> {
    if let crate::Cond::Mixed(f) = &term.cond {
        return tree_node(ds, t, f, judge);
    }
    if let crate::Cond::Rows(_) = &term.cond {
        // Only the scan reads a caller's selection (as a mask column).
        return Err(crate::Error::Invalid(format!(
            "{} cannot be used here: give a filter instead",
            term.text
        )));
    }
    let i = t.input(&term.var)?;
    let var = t.inputs[i].var.clone();
    let dict = dict_of(ds, &var)?;
    if judge {
        crate::filter::check_text_values(term, &var, &[&dict])?;
    }
    let p = resolve(term, &var, &dict)?;
    let x = t.load(i);
    let na = x.na;
    Ok(boolean(Op::InSet(b(x), p), na))
}

fn tree_node(
    ds: &Dataset,
    t: &mut Typer<'_>,
    f: &crate::filter::Filter,
    judge: bool,
) -> Result<Node> {
    use crate::filter::Filter;
    Ok(match f {
        Filter::Term(term) => term_node(ds, t, term, judge)?,
        Filter::Not(a) => {
            let a = tree_node(ds, t, a, judge)?;
            let na = a.na;
            boolean(Op::Not(b(a)), na)
        }
        Filter::And(v) | Filter::Or(v) => {
            let mut acc: Option<Node> = None;
            for part in v {
                let n = tree_node(ds, t, part, judge)?;
                acc = Some(match acc {
                    None => n,
                    Some(a) => {
                        let na = a.na || n.na;
                        let op = match f {
                            Filter::And(_) => Op::And(b(a), b(n)),
                            _ => Op::Or(b(a), b(n)),
                        };
                        boolean(op, na)
                    }
                });
            }
            acc.ok_or_else(|| crate::Error::Invalid("an empty combination of terms".into()))?
        }
    })
}

/// Replaces the largest subexpressions over small-domain inputs (integer
/// or text variables whose stored ranges, and null code, combine into at
/// most [`MAX_TABLE`] cases) by lookup tables. `AGE >= 18 and SEX = 2`,
/// a recode of AGE × SEX × EDUC, `if(AGE >= 65, …)`'s condition: each a
/// gather per record instead of a pass per operator.
pub(crate) fn tabulate(node: &mut Node, inputs: &[Input]) {
    if matches!(
        node.op,
        Op::ConstI(_) | Op::ConstF(_) | Op::Load(_) | Op::Table(_)
    ) {
        return;
    }
    let mut ins = Vec::new();
    if node.inputs_of(&mut ins) && !ins.is_empty() {
        ins.sort_unstable();
        ins.dedup();
        if let Some(t) = table_for(node, inputs, &ins) {
            let ty = node.ty.clone();
            let na = node.na;
            *node = Node {
                op: Op::Table(Box::new(t)),
                ty,
                na,
            };
            return;
        }
    }
    for c in node.children_mut() {
        tabulate(c, inputs);
    }
}

fn table_for(node: &Node, inputs: &[Input], ins: &[usize]) -> Option<Table> {
    let mut tab = Vec::new();
    let mut stride = 1usize;
    for &i in ins {
        let v = &inputs[i].var;
        if v.kind == Kind::Float {
            return None;
        }
        let (lo, hi) = (v.min?.as_i64(), v.max?.as_i64());
        let span = hi.checked_sub(lo)?.checked_add(1)?;
        let null = v.null_code.filter(|_| v.nulls > 0);
        let size = usize::try_from(span)
            .ok()?
            .checked_add(null.is_some() as usize)?;
        tab.push(TabIn {
            input: i,
            lo,
            span,
            null,
            size,
            stride,
        });
        stride = stride.checked_mul(size).filter(|&s| s <= MAX_TABLE)?;
    }
    let n = stride;
    // Every combination of stored values, one synthetic record each.
    let mut synth: Vec<Vec<i64>> = vec![Vec::new(); inputs.len()];
    for t in &tab {
        synth[t.input] = (0..n)
            .map(|c| {
                let slot = ((c / t.stride) % t.size) as i64;
                if slot == t.span {
                    t.null.unwrap_or(NA)
                } else {
                    t.lo + slot
                }
            })
            .collect();
    }
    let cols: Vec<ColumnData<'_>> = synth.iter().map(|v| ColumnData::I64(v)).collect();
    let vals = node.eval(inputs, &cols, n);
    Some(Table {
        ins: tab,
        vals,
        fallback: node.clone(),
    })
}

/// A helper for recodes: the loaded node of each input variable.
pub(crate) fn load_nodes(ds: &Dataset, vars: &[Variable]) -> (Vec<Input>, Vec<Node>) {
    let mut t = Typer {
        ds,
        inputs: vars.iter().map(Input::new).collect(),
        text: "",
    };
    let nodes = (0..vars.len()).map(|i| t.load(i)).collect();
    let inputs = std::mem::take(&mut t.inputs);
    (inputs, nodes)
}

/// A recode node over `case`, of type `ty`.
pub(crate) fn case_node(case: Case, ty: Ty, na: bool) -> Node {
    Node {
        op: Op::Case(Box::new(case)),
        ty,
        na,
    }
}
