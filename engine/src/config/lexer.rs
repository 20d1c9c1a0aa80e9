//! The tokenizer: a port of nginx's `ngx_conf_read_token`, one directive (its words and terminator) per call.
//!
//! Words are separated by whitespace; `;` ends a directive, `{` opens a block, `}` closes one; `#` at a word start
//! comments to the end of the line; `"..."` and `'...'` quote; a backslash protects the next character; `${` inside
//! a word does not open a block. Escapes are undone as nginx does: `\"`, `\'`, `\\` give the character, `\t`, `\r`,
//! `\n` give tab, CR and LF, and any other `\x` stays `\x`.

/// nginx reads a config through a 4 KiB buffer: a single word (or comment) that fills it is an error.
pub const CONF_BUFFER: usize = 4096;

/// How a directive's word list ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Terminator {
    /// `;`
    Semicolon,
    /// `{`
    BlockStart,
}

/// What one call reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    /// A directive's words (name first) and what ended them; `line` is where the terminator is, as nginx reports.
    Directive {
        words: Vec<String>,
        end: Terminator,
        line: usize,
    },
    /// A `}` at a directive start.
    BlockEnd { line: usize },
    /// The end of the text, between directives.
    Eof { line: usize },
}

/// A syntax error: nginx's message and the line it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexError {
    pub msg: String,
    pub line: usize,
}

/// The tokenizer's position in one file's text.
#[derive(Debug)]
pub struct Lexer<'a> {
    text: &'a [u8],
    pos: usize,
    line: usize,
}

/// nginx's flags while it scans one directive.
#[derive(Debug, Default)]
struct Scan {
    need_space: bool,
    last_space: bool,
    sharp_comment: bool,
    variable: bool,
    quoted: bool,
    s_quoted: bool,
    d_quoted: bool,
    /// Where the current word (or comment, or whitespace run) started, and on which line.
    start: usize,
    start_line: usize,
}

fn is_space(ch: u8) -> bool {
    matches!(ch, b' ' | b'\t' | b'\r' | b'\n')
}

/// `unexpected "c"` for a byte nginx did not expect.
fn unexpected(ch: u8, line: usize) -> LexError {
    LexError {
        msg: format!("unexpected \"{}\"", String::from_utf8_lossy(&[ch])),
        line,
    }
}

