//! One module per subcommand: its arguments and `run`.

pub mod codebook;
pub mod corr;
pub mod derive;
pub mod design;
pub mod external;
pub mod freq;
pub mod gen;
pub mod import;
pub mod info;
pub mod iobench;
pub mod label;
pub mod list;
pub mod means;
pub mod missing;
pub mod ratio;
pub mod regress;
pub mod replicate;
pub mod split;
pub mod subset;
pub mod tab;
pub mod tune;
pub mod vars;
pub mod verify;
pub mod weight;
