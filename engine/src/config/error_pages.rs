//! What a level's `error_page` lines, `recursive_error_pages` and `proxy_intercept_errors` say, as nginx's core and
//! proxy modules keep them (`ngx_http_err_page_t`): per status, the page to go to and the status to answer with.

use crate::config::key::KeyTemplate;

/// The status an error page answers with (nginx's `overwrite`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overwrite {
    /// No `=`: the error's own status (nginx's -1; 400 for 494, 495, 496 and 497).
    Keep,
    /// `=` alone (or `=0`): the status of the page's own answer.
    Answer,
    /// `=CODE`.
    Code(u16),
}

/// One status of an `error_page` line.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorPage {
    pub status: u16,
    pub overwrite: Overwrite,
    /// The URI, `@name` or URL (nginx's complex value).
    pub value: KeyTemplate,
    /// The arguments after `?` of a URI without variables (split at load, as nginx does).
    pub args: Option<String>,
}

/// The error page settings of a location (or a server outside its locations), inherited http -> server ->
/// location: a level with its own `error_page` lines replaces the lines it would inherit.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorPagesConf {
    /// In config order; the first line naming a status wins (nginx scans its array in order).
    pub pages: Vec<ErrorPage>,
    /// `recursive_error_pages on`: an error page's own errors go to error pages too (default off).
    pub recursive: bool,
    /// `proxy_intercept_errors on`: an upstream answer of 300 or more with an error page for its status is
    /// replaced by that page (default off).
    pub intercept: bool,
    /// An upstream's `X-Accel-Redirect` is followed (an internal redirect); off with `proxy_ignore_headers
    /// X-Accel-Redirect`.
    pub accel_redirect: bool,
    /// An upstream's `X-Accel-Charset` names the answer's charset; off with `proxy_ignore_headers
    /// X-Accel-Charset`.
    pub accel_charset: bool,
    /// An upstream's `X-Accel-Buffering` turns `proxy_buffering` off or on for its answer; off with
    /// `proxy_ignore_headers X-Accel-Buffering`.
    pub accel_buffering: bool,
}

impl Default for ErrorPagesConf {
    fn default() -> Self {
        ErrorPagesConf {
            pages: Vec::new(),
            recursive: false,
            intercept: false,
            accel_redirect: true,
            accel_charset: true,
            accel_buffering: true,
        }
    }
}

impl ErrorPagesConf {
    /// The page for `status`, if a line names it.
    pub fn page(&self, status: u16) -> Option<&ErrorPage> {
        self.pages.iter().find(|p| p.status == status)
    }
}
