//! The core every format shares: the chunk model parser threads fill
//! ([`column`]), the number grammars and missing tokens of text fields
//! ([`number`], [`na`]), opening the input ([`source`]), the reader →
//! parsers → writer pipeline ([`pipeline`]), the column writers
//! ([`sink`]), the dataset an import creates ([`dataset`]), and for the
//! binary formats a bounded header reader ([`binary`]), their dates and
//! tagged missing codes ([`dates`]), and what their writers share
//! ([`export`]).
//!
//! Nothing here knows a format: a format supplies where its text may be
//! cut and how a chunk is parsed, and gets back column files.

pub(crate) mod binary;
pub(crate) mod column;
pub(crate) mod dataset;
pub(crate) mod dates;
pub(crate) mod export;
pub(crate) mod na;
pub(crate) mod number;
pub(crate) mod pipeline;
pub(crate) mod sink;
pub(crate) mod source;
