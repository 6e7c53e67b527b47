//! One module per subcommand: its arguments and `run`.

pub mod codebook;
pub mod freq;
pub mod gen;
pub mod import;
pub mod info;
pub mod means;
pub mod tab;
