//! The rewrite module's directives of a server or location in the model (`ngx_http_rewrite_module`): the script
//! nginx runs in its rewrite phase, in config order.

use super::key::{KeyTemplate, Var};
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
    /// `rewrite REGEX REPLACEMENT [FLAG]`: when the URI matches, it becomes the replacement (or, for a redirect,
    /// the answer's `Location`).
    Rewrite {
        regex: Regex,
        replacement: Vec<Piece>,
        flag: RewriteFlag,
        /// The replacement ended in `?`: the request's arguments are not appended.
        drop_args: bool,
    },
    /// `set $name VALUE`: the variable takes the value (text, variables, `$1`..`$9` of the last regex match).
    Set { target: SetTarget, value: Vec<Piece> },
}

/// The variable a `set` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetTarget {
    /// A user variable: index into the block's `set` names ([`super::key::Var::User`]).
    User(usize),
    /// `$limit_rate`: the value is read as a size (`12k`); one that is not leaves the rate as it was.
    LimitRate,
}

/// A piece of a `rewrite` replacement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(Vec<u8>),
    /// `$1`..`$9`, or a named group of the regex (`$name`).
    Capture(usize),
    Var(Var),
}

/// What a `rewrite` does once the URI is replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewriteFlag {
    /// No flag: the script goes on; a location is searched again for the new URI after it.
    Next,
    /// `last`: the script stops and a location is searched again for the new URI.
    Last,
    /// `break`: the script stops; the request stays in its location with the new URI.
    Break,
    /// `redirect` (302), `permanent` (301), or a replacement starting with `http://`, `https://` or `$scheme`
    /// (302): the answer, with the replacement as `Location`.
    Redirect(u16),
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
