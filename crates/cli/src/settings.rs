//! I/O settings in force: built-in defaults, overridden by the file that
//! `microtab tune` writes, overridden by environment variables. Read by
//! the analysis layer ([`microtab_analysis::settings`]), so that the HTTP
//! server and the Python package apply the same ones.

pub use microtab_analysis::settings::{config_path, Settings, SettingsFile};
