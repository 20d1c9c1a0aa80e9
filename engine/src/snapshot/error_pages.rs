//! A location's error pages, compiled at load: per status, the page's URI, `@name` or URL, the status to answer
//! with, and (for a URL) the redirect answer with its page pre-rendered. A location without `error_page` lines
//! has none (`None` in its plan), so its answers never look.

use super::headers::HeadersPlan;
use super::route::FixedAnswer;
use crate::config::error_pages::{ErrorPagesConf, Overwrite};
use crate::config::headers::ServerTokens;
use crate::config::key::KeyTemplate;
use std::sync::Arc;

/// The error pages of one location (or of a server, outside its locations).
#[derive(Debug)]
pub struct ErrorPagesPlan {
    pages: Vec<PagePlan>,
    /// `recursive_error_pages`.
    pub recursive: bool,
    /// `proxy_intercept_errors`.
    pub intercept: bool,
    /// The index of the location in its server's plans (`None`: the server's own pages).
    pub location: Option<usize>,
}

/// One status's page.
#[derive(Debug)]
pub struct PagePlan {
    pub status: u16,
    pub overwrite: Overwrite,
    /// The URI, `@name` or URL, evaluated when the page is taken.
    pub value: KeyTemplate,
    /// `?ARGS` of a URI without variables (split at load, as nginx).
    pub args: Option<String>,
    /// The answer of a page that is a URL: nginx's 302, or the `=CODE` when it is a redirect code.
    pub redirect: FixedAnswer,
}

impl ErrorPagesPlan {
    /// The plan of `conf` for the location at `location` (answers with `headers` and `tokens`); `None` when it has
    /// no `error_page` lines.
    pub fn new(
        conf: &ErrorPagesConf,
        location: Option<usize>,
        tokens: ServerTokens,
        headers: &HeadersPlan,
    ) -> Option<Arc<ErrorPagesPlan>> {
        if conf.pages.is_empty() {
            return None;
        }
        let pages = conf
            .pages
            .iter()
            .map(|p| {
                let code = match p.overwrite {
                    Overwrite::Code(c @ (301 | 302 | 303 | 307 | 308)) => c,
                    _ => 302,
                };
                PagePlan {
                    status: p.status,
                    overwrite: p.overwrite,
                    value: p.value.clone(),
                    args: p.args.clone(),
                    redirect: FixedAnswer::error(code, tokens).with_headers(headers.clone()),
                }
            })
            .collect();
        Some(Arc::new(ErrorPagesPlan {
            pages,
            recursive: conf.recursive,
            intercept: conf.intercept,
            location,
        }))
    }

    /// The page for `status`, if a line names it (the first one, as nginx scans its lines in order).
    pub fn page(&self, status: u16) -> Option<&PagePlan> {
        self.pages.iter().find(|p| p.status == status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::error_pages::ErrorPage;

    fn page(status: u16, overwrite: Overwrite, value: &str) -> ErrorPage {
        ErrorPage {
            status,
            overwrite,
            value: KeyTemplate::compile(value).unwrap(),
            args: None,
        }
    }

    #[test]
    fn redirect_codes_and_lookup() {
        let conf = ErrorPagesConf {
            pages: vec![
                page(404, Overwrite::Keep, "http://a/"),
                page(404, Overwrite::Code(301), "/second"),
                page(500, Overwrite::Code(301), "http://b/"),
                page(502, Overwrite::Code(200), "http://c/"),
            ],
            recursive: false,
            intercept: true,
            accel_redirect: true,
            accel_charset: true,
            accel_buffering: true,
        };
        let plan = ErrorPagesPlan::new(&conf, Some(3), ServerTokens::Off, &HeadersPlan::default()).unwrap();
        assert_eq!(plan.page(404).map(|p| p.value.raw()), Some("http://a/"));
        assert_eq!(plan.page(404).map(|p| p.redirect.status), Some(302));
        assert_eq!(plan.page(500).map(|p| p.redirect.status), Some(301));
        assert_eq!(plan.page(502).map(|p| p.redirect.status), Some(302));
        assert!(plan.page(503).is_none());
        assert!(plan.intercept && !plan.recursive && plan.location == Some(3));
        let none = ErrorPagesConf::default();
        assert!(ErrorPagesPlan::new(&none, None, ServerTokens::Off, &HeadersPlan::default()).is_none());
    }
}
