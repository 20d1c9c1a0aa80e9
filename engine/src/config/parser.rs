//! The generic directive tree (name, arguments, place, optional block), with `include` expanded in place as nginx
//! does: relative paths resolve against the main file's directory, and patterns with `*?[` are globbed (sorted,
//! leading dots literal, no match is no error). Directives given with `-g` come first, as nginx reads them before
//! the file.
//!
//! A syntax error does not throw the tree away: the directives read before it stay, and the block it cut short
//! carries the error as its `close`. The builder walks the tree in document order, so it reports whichever comes
//! first, a bad directive or the syntax error, as nginx (which checks each directive as it reads it) does.

use super::error::ConfigError;
use super::lexer::{Lexer, Terminator, Token};
use super::model::Span;
use std::cell::RefCell;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Blocks deeper than this are refused (nginx has no limit; corelb keeps its recursion bounded).
pub const MAX_BLOCK_DEPTH: usize = 64;
/// `include`s nested deeper than this are refused (nginx would run out of file descriptors on a loop).
pub const MAX_INCLUDE_DEPTH: usize = 32;

/// One directive: `name args...;` or `name args... { block }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    pub name: String,
    pub args: Vec<String>,
    /// The file, and the line of the `;` or `{` that ended the directive (the line nginx reports).
    pub span: Span,
    pub block: Option<Block>,
}

#[cfg(test)]
impl Directive {
    /// A directive without a block at `t.conf:3`, for the config builders' unit tests (their messages say
    /// `in t.conf:3`).
    pub fn at_t_conf(name: &str, args: &[&str]) -> Directive {
        Directive {
            name: name.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            span: Span {
                file: std::path::PathBuf::from("t.conf"),
                line: 3,
            },
            block: None,
        }
    }
}

/// The directives of a block (or of the whole file) and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub items: Vec<Directive>,
    /// Where the closing `}` (or the end of the main file) is; or the error that cut the block short, which comes
    /// after every item in document order.
    pub close: Result<Span, ConfigError>,
}

/// Whether a token stream is a whole file or the inside of a `{ }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Block,
}

/// Reads and includes files relative to one prefix.
#[derive(Debug)]
struct Parser {
    /// The directory of the main file: nginx's conf prefix.
    prefix: PathBuf,
    /// Every file read, once each, in the order first read, with its text.
    files: RefCell<Vec<(PathBuf, Vec<u8>)>>,
}

/// A parsed config: the tree, and the files it was read from (the main one first, then each included file once,
/// in the order first read, with its text: what `nginx -T` dumps).
#[derive(Debug)]
pub struct Parsed {
    pub tree: Block,
    pub files: Vec<(PathBuf, Vec<u8>)>,
}

/// Parses the file at `path` and its includes.
pub fn parse_file(path: &Path) -> Result<Block, ConfigError> {
    parse_with(path, None).map(|p| p.tree)
}

/// Parses `params` (the `-g` directives, if any: main-context directives without blocks, placed `in command
/// line`), then the file at `path` and its includes, into one tree, as nginx reads `-g` before the file.
pub fn parse_with(path: &Path, params: Option<&str>) -> Result<Parsed, ConfigError> {
    let parser = Parser::of(path);
    let mut items = Vec::new();
    if let Some(params) = params {
        if let Err(e) = parser.parse_params(params.as_bytes(), &mut items) {
            let tree = Block { items, close: Err(e) };
            return Ok(parser.parsed(tree));
        }
    }
    let text = read_file(path, None)?;
    parser.note_file(path, &text);
    let mut lexer = Lexer::new(&text);
    let close = parser.parse_into(&mut lexer, path, Kind::File, 0, 0, &mut items);
    Ok(parser.parsed(Block { items, close }))
}

/// Parses `text` as the content of the file `path` (includes are read from disk, relative to `path`'s directory).
pub fn parse_text(text: &[u8], path: &Path) -> Block {
    let parser = Parser::of(path);
    let mut items = Vec::new();
    let mut lexer = Lexer::new(text);
    let close = parser.parse_into(&mut lexer, path, Kind::File, 0, 0, &mut items);
    Block { items, close }
}

/// Reads a whole file, with nginx's `open()` / `pread()` messages on failure.
fn read_file(path: &Path, at: Option<&Span>) -> Result<Vec<u8>, ConfigError> {
    let mut file = std::fs::File::open(path).map_err(|e| ConfigError::io("open", path, &e, at.cloned()))?;
    let mut text = Vec::new();
    file.read_to_end(&mut text)
        .map_err(|e| ConfigError::io("pread", path, &e, at.cloned()))?;
    Ok(text)
}

