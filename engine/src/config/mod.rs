//! nginx-syntax configuration: lexer, parser, the typed model and its checks.
//!
//! [`load`] reads a file (and its includes) into a [`model::Config`]; [`parse_str`] does the same for text in
//! memory. Errors are [`ConfigError`]s worded as nginx words them; `docs/directives.md` lists what corelb reads.

pub mod access;
pub mod agent;
mod build;
pub mod charset;
pub mod error;
pub mod error_pages;
pub mod files;
pub mod geo;
pub mod gzip;
pub mod headers;
pub mod key;
pub mod lexer;
pub mod limit;
pub mod log_format;
pub mod log_path;
pub mod map;
pub mod model;
pub mod parser;
pub mod proxy_tls;
pub mod proxy_tlv;
pub mod queue;
pub mod realip;
pub mod regex;
pub mod resolver;
pub mod rewrite;
pub mod state_file;
pub mod sticky;
pub mod stream_format;
pub mod tls;
pub mod unix_addr;
pub mod url;
pub mod value;
pub mod var;

pub use build::server_names;
pub use error::ConfigError;

use std::path::{Path, PathBuf};

/// What the command line adds to a config file (`nginx -p PREFIX -g DIRECTIVES`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// nginx's prefix: relative `pid`, `error_log`, `access_log` and `*_temp_path` paths resolve against it
    /// (`include` resolves against the main file's directory, nginx's conf prefix). Empty: paths stay as written,
    /// relative to the working directory.
    pub prefix: PathBuf,
    /// `-g`: main-context directives read before the file, placed `in command line`.
    pub params: Option<String>,
}

/// A config and the files it was read from (the main one first, each include once, with its text: `-T`).
#[derive(Debug)]
pub struct Loaded {
    pub config: model::Config,
    pub files: Vec<(PathBuf, Vec<u8>)>,
}

/// Reads the config file at `path` and its includes. Relative include paths resolve against the directory of
/// `path`, as nginx resolves them against its conf prefix.
pub fn load(path: &Path) -> Result<model::Config, ConfigError> {
    load_with(path, &LoadOptions::default()).map(|l| l.config)
}

/// [`load`] with the command line's prefix and `-g` directives.
pub fn load_with(path: &Path, options: &LoadOptions) -> Result<Loaded, ConfigError> {
    let parsed = parser::parse_with(path, options.params.as_deref())?;
    let config = build::build(&parsed.tree, &options.prefix)?;
    Ok(Loaded {
        config,
        files: parsed.files,
    })
}

/// Reads `text` as the content of the config file `path` (which need not exist; includes are still read from disk,
/// relative to `path`'s directory).
pub fn parse_str(text: &str, path: &Path) -> Result<model::Config, ConfigError> {
    let tree = parser::parse_text(text.as_bytes(), path);
    build::build(&tree, Path::new(""))
}

/// The charsets and `charset_map` tables of `block` (an http block's inside), for other modules' unit tests.
#[cfg(test)]
pub fn load_charsets_for_tests(block: &parser::Block) -> charset::Charsets {
    build::charset_tables_for_tests(block)
}
