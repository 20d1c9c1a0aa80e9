//! The rewrite module's directives of a server or location in the model (`ngx_http_rewrite_module`): the script
//! nginx runs in its rewrite phase, in config order.

use super::key::KeyTemplate;
use super::model::Return;
use super::regex::Regex;

/// One directive of a rewrite script.
#[derive(Debug, Clone, PartialEq)]
pub enum RewriteOp {
    /// `return CODE [TEXT]` / `return URL`: answers, ending the script.
    Return(Return),
    /// `break`: ends the script; the request goes on in the location it is in.
    Break,
    /// `if (COND) { ... }`: the block's directives run when the condition holds, then the script goes on after
    /// the block (nginx compiles both into one code array).
    If { cond: Cond, then: Vec<RewriteOp> },
}

/// The condition of an `if`.
#[derive(Debug, Clone, PartialEq)]
pub enum Cond {
    /// `($var)`: true unless the value is empty or `0`.
    Var(KeyTemplate),
    /// `($var = VALUE)`, `($var != VALUE)` (`negate`): byte-exact comparison.
    Equals {
        value: KeyTemplate,
        to: KeyTemplate,
        negate: bool,
    },
    /// `($var ~ RE)`, `~*`, `!~`, `!~*` (`negate`); a match sets the captures.
    Matches {
        value: KeyTemplate,
        regex: Regex,
        negate: bool,
    },
    /// `(-f PATH)`, `-d`, `-e`, `-x` and their `!` forms (`negate`).
    File {
        path: KeyTemplate,
        test: FileTest,
        negate: bool,
    },
}

/// What an `if (-X PATH)` asks of a path (following symlinks, as nginx's `stat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileTest {
    /// `-f`: a regular file.
    Plain,
    /// `-d`: a directory.
    Dir,
    /// `-e`: a file, directory or symlink.
    Exists,
    /// `-x`: anything with an execute bit set.
    Exec,
}
