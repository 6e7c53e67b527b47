//! Expressions over a dataset's variables, for `microtab compute`:
//! `INCTOT * PERWT`, `if(AGE >= 65, 1, 0)`, `round(INCTOT / 12)`,
//! `ln(INCWAGE) + missing(EDUC)`, `AGE(18-64) and SEX(2)`.
//!
//! **Grammar** (lowest precedence first): `or` (`|`), `and` (`&`), `not`
//! (`!`), comparisons (`= == != <> < <= > >=`, also `eq ne lt le gt ge`;
//! not chained), `+ -`, `* /`, unary `-`, powers (`^` or `**`, right
//! associative). Atoms: numbers (`12`, `2.5`, `1e6`), variables (quoted
//! with backticks when their names have spaces: `` `Body Mass (g)` ``, as
//! [`crate::lex`] says for every grammar),
//! quoted text (`"Ohio"`, only in `==`/`!=` with a text variable), function
//! calls, and SDA's range tests `NAME(values and ranges)` (`AGE(18-64)`,
//! `RACE(1,3-5)`, `STATE("New York",Ohio)`), true (1) when the value is
//! listed.
//!
//! **Functions**: `abs ln log10 exp sqrt float`, `round(x)`,
//! `round(x, n)` (half away from zero, n from −9 to 9 decimals), `floor
//! ceil trunc` (`int` = `trunc`), `min(a, b, …) max(a, b, …)`, `mod(a, b)`
//! (floored: the sign of b, as Stata and R), `if(cond, a, b)`,
//! `inrange(x, lo, hi)`, `missing(x)`.
//!
//! **Numbers are exact where they can be**: integers and implied-decimal
//! variables are computed as exact integers (decimals aligned, products
//! adding decimals), so `PERWT * INCTOT` has no rounding at all; division,
//! powers with non-integer exponents, `ln exp sqrt` and floating-point
//! variables compute in `f64`. The range each result can take is derived
//! from the inputs' stored ranges before anything is read: an integer
//! result that might not fit 64 bits is refused (wrap it in `float()`),
//! never wrapped; the new column gets the narrowest type that range allows
//! (an integer result, or a rounded float within ±2^53, is stored as an
//! integer).
//!
//! **Missing values propagate**: a variable's missing codes and
//! system-missing values are missing, and so is any arithmetic, comparison
//! or function of a missing value; also division by zero, `ln`/`log10` of
//! a value ≤ 0, `sqrt` of a negative value, `mod(a, 0)`, and results
//! beyond the `f64` range. `and`/`or` follow SQL's three-valued logic
//! (`0 and missing` is 0, `1 or missing` is 1); `if` with a missing
//! condition is missing; `missing(x)` is never missing.
//!
//! **Modules**, in the order a text passes through them: `parser` (text
//! to syntax tree, over the shared [`crate::lex`]), `typer` (syntax tree
//! to typed nodes, each node's storage type and range derived from the
//! inputs' stored ranges; the node types are in `types`), `eval` (typed
//! nodes over columns) and `compile` (programs, filters and recodes as
//! typed nodes, subexpressions tabulated). Each imports only those before
//! it.

mod compile;
mod eval;
mod parser;
mod typer;
mod types;

pub(crate) use compile::{case_node, filter_program, load_nodes, tabulate};
pub(crate) use eval::{slice, SUB};
pub(crate) use types::{Case, Input, Node, Other, Ty, Vals};

use microtab_store::{ColumnData, Variable};

/// The missing value of integer vectors.
pub(crate) const NA: i64 = i64::MIN;
/// Most decimals an exact integer result may carry.
const MAX_DEC: u32 = 18;
/// Largest magnitude of an exact integer value (`NA` is below it).
const LIMIT: i128 = i64::MAX as i128;

/// A typed expression ready to run over a dataset.
#[derive(Debug, Clone)]
pub struct Program {
    pub(crate) root: Node,
    pub(crate) inputs: Vec<Input>,
    pub(crate) text: String,
}

impl Program {
    /// Calls `pass(row)` for each of the `n` rows of `views` (the program's
    /// input columns over a stretch of records) where its value is 1: the
    /// rows a filter's program passes.
    pub(crate) fn each_pass(
        &self,
        views: &[ColumnData<'_>],
        n: usize,
        mut pass: impl FnMut(usize),
    ) {
        for a in (0..n).step_by(SUB) {
            let e = (a + SUB).min(n);
            let sub: Vec<ColumnData<'_>> = views.iter().map(|v| slice(v, a, e)).collect();
            if let Vals::I(v) = self.root.eval(&self.inputs, &sub, e - a) {
                for (k, x) in v.iter().enumerate() {
                    if *x == 1 {
                        pass(a + k);
                    }
                }
            }
        }
    }

    /// The expression as given.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The variables it reads.
    pub fn inputs(&self) -> Vec<&Variable> {
        self.inputs.iter().map(|i| &i.var).collect()
    }
}
