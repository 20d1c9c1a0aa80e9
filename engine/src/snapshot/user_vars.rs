//! The names a snapshot resolves the config's raw values with (a `return` text, a script's answers): the http
//! block's `map` variables, then its `set` variables, then the built-in ones, as the config builder resolved them;
//! and the block's upstreams, which a `proxy_pass` URL with variables names at request time.

use crate::config::key::Var;
use crate::config::map::Map;

/// The variables of one http block.
#[derive(Debug, Clone, Copy, Default)]
pub struct Names<'a> {
    pub maps: &'a [Map],
    /// The `set` names, lower-case ([`Var::User`] indexes them).
    pub users: &'a [String],
    /// The block's upstreams, in the order of the snapshot's http plans.
    pub upstreams: &'a [crate::config::model::UpstreamConf],
    /// The named groups of the block's regex server names ([`Var::ServerCapture`] indexes them).
    pub server_groups: &'a [String],
    /// The block's charsets and `charset_map` tables.
    pub charsets: Option<&'a std::sync::Arc<crate::config::charset::Charsets>>,
}

impl Names<'_> {
    /// The variable `name` means in the block.
    pub fn resolve(&self, name: &str) -> Option<Var> {
        let lower = name.to_ascii_lowercase();
        if let Some(i) = self.maps.iter().rposition(|m| m.name == lower) {
            return Some(Var::Map(i));
        }
        if let Some(i) = self.users.iter().position(|u| *u == lower) {
            return Some(Var::User(i));
        }
        if let Some(i) = self.server_groups.iter().position(|g| g == name) {
            return Some(Var::ServerCapture(i));
        }
        // `$1`..`$9`, and (the config builder having refused every name it did not know) a regex's named group
        Var::from_name(&lower)
            .or_else(|| crate::config::var::capture_number(&lower).map(Var::Capture))
            .or_else(|| Some(Var::RegexCapture(name.to_string())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::key::KeyTemplate;

    #[test]
    fn maps_then_users_then_builtins() {
        let maps = [Map::new("m", KeyTemplate::literal(""))];
        let users = ["x".to_string(), "http_host".to_string()];
        let n = Names {
            maps: &maps,
            users: &users,
            upstreams: &[],
            server_groups: &[],
            charsets: None,
        };
        assert_eq!(n.resolve("M"), Some(Var::Map(0)));
        assert_eq!(n.resolve("X"), Some(Var::User(0)));
        assert_eq!(
            n.resolve("http_host"),
            Some(Var::User(1)),
            "a set hides the prefix variable"
        );
        assert_eq!(n.resolve("http_accept"), Some(Var::Http("accept".into())));
        assert_eq!(
            n.resolve("nope"),
            Some(Var::RegexCapture("nope".into())),
            "the builder refused unknown names"
        );
        assert_eq!(n.resolve("2"), Some(Var::Capture(2)));
    }
}