impl Parser {
    fn of(main: &Path) -> Parser {
        Parser {
            prefix: main.parent().map(Path::to_path_buf).unwrap_or_default(),
            files: RefCell::new(Vec::new()),
        }
    }

    fn parsed(self, tree: Block) -> Parsed {
        Parsed {
            tree,
            files: self.files.into_inner(),
        }
    }

    /// Records a file read (nginx dumps each file once, under the name it was first read by).
    fn note_file(&self, path: &Path, text: &[u8]) {
        let mut files = self.files.borrow_mut();
        if !files.iter().any(|(p, _)| p == path) {
            files.push((path.to_path_buf(), text.to_vec()));
        }
    }

    /// The `-g` text, as nginx's `ngx_conf_param` reads it: directives end with `;`, blocks are refused, and the
    /// end of the text inside a directive is `unexpected end of parameter`.
    fn parse_params(&self, text: &[u8], items: &mut Vec<Directive>) -> Result<(), ConfigError> {
        let at = Span::command_line();
        let mut lexer = Lexer::new(text);
        loop {
            let token = lexer.next_token().map_err(|e| {
                let msg = if e.msg.starts_with("unexpected end of file") {
                    "unexpected end of parameter, expecting \";\"".to_string()
                } else {
                    e.msg
                };
                ConfigError::syntax(msg, at.clone())
            })?;
            let (mut words, end) = match token {
                Token::Eof { .. } => return Ok(()),
                Token::BlockEnd { .. } => return Err(ConfigError::syntax("unexpected \"}\"", at)),
                Token::Directive { words, end, .. } => (words, end),
            };
            if end == Terminator::BlockStart {
                return Err(ConfigError::syntax(
                    "block directives are not supported in -g option",
                    at,
                ));
            }
            let name = if words.is_empty() {
                String::new()
            } else {
                words.remove(0)
            };
            if name == "include" {
                self.include(&words, end, &at, 0, 0, items)?;
                continue;
            }
            items.push(Directive {
                name,
                args: words,
                span: at.clone(),
                block: None,
            });
        }
    }

    /// Reads directives into `items` until the end of the file (`Kind::File`) or the `}` (`Kind::Block`).
    fn parse_into(
        &self,
        lexer: &mut Lexer<'_>,
        file: &Path,
        kind: Kind,
        depth: usize,
        includes: usize,
        items: &mut Vec<Directive>,
    ) -> Result<Span, ConfigError> {
        let at = |line: usize| Span {
            file: file.to_path_buf(),
            line,
        };
        loop {
            let token = lexer.next_token().map_err(|e| ConfigError::syntax(e.msg, at(e.line)))?;
            let (mut words, end, line) = match token {
                Token::Eof { line } if kind == Kind::Block => {
                    return Err(ConfigError::syntax("unexpected end of file, expecting \"}\"", at(line)));
                }
                Token::BlockEnd { line } if kind == Kind::File => {
                    return Err(ConfigError::syntax("unexpected \"}\"", at(line)));
                }
                Token::Eof { line } | Token::BlockEnd { line } => return Ok(at(line)),
                Token::Directive { words, end, line } => (words, end, line),
            };
            let span = at(line);
            let name = if words.is_empty() {
                String::new()
            } else {
                words.remove(0)
            };
            if name == "include" {
                self.include(&words, end, &span, depth, includes, items)?;
                continue;
            }
            let block = match end {
                Terminator::Semicolon => None,
                Terminator::BlockStart => {
                    if depth >= MAX_BLOCK_DEPTH {
                        let msg = format!("blocks nested deeper than {MAX_BLOCK_DEPTH} levels");
                        return Err(ConfigError::syntax(msg, span));
                    }
                    let mut inner = Vec::new();
                    let close = self.parse_into(lexer, file, Kind::Block, depth + 1, includes, &mut inner);
                    Some(Block { items: inner, close })
                }
            };
            let cut = block.as_ref().and_then(|b| b.close.clone().err());
            items.push(Directive {
                name,
                args: words,
                span,
                block,
            });
            if let Some(err) = cut {
                return Err(err);
            }
        }
    }

    /// `include FILE|PATTERN;`: the included directives go into `items` where the `include` was.
    fn include(
        &self,
        args: &[String],
        end: Terminator,
        span: &Span,
        depth: usize,
        includes: usize,
        items: &mut Vec<Directive>,
    ) -> Result<(), ConfigError> {
        if end == Terminator::BlockStart {
            return Err(ConfigError::invalid(
                "directive \"include\" is not terminated by \";\"",
                span,
            ));
        }
        let [arg] = args else {
            return Err(ConfigError::invalid(
                "invalid number of arguments in \"include\" directive",
                span,
            ));
        };
        if includes >= MAX_INCLUDE_DEPTH {
            let msg = format!("includes nested deeper than {MAX_INCLUDE_DEPTH} levels at \"{arg}\"");
            return Err(ConfigError::invalid(msg, span));
        }
        let full = self.prefix.join(arg);
        if !full.to_string_lossy().contains(['*', '?', '[']) {
            return self.include_file(&full, span, depth, includes, items);
        }
        for path in glob_sorted(&full, span)? {
            self.include_file(&path, span, depth, includes, items)?;
        }
        Ok(())
    }

