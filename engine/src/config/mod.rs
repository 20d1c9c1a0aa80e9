//! nginx-syntax configuration: lexer, parser, the typed model and its checks.

pub mod key;
pub mod model;
