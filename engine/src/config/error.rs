//! Config errors, displayed in nginx's words: `[emerg] MESSAGE in FILE:LINE` (without nginx's `nginx: ` prefix).

use super::model::Span;
use std::fmt;
use std::path::{Path, PathBuf};

/// Why a config was refused. Every variant but a failed open of the main file carries the place it points at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The text is not nginx syntax: a token out of place, an unclosed block or quote (nginx's `ngx_conf_read_token`
    /// and `ngx_conf_parse` messages).
    #[error("[emerg] {msg} in {at}")]
    Syntax { msg: String, at: Span },
    /// A directive name nginx does not have.
    #[error("[emerg] unknown directive \"{name}\" in {at}")]
    UnknownDirective { name: String, at: Span },
    /// A directive nginx has, used in a context where nginx does not allow it.
    #[error("[emerg] \"{name}\" directive is not allowed here in {at}")]
    NotAllowedHere { name: String, at: Span },
    /// A directive nginx has in this context, but corelb does not implement.
    #[error("[emerg] \"{name}\" directive is not supported by corelb in {at}")]
    Unsupported { name: String, at: Span },
    /// A directive or one of its arguments is wrong; `msg` is nginx's message for it.
    #[error("[emerg] {msg} in {at}")]
    Invalid { msg: String, at: Span },
    /// A check nginx makes after the whole configuration is read (a module's postconfiguration), which names no
    /// place.
    #[error("[emerg] {msg}")]
    Emerg { msg: String },
    /// A file could not be opened or read: the main config (`at` is `None`) or an included one (`at` is the
    /// `include` directive).
    #[error("[emerg] {call}() \"{path}\" failed ({reason}){at}", path = .path.display())]
    Io {
        call: &'static str,
        path: PathBuf,
        reason: String,
        at: InFile,
    },
}

/// An optional ` in FILE:LINE` suffix.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InFile(pub Option<Span>);

impl fmt::Display for InFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(span) => write!(f, " in {span}"),
            None => Ok(()),
        }
    }
}

impl ConfigError {
    /// An `Invalid` error with nginx's message `msg` at `at`.
    pub fn invalid(msg: impl Into<String>, at: &Span) -> ConfigError {
        ConfigError::Invalid {
            msg: msg.into(),
            at: at.clone(),
        }
    }

    /// A `Syntax` error with nginx's message `msg` at `at`.
    pub fn syntax(msg: impl Into<String>, at: Span) -> ConfigError {
        ConfigError::Syntax { msg: msg.into(), at }
    }

    /// An I/O error of `call` (`open`, `read`, `glob`) on `path`, in nginx's `(ERRNO: TEXT)` form.
    pub fn io(call: &'static str, path: &Path, err: &std::io::Error, at: Option<Span>) -> ConfigError {
        ConfigError::Io {
            call,
            path: path.to_path_buf(),
            reason: errno_text(err),
            at: InFile(at),
        }
    }

    /// The place the error points at.
    fn span(&self) -> Option<&Span> {
        match self {
            ConfigError::Syntax { at, .. }
            | ConfigError::UnknownDirective { at, .. }
            | ConfigError::NotAllowedHere { at, .. }
            | ConfigError::Unsupported { at, .. }
            | ConfigError::Invalid { at, .. } => Some(at),
            ConfigError::Io { at, .. } => at.0.as_ref(),
            ConfigError::Emerg { .. } => None,
        }
    }

    /// The line the error points at (`None` only when the main file itself could not be read).
    pub fn line(&self) -> Option<usize> {
        self.span().map(|s| s.line)
    }

    /// The file the error points at: the file holding the bad directive, or the main file that could not be read.
    pub fn file(&self) -> Option<&Path> {
        match self {
            ConfigError::Io {
                path, at: InFile(None), ..
            } => Some(path),
            other => other.span().map(|s| s.file.as_path()),
        }
    }
}

pub use crate::log::errno_text;

#[cfg(test)]
mod tests {
    use super::*;

    fn at(line: usize) -> Span {
        Span {
            file: PathBuf::from("/etc/corelb.conf"),
            line,
        }
    }

    #[test]
    fn displays_in_nginx_form() {
        let e = ConfigError::UnknownDirective {
            name: "foo".into(),
            at: at(12),
        };
        assert_eq!(
            e.to_string(),
            "[emerg] unknown directive \"foo\" in /etc/corelb.conf:12"
        );
        assert_eq!(e.line(), Some(12));
        assert_eq!(e.file(), Some(Path::new("/etc/corelb.conf")));
        let e = ConfigError::Unsupported {
            name: "gzip".into(),
            at: at(3),
        };
        assert_eq!(
            e.to_string(),
            "[emerg] \"gzip\" directive is not supported by corelb in /etc/corelb.conf:3"
        );
    }

    #[test]
    fn io_errors_look_like_nginx() {
        let err = std::io::Error::from_raw_os_error(2);
        let e = ConfigError::io("open", Path::new("/x/y.conf"), &err, None);
        assert_eq!(
            e.to_string(),
            "[emerg] open() \"/x/y.conf\" failed (2: No such file or directory)"
        );
        assert_eq!(e.line(), None);
        assert_eq!(e.file(), Some(Path::new("/x/y.conf")));
        let e = ConfigError::io("open", Path::new("/x/y.conf"), &err, Some(at(4)));
        assert_eq!(
            e.to_string(),
            "[emerg] open() \"/x/y.conf\" failed (2: No such file or directory) in /etc/corelb.conf:4"
        );
        assert_eq!(e.line(), Some(4));
        assert_eq!(e.file(), Some(Path::new("/etc/corelb.conf")));
    }
}