    fn include_file(
        &self,
        path: &Path,
        span: &Span,
        depth: usize,
        includes: usize,
        items: &mut Vec<Directive>,
    ) -> Result<(), ConfigError> {
        let text = read_file(path, Some(span))?;
        self.note_file(path, &text);
        let mut lexer = Lexer::new(&text);
        self.parse_into(&mut lexer, path, Kind::File, depth, includes + 1, items)
            .map(|_| ())
    }
}

/// The paths matching `pattern`, sorted byte-wise as glob(3) in the C locale sorts them.
fn glob_sorted(pattern: &Path, span: &Span) -> Result<Vec<PathBuf>, ConfigError> {
    let options = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: true,
        require_literal_leading_dot: true,
    };
    let text = pattern.to_string_lossy();
    let paths = glob::glob_with(&text, options).map_err(|e| ConfigError::Io {
        call: "glob",
        path: pattern.to_path_buf(),
        reason: e.msg.to_string(),
        at: super::error::InFile(Some(span.clone())),
    })?;
    // Unreadable directories are skipped, as glob(3) without GLOB_ERR does.
    let mut found: Vec<PathBuf> = paths.filter_map(Result::ok).collect();
    found.sort_by(|a, b| a.as_os_str().as_encoded_bytes().cmp(b.as_os_str().as_encoded_bytes()));
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Block {
        parse_text(text.as_bytes(), Path::new("/nonexistent-dir/t.conf"))
    }

    #[test]
    fn builds_the_tree() {
        let b = parse("a 1;\nb {\n  c \"x y\";\n}\n");
        assert_eq!(b.close.as_ref().map(|s| s.line), Ok(5));
        assert_eq!(b.items.len(), 2);
        assert_eq!(b.items[0].name, "a");
        assert_eq!(b.items[0].args, ["1"]);
        let inner = b.items[1].block.as_ref().unwrap();
        assert_eq!(inner.items[0].args, ["x y"]);
        assert_eq!(inner.items[0].span.line, 3);
        assert_eq!(inner.close.as_ref().map(|s| s.line), Ok(4));
    }

    #[test]
    fn keeps_directives_before_a_syntax_error() {
        let b = parse("a;\nb {\n c;\n");
        let err = b.close.unwrap_err();
        assert_eq!(
            err.to_string(),
            "[emerg] unexpected end of file, expecting \"}\" in /nonexistent-dir/t.conf:4"
        );
        assert_eq!(b.items.len(), 2);
        assert_eq!(b.items[1].block.as_ref().unwrap().items[0].name, "c");
        let b = parse("a;\n}\n");
        assert_eq!(
            b.close.unwrap_err().to_string(),
            "[emerg] unexpected \"}\" in /nonexistent-dir/t.conf:2"
        );
    }

    #[test]
    fn include_errors() {
        let b = parse("include;");
        assert_eq!(
            b.close.unwrap_err().to_string(),
            "[emerg] invalid number of arguments in \"include\" directive in /nonexistent-dir/t.conf:1"
        );
        let b = parse("include a {");
        assert_eq!(
            b.close.unwrap_err().to_string(),
            "[emerg] directive \"include\" is not terminated by \";\" in /nonexistent-dir/t.conf:1"
        );
        let b = parse("\ninclude x.conf;");
        assert_eq!(
            b.close.unwrap_err().to_string(),
            "[emerg] open() \"/nonexistent-dir/x.conf\" failed (2: No such file or directory) in \
             /nonexistent-dir/t.conf:2"
        );
        // A glob that matches nothing is not an error.
        assert!(parse("include *.conf;").close.is_ok());
    }

    #[test]
    fn refuses_runaway_nesting() {
        let deep = "a {".repeat(MAX_BLOCK_DEPTH + 1);
        let err = parse(&deep).close.unwrap_err();
        assert_eq!(err.line(), Some(1));
        assert!(err.to_string().contains("nested deeper"), "{err}");
        let fine = format!("{}{}", "a {".repeat(MAX_BLOCK_DEPTH), "}".repeat(MAX_BLOCK_DEPTH));
        assert!(parse(&fine).close.is_ok());
    }
}
