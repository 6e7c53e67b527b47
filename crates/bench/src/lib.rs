//! microtab's measuring tools, kept out of the libraries the product runs
//! on: the I/O experiments behind `microtab iobench` ([`io`]) and the
//! deterministic synthetic census behind `microtab gen census`
//! ([`census`]), which the demo, the tests and the benchmarks generate
//! their data with.
#![deny(missing_docs)]

pub mod census;
pub mod io;