/// Undoes nginx's escapes in a word's raw bytes.
pub fn unescape(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while let Some(&c) = raw.get(i) {
        if c == b'\\' {
            match raw.get(i + 1) {
                Some(b'"' | b'\'' | b'\\') => i += 1,
                Some(b't') => {
                    out.push(b'\t');
                    i += 2;
                    continue;
                }
                Some(b'r') => {
                    out.push(b'\r');
                    i += 2;
                    continue;
                }
                Some(b'n') => {
                    out.push(b'\n');
                    i += 2;
                    continue;
                }
                _ => {}
            }
        }
        if let Some(&b) = raw.get(i) {
            out.push(b);
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl<'a> Lexer<'a> {
    /// A tokenizer at the start of `text` (line 1).
    pub fn new(text: &'a [u8]) -> Self {
        Lexer { text, pos: 0, line: 1 }
    }

    /// The current line.
    pub fn line(&self) -> usize {
        self.line
    }

    /// Reads the next directive, `}` or end of text.
    pub fn next_token(&mut self) -> Result<Token, LexError> {
        let mut words = Vec::new();
        let mut s = Scan {
            last_space: true,
            start: self.pos,
            start_line: self.line,
            ..Scan::default()
        };
        loop {
            let Some(&ch) = self.text.get(self.pos) else {
                if !words.is_empty() || !s.last_space {
                    return Err(LexError {
                        msg: "unexpected end of file, expecting \";\" or \"}\"".into(),
                        line: self.line,
                    });
                }
                return Ok(Token::Eof { line: self.line });
            };
            if self.pos - s.start >= CONF_BUFFER {
                return Err(too_long(&s, self.text));
            }
            self.pos += 1;
            if ch == b'\n' {
                self.line += 1;
                s.sharp_comment = false;
            }
            if s.sharp_comment {
                continue;
            }
            if s.quoted {
                s.quoted = false;
                continue;
            }
            if s.need_space {
                if is_space(ch) {
                    s.last_space = true;
                    s.need_space = false;
                    continue;
                }
                match ch {
                    b';' => return Ok(self.directive(words, Terminator::Semicolon)),
                    b'{' => return Ok(self.directive(words, Terminator::BlockStart)),
                    b')' => {
                        s.last_space = true;
                        s.need_space = false;
                    }
                    _ => return Err(unexpected(ch, self.line)),
                }
            }
            if s.last_space {
                if let Some(token) = self.word_start(ch, &mut s, &mut words)? {
                    return Ok(token);
                }
            } else if let Some(token) = self.in_word(ch, &mut s, &mut words) {
                return Ok(token);
            }
        }
    }

    fn directive(&self, words: Vec<String>, end: Terminator) -> Token {
        Token::Directive {
            words,
            end,
            line: self.line,
        }
    }

    /// A byte read between words: starts a word, a comment, or ends the directive.
    fn word_start(&mut self, ch: u8, s: &mut Scan, words: &mut Vec<String>) -> Result<Option<Token>, LexError> {
        s.start = self.pos - 1;
        s.start_line = self.line;
        if is_space(ch) {
            return Ok(None);
        }
        match ch {
            b';' | b'{' => {
                if words.is_empty() {
                    return Err(unexpected(ch, self.line));
                }
                let end = if ch == b'{' {
                    Terminator::BlockStart
                } else {
                    Terminator::Semicolon
                };
                return Ok(Some(self.directive(std::mem::take(words), end)));
            }
            b'}' => {
                if !words.is_empty() {
                    return Err(unexpected(b'}', self.line));
                }
                return Ok(Some(Token::BlockEnd { line: self.line }));
            }
            b'#' => s.sharp_comment = true,
            b'\\' => {
                s.quoted = true;
                s.last_space = false;
            }
            b'"' => {
                s.start += 1;
                s.d_quoted = true;
                s.last_space = false;
            }
            b'\'' => {
                s.start += 1;
                s.s_quoted = true;
                s.last_space = false;
            }
            b'$' => {
                s.variable = true;
                s.last_space = false;
            }
            _ => s.last_space = false,
        }
        Ok(None)
    }

    /// A byte read inside a word: may end the word (and the directive).
    fn in_word(&mut self, ch: u8, s: &mut Scan, words: &mut Vec<String>) -> Option<Token> {
        if ch == b'{' && s.variable {
            return None;
        }
        s.variable = false;
        if ch == b'\\' {
            s.quoted = true;
            return None;
        }
        if ch == b'$' {
            s.variable = true;
            return None;
        }
        let found = if s.d_quoted {
            let end = ch == b'"';
            if end {
                s.d_quoted = false;
                s.need_space = true;
            }
            end
        } else if s.s_quoted {
            let end = ch == b'\'';
            if end {
                s.s_quoted = false;
                s.need_space = true;
            }
            end
        } else {
            let end = is_space(ch) || ch == b';' || ch == b'{';
            if end {
                s.last_space = true;
            }
            end
        };
        if !found {
            return None;
        }
        let raw = self.text.get(s.start..self.pos - 1).unwrap_or_default();
        words.push(unescape(raw));
        match ch {
            b';' => Some(self.directive(std::mem::take(words), Terminator::Semicolon)),
            b'{' => Some(self.directive(std::mem::take(words), Terminator::BlockStart)),
            _ => None,
        }
    }
}

/// nginx's error for a word that filled its whole read buffer.
fn too_long(s: &Scan, text: &[u8]) -> LexError {
    let msg = if s.d_quoted {
        "too long parameter, probably missing terminating \"\"\" character".to_string()
    } else if s.s_quoted {
        "too long parameter, probably missing terminating \"'\" character".to_string()
    } else {
        let head = text.get(s.start..s.start + 10).unwrap_or_default();
        format!("too long parameter \"{}...\" started", String::from_utf8_lossy(head))
    };
    LexError {
        msg,
        line: s.start_line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str) -> Result<Vec<Token>, LexError> {
        let mut lx = Lexer::new(text.as_bytes());
        let mut out = Vec::new();
        loop {
            let t = lx.next_token()?;
            let eof = matches!(t, Token::Eof { .. });
            out.push(t);
            if eof {
                return Ok(out);
            }
        }
    }

    fn words(text: &str) -> Vec<String> {
        match Lexer::new(text.as_bytes()).next_token() {
            Ok(Token::Directive { words, .. }) => words,
            other => panic!("not a directive: {other:?}"),
        }
    }

    fn error(text: &str) -> (String, usize) {
        match tokens(text) {
            Err(e) => (e.msg, e.line),
            Ok(t) => panic!("no error: {t:?}"),
        }
    }

    #[test]
    fn splits_directives_blocks_and_lines() {
        let t = tokens("a b;\nc {\n d;\n}\n").unwrap();
        assert_eq!(
            t,
            vec![
                Token::Directive {
                    words: vec!["a".into(), "b".into()],
                    end: Terminator::Semicolon,
                    line: 1
                },
                Token::Directive {
                    words: vec!["c".into()],
                    end: Terminator::BlockStart,
                    line: 2
                },
                Token::Directive {
                    words: vec!["d".into()],
                    end: Terminator::Semicolon,
                    line: 3
                },
                Token::BlockEnd { line: 4 },
                Token::Eof { line: 5 },
            ]
        );
    }

    #[test]
    fn reports_the_terminator_line() {
        match Lexer::new(b"proxy_pass\n  http://x\n;").next_token() {
            Ok(Token::Directive { line, .. }) => assert_eq!(line, 3),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn quotes_and_escapes() {
        assert_eq!(words("a \"b c\" 'd;e' \"\";"), ["a", "b c", "d;e", ""]);
        assert_eq!(words(r#"a "x\"y" 'p\'q' "s\\t";"#), ["a", "x\"y", "p'q", "s\\t"]);
        assert_eq!(words(r#"a "1\t2\r3\n4" \x y\;z;"#), ["a", "1\t2\r3\n4", "\\x", "y\\;z"]);
        assert_eq!(words("a \"multi\nline\";"), ["a", "multi\nline"]);
        // A quote inside a word is an ordinary character.
        assert_eq!(words("a b\"c;"), ["a", "b\"c"]);
        // `)` right after a quoted word starts a new word, as nginx's `if (...)` needs.
        assert_eq!(words("if ($x = \"a\") {"), ["if", "($x", "=", "a", ")"]);
    }

    #[test]
    fn comments_only_at_word_start() {
        assert_eq!(words("# c1\na b#c; # tail\n"), ["a", "b#c"]);
        let t = tokens("# only a comment").unwrap();
        assert_eq!(t, vec![Token::Eof { line: 1 }]);
        assert_eq!(words("a \"#x\";"), ["a", "#x"]);
    }

    #[test]
    fn variables_with_braces_stay_in_the_word() {
        assert_eq!(words("set a${b}c;"), ["set", "a${b}c"]);
        assert_eq!(words("x ${host}{"), ["x", "${host}"]);
        // `}` inside a word is an ordinary character.
        assert_eq!(words("a b}c;"), ["a", "b}c"]);
    }

    #[test]
    fn nginx_syntax_errors() {
        assert_eq!(error("a b }"), ("unexpected \"}\"".into(), 1));
        assert_eq!(error("\n;"), ("unexpected \";\"".into(), 2));
        assert_eq!(error("{"), ("unexpected \"{\"".into(), 1));
        assert_eq!(error("a \"b\"c;"), ("unexpected \"c\"".into(), 1));
        assert_eq!(error("a \"b\"}"), ("unexpected \"}\"".into(), 1));
        assert_eq!(
            error("a b\n\n"),
            ("unexpected end of file, expecting \";\" or \"}\"".into(), 3)
        );
        assert_eq!(
            error("a \"open\n"),
            ("unexpected end of file, expecting \";\" or \"}\"".into(), 2)
        );
        assert_eq!(
            error("a \\"),
            ("unexpected end of file, expecting \";\" or \"}\"".into(), 1)
        );
    }

    #[test]
    fn too_long_words_as_nginx() {
        let long = "x".repeat(CONF_BUFFER);
        let (msg, line) = error(&format!("a\n{long};"));
        assert_eq!(msg, "too long parameter \"xxxxxxxxxx...\" started");
        assert_eq!(line, 2);
        let (msg, _) = error(&format!("a \"{long}\";"));
        assert_eq!(msg, "too long parameter, probably missing terminating \"\"\" character");
        let (msg, _) = error(&format!("#{long}\n"));
        assert_eq!(msg, "too long parameter \"#xxxxxxxxx...\" started");
        // One byte short of the buffer is fine, and so is a long word that ends the text.
        let ok = "y".repeat(CONF_BUFFER - 1);
        assert_eq!(words(&format!("{ok};"))[0].len(), CONF_BUFFER - 1);
        assert!(tokens(&format!("#{}", "x".repeat(CONF_BUFFER - 1))).is_ok());
        // A comment that fills the buffer is refused even at the end of the text, as nginx's refill does.
        assert!(tokens(&format!("#{long}")).is_err());
    }
}
