//! A level's `allow`/`deny`, ready for the access phase: the rules and the 403 answer a forbidden request gets.

use super::headers::HeadersPlan;
use super::route::FixedAnswer;
use crate::config::access::AccessRules;
use crate::config::headers::ServerTokens;
use std::net::SocketAddr;
use std::sync::Arc;

/// The rules of one location (or of a server's requests outside any location).
#[derive(Debug, Clone)]
pub struct AccessPlan {
    rules: Arc<AccessRules>,
    /// nginx's 403 page with the level's `add_header`s, a special response (`error_page 403` applies).
    pub forbidden: FixedAnswer,
}

impl AccessPlan {
    /// The plan of `rules`, answering with the level's `headers` and `server_tokens`.
    pub fn new(rules: &Arc<AccessRules>, tokens: ServerTokens, headers: &HeadersPlan) -> Box<AccessPlan> {
        Box::new(AccessPlan {
            rules: Arc::clone(rules),
            forbidden: FixedAnswer::error(403, tokens).with_headers(headers.clone()),
        })
    }

    /// The 403 answer if the rules forbid `client`, with nginx's error-log line.
    pub fn check(&self, client: SocketAddr) -> Option<&FixedAnswer> {
        if !self.rules.denies(client) {
            return None;
        }
        crate::log_error!(
            "access forbidden by rule, client: {}",
            crate::config::unix_addr::Ip(&client)
        );
        Some(&self.forbidden)
    }
}
