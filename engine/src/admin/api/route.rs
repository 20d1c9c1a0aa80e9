//! The API's paths: what a request path names, after the `api` location's prefix.

use crate::config::model::AdminEndpoint;
use crate::snapshot::Snapshot;

/// The API version corelb serves.
pub const VERSION: &str = "9";

/// The `http` or the `stream` block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    Http,
    Stream,
}

/// What a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// `/api/`: the versions served.
    Versions,
    /// `/api/9`: the root endpoints.
    Root,
    /// `/api/9/nginx`.
    Nginx,
    /// `/api/9/http`, `/api/9/stream`.
    BlockRoot(Block),
    /// `/api/9/http/upstreams`.
    Upstreams(Block),
    /// `/api/9/http/upstreams/NAME`.
    Upstream(Block, &'a str),
    /// `/api/9/http/upstreams/NAME/servers`.
    Servers(Block, &'a str),
    /// `/api/9/http/upstreams/NAME/servers/ID` (the id as written).
    Server(Block, &'a str, &'a str),
}

/// Why a path names nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteError {
    UnknownVersion,
    PathNotFound,
}

/// The prefix of the `api` location `path` reached: the longest `api` location prefix (or exact path) of any
/// server that `path` starts with. `/` when none matches (the request reached an `api` location, so one does).
pub fn api_prefix<'s>(snap: &'s Snapshot, path: &str) -> &'s str {
    let mut best = "/";
    for server in &snap.servers {
        let exact = server.exact.iter().filter(|(p, _)| p == path);
        let prefixes = server.prefixes.iter().filter(|(p, _)| path.starts_with(p.as_str()));
        for (p, i) in exact.chain(prefixes) {
            let is_api = server
                .locations
                .get(*i)
                .is_some_and(|l| matches!(l.admin, Some(AdminEndpoint::Api { .. })));
            if is_api && p.len() > best.len() {
                best = p;
            }
        }
    }
    best
}

/// What `rest` (the path after the location prefix) names. Empty segments (`//`, a trailing `/`) are skipped,
/// as nginx merges slashes.
pub fn parse(rest: &str) -> Result<Target<'_>, RouteError> {
    let mut parts = rest.split('/').filter(|s| !s.is_empty());
    let Some(version) = parts.next() else {
        return Ok(Target::Versions);
    };
    if version != VERSION {
        return Err(RouteError::UnknownVersion);
    }
    let segments: Vec<&str> = parts.collect();
    let block = |s: &str| match s {
        "http" => Some(Block::Http),
        "stream" => Some(Block::Stream),
        _ => None,
    };
    let target = match segments.as_slice() {
        [] => Target::Root,
        ["nginx"] => Target::Nginx,
        [b] => Target::BlockRoot(block(b).ok_or(RouteError::PathNotFound)?),
        [b, "upstreams"] => Target::Upstreams(block(b).ok_or(RouteError::PathNotFound)?),
        [b, "upstreams", name] => Target::Upstream(block(b).ok_or(RouteError::PathNotFound)?, name),
        [b, "upstreams", name, "servers"] => Target::Servers(block(b).ok_or(RouteError::PathNotFound)?, name),
        [b, "upstreams", name, "servers", id] => Target::Server(block(b).ok_or(RouteError::PathNotFound)?, name, id),
        _ => return Err(RouteError::PathNotFound),
    };
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Block::*;

    #[test]
    fn paths_name_targets() {
        assert_eq!(parse(""), Ok(Target::Versions));
        assert_eq!(parse("/"), Ok(Target::Versions));
        assert_eq!(parse("9"), Ok(Target::Root));
        assert_eq!(parse("9/"), Ok(Target::Root));
        assert_eq!(parse("9/nginx"), Ok(Target::Nginx));
        assert_eq!(parse("9/stream"), Ok(Target::BlockRoot(Stream)));
        assert_eq!(parse("9/http/upstreams/"), Ok(Target::Upstreams(Http)));
        assert_eq!(parse("9//http//upstreams/b"), Ok(Target::Upstream(Http, "b")));
        assert_eq!(parse("9/stream/upstreams/b/servers"), Ok(Target::Servers(Stream, "b")));
        assert_eq!(
            parse("9/http/upstreams/b/servers/3"),
            Ok(Target::Server(Http, "b", "3"))
        );
    }

    #[test]
    fn unknown_versions_and_paths() {
        assert_eq!(parse("8/nginx"), Err(RouteError::UnknownVersion));
        assert_eq!(parse("v9"), Err(RouteError::UnknownVersion));
        assert_eq!(parse("9/connections"), Err(RouteError::PathNotFound));
        assert_eq!(parse("9/mail/upstreams"), Err(RouteError::PathNotFound));
        assert_eq!(parse("9/http/upstreams/b/servers/3/x"), Err(RouteError::PathNotFound));
        assert_eq!(parse("9/http/caches"), Err(RouteError::PathNotFound));
    }
}
