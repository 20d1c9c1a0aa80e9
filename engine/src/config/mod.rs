//! nginx-syntax configuration: lexer, parser, the typed model and its checks.
//!
//! [`load`] reads a file (and its includes) into a [`model::Config`]; [`parse_str`] does the same for text in
//! memory. Errors are [`ConfigError`]s worded as nginx words them; `docs/directives.md` lists what corelb reads.

mod build;
pub mod error;
pub mod key;
pub mod lexer;
pub mod log_format;
pub mod model;
pub mod parser;
pub mod state_file;
pub mod url;
pub mod value;

pub use error::ConfigError;

use std::path::Path;

/// Reads the config file at `path` and its includes. Relative include paths resolve against the directory of
/// `path`, as nginx resolves them against its conf prefix.
pub fn load(path: &Path) -> Result<model::Config, ConfigError> {
    let tree = parser::parse_file(path)?;
    build::build(&tree)
}

/// Reads `text` as the content of the config file `path` (which need not exist; includes are still read from disk,
/// relative to `path`'s directory).
pub fn parse_str(text: &str, path: &Path) -> Result<model::Config, ConfigError> {
    let tree = parser::parse_text(text.as_bytes(), path);
    build::build(&tree)
}
