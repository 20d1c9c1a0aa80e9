//! The API's paths: what a request path names, after the `api` location's prefix, in the API version it names.

use crate::config::model::AdminEndpoint;
use crate::snapshot::Snapshot;

/// The API versions served, oldest first (`GET /api/` lists them; each client asks for its own).
pub const VERSIONS: &[u32] = &[1, 2, 3, 4, 5, 6, 7, 8, 9];

/// The newest version (what an answer outside any version, such as an unknown version's error, is shaped as).
pub const CURRENT: u32 = 9;

/// The `http` or the `stream` block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    Http,
    Stream,
}

/// A kind of status zone nginx Plus reports and corelb has none of: its collection is `{}`, any name in it is
/// not found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoZones {
    Slabs,
    ServerZones(Block),
    LocationZones,
    Caches,
    Keyvals(Block),
}

impl NoZones {
    /// nginx Plus's error code and text for a name in it.
    pub fn not_found(self) -> (&'static str, &'static str) {
        match self {
            NoZones::Slabs => ("SlabNotFound", "slab not found"),
            NoZones::ServerZones(_) => ("ServerZoneNotFound", "server zone not found"),
            NoZones::LocationZones => ("LocationZoneNotFound", "location zone not found"),
            NoZones::Caches => ("CacheNotFound", "cache not found"),
            NoZones::Keyvals(_) => ("KeyvalZoneNotFound", "keyval zone not found"),
        }
    }
}

/// What a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// `/api/`: the versions served.
    Versions,
    /// `/api/N`: the root endpoints.
    Root,
    /// `/api/N/nginx`.
    Nginx,
    /// `/api/N/processes`.
    Processes,
    /// `/api/N/connections`.
    Connections,
    /// `/api/N/ssl`.
    Ssl,
    /// `/api/9/workers`: one per shard.
    Workers,
    /// `/api/N/http/requests`.
    HttpRequests,
    /// A collection corelb has nothing in (`/api/N/slabs`, `/api/N/http/caches`...).
    Empty(NoZones),
    /// A name in such a collection.
    EmptyNamed(NoZones),
    /// `/api/N/http`, `/api/N/stream`.
    BlockRoot(Block),
    /// `/api/N/resolvers` (`None`), `/api/N/resolvers/NAME` (version 5 on).
    Resolvers(Option<&'a str>),
    /// `/api/N/http/limit_reqs` (`None`), `/api/N/http/limit_reqs/NAME`.
    LimitReqs(Option<&'a str>),
    /// `/api/N/http/limit_conns`, `/api/N/stream/limit_conns` (`None`), and one zone of them.
    LimitConns(Block, Option<&'a str>),
    /// `/api/N/http/upstreams`.
    Upstreams(Block),
    /// `/api/N/http/upstreams/NAME`.
    Upstream(Block, &'a str),
    /// `/api/N/http/upstreams/NAME/servers`.
    Servers(Block, &'a str),
    /// `/api/N/http/upstreams/NAME/servers/ID` (the id as written).
    Server(Block, &'a str, &'a str),
    /// `/api/N/stream/xdp` (corelb's): the XDP data path's counters per real server.
    Xdp,
}

/// A path with the version it was asked in (the version list has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route<'a> {
    pub version: u32,
    pub target: Target<'a>,
}

/// Why a path names nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteError {
    UnknownVersion,
    PathNotFound,
}

/// The root endpoints of `version`, in nginx Plus's order (`license` is nginx Plus's own and not served).
pub fn root_endpoints(version: u32) -> Vec<&'static str> {
    let mut list = vec!["nginx", "processes", "connections", "slabs", "http", "stream"];
    if version >= 5 {
        list.push("resolvers");
    }
    list.push("ssl");
    if version >= 9 {
        list.push("workers");
    }
    list
}

/// The endpoints under `/http` or `/stream` in `version` (`zone_sync` only where it runs, which in corelb is
/// nowhere).
pub fn block_endpoints(block: Block, version: u32) -> Vec<&'static str> {
    let mut list = Vec::new();
    match block {
        Block::Http => {
            list.extend(["requests", "server_zones"]);
            if version >= 5 {
                list.push("location_zones");
            }
            list.push("caches");
            if version >= 6 {
                list.extend(["limit_conns", "limit_reqs"]);
            }
            list.push("keyvals");
        }
        Block::Stream => {
            list.push("server_zones");
            if version >= 6 {
                list.push("limit_conns");
            }
            if version >= 2 {
                list.push("keyvals");
            }
        }
    }
    list.push("upstreams");
    list
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
pub fn parse(rest: &str) -> Result<Route<'_>, RouteError> {
    let mut parts = rest.split('/').filter(|s| !s.is_empty());
    let Some(version) = parts.next() else {
        return Ok(Route {
            version: 0,
            target: Target::Versions,
        });
    };
    let version = version_number(version).ok_or(RouteError::UnknownVersion)?;
    let segments: Vec<&str> = parts.collect();
    let target = target(&segments, version).ok_or(RouteError::PathNotFound)?;
    Ok(Route { version, target })
}

/// The version `rest` names, if it names a served one.
pub fn version_in(rest: &str) -> Option<u32> {
    rest.split('/').find(|s| !s.is_empty()).and_then(version_number)
}

/// A version as written in a path: one of [`VERSIONS`], in decimal without a sign or leading zeros.
fn version_number(text: &str) -> Option<u32> {
    if text.starts_with('0') || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok().filter(|v| VERSIONS.contains(v))
}

/// What the segments after the version name in `version`.
fn target<'a>(segments: &[&'a str], version: u32) -> Option<Target<'a>> {
    let since = |v: u32, t: Target<'a>| (version >= v).then_some(t);
    let empty = |v: u32, zones: NoZones, name: Option<&str>| {
        since(
            v,
            if name.is_some() {
                Target::EmptyNamed(zones)
            } else {
                Target::Empty(zones)
            },
        )
    };
    let (top, rest) = segments.split_first().map_or(("", &[][..]), |(t, r)| (*t, r));
    let name = rest.first().copied();
    match (top, rest) {
        ("", []) => Some(Target::Root),
        ("nginx", []) => Some(Target::Nginx),
        ("processes", []) => Some(Target::Processes),
        ("connections", []) => Some(Target::Connections),
        ("ssl", []) => Some(Target::Ssl),
        ("workers", []) => since(9, Target::Workers),
        ("slabs", [] | [_]) => empty(1, NoZones::Slabs, name),
        ("resolvers", [] | [_]) => since(5, Target::Resolvers(name)),
        ("http", _) => block_target(Block::Http, rest, version),
        ("stream", _) => block_target(Block::Stream, rest, version),
        _ => None,
    }
}

/// What the segments after `/http` or `/stream` name in `version`.
fn block_target<'a>(block: Block, segments: &[&'a str], version: u32) -> Option<Target<'a>> {
    let empty = |since: u32, zones: NoZones, named: bool| {
        (version >= since).then_some(if named {
            Target::EmptyNamed(zones)
        } else {
            Target::Empty(zones)
        })
    };
    let http = block == Block::Http;
    match segments {
        [] => Some(Target::BlockRoot(block)),
        ["requests"] if http => Some(Target::HttpRequests),
        ["upstreams"] => Some(Target::Upstreams(block)),
        ["xdp"] if !http => Some(Target::Xdp),
        ["upstreams", name] => Some(Target::Upstream(block, name)),
        ["upstreams", name, "servers"] => Some(Target::Servers(block, name)),
        ["upstreams", name, "servers", id] => Some(Target::Server(block, name, id)),
        [kind, rest @ ..] if rest.len() <= 1 => {
            let named = !rest.is_empty();
            match *kind {
                "server_zones" => empty(1, NoZones::ServerZones(block), named),
                "location_zones" if http => empty(5, NoZones::LocationZones, named),
                "caches" if http => empty(1, NoZones::Caches, named),
                "limit_reqs" if http && version >= 6 => Some(Target::LimitReqs(rest.first().copied())),
                "limit_conns" if version >= 6 => Some(Target::LimitConns(block, rest.first().copied())),
                "keyvals" => empty(if http { 1 } else { 2 }, NoZones::Keyvals(block), named),
                _ => None,
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Block::*;

    fn t(rest: &str) -> Result<(u32, Target<'_>), RouteError> {
        parse(rest).map(|r| (r.version, r.target))
    }

    #[test]
    fn paths_name_targets() {
        assert_eq!(t(""), Ok((0, Target::Versions)));
        assert_eq!(t("/"), Ok((0, Target::Versions)));
        assert_eq!(t("9"), Ok((9, Target::Root)));
        assert_eq!(t("8/"), Ok((8, Target::Root)));
        assert_eq!(t("9/nginx"), Ok((9, Target::Nginx)));
        assert_eq!(t("1/connections"), Ok((1, Target::Connections)));
        assert_eq!(t("7/processes"), Ok((7, Target::Processes)));
        assert_eq!(t("4/ssl"), Ok((4, Target::Ssl)));
        assert_eq!(t("9/workers"), Ok((9, Target::Workers)));
        assert_eq!(t("9/stream"), Ok((9, Target::BlockRoot(Stream))));
        assert_eq!(t("8/http/requests"), Ok((8, Target::HttpRequests)));
        assert_eq!(t("9/http/upstreams/"), Ok((9, Target::Upstreams(Http))));
        assert_eq!(t("9//http//upstreams/b"), Ok((9, Target::Upstream(Http, "b"))));
        assert_eq!(t("9/stream/upstreams/b/servers"), Ok((9, Target::Servers(Stream, "b"))));
        assert_eq!(
            t("9/http/upstreams/b/servers/3"),
            Ok((9, Target::Server(Http, "b", "3")))
        );
        assert_eq!(t("8/slabs"), Ok((8, Target::Empty(NoZones::Slabs))));
        assert_eq!(t("8/http/caches/one"), Ok((8, Target::EmptyNamed(NoZones::Caches))));
        assert_eq!(t("6/stream/limit_conns"), Ok((6, Target::LimitConns(Stream, None))));
        assert_eq!(t("9/http/limit_conns/c"), Ok((9, Target::LimitConns(Http, Some("c")))));
        assert_eq!(t("6/http/limit_reqs/r"), Ok((6, Target::LimitReqs(Some("r")))));
        assert_eq!(t("9/stream/limit_reqs"), Err(RouteError::PathNotFound));
        assert_eq!(
            t("3/stream/server_zones/z"),
            Ok((3, Target::EmptyNamed(NoZones::ServerZones(Stream))))
        );
    }

    #[test]
    fn each_version_has_its_own_paths() {
        // Added in 5 (location zones, resolvers), 6 (limits), 9 (workers); stream keyvals in 2.
        assert_eq!(t("4/http/location_zones"), Err(RouteError::PathNotFound));
        assert_eq!(
            t("5/http/location_zones"),
            Ok((5, Target::Empty(NoZones::LocationZones)))
        );
        assert_eq!(t("4/resolvers"), Err(RouteError::PathNotFound));
        assert_eq!(t("5/resolvers"), Ok((5, Target::Resolvers(None))));
        assert_eq!(t("9/resolvers/dns/"), Ok((9, Target::Resolvers(Some("dns")))));
        assert_eq!(t("9/resolvers/dns/x"), Err(RouteError::PathNotFound));
        assert_eq!(t("5/http/limit_reqs"), Err(RouteError::PathNotFound));
        assert_eq!(t("5/stream/limit_conns"), Err(RouteError::PathNotFound));
        assert_eq!(t("8/workers"), Err(RouteError::PathNotFound));
        assert_eq!(t("1/stream/keyvals"), Err(RouteError::PathNotFound));
        assert_eq!(t("2/stream/keyvals"), Ok((2, Target::Empty(NoZones::Keyvals(Stream)))));
        assert_eq!(
            root_endpoints(4),
            ["nginx", "processes", "connections", "slabs", "http", "stream", "ssl"]
        );
        assert_eq!(
            root_endpoints(9),
            [
                "nginx",
                "processes",
                "connections",
                "slabs",
                "http",
                "stream",
                "resolvers",
                "ssl",
                "workers"
            ]
        );
        assert_eq!(
            block_endpoints(Http, 9),
            [
                "requests",
                "server_zones",
                "location_zones",
                "caches",
                "limit_conns",
                "limit_reqs",
                "keyvals",
                "upstreams"
            ]
        );
        assert_eq!(
            block_endpoints(Http, 1),
            ["requests", "server_zones", "caches", "keyvals", "upstreams"]
        );
        assert_eq!(block_endpoints(Stream, 1), ["server_zones", "upstreams"]);
        assert_eq!(
            block_endpoints(Stream, 6),
            ["server_zones", "limit_conns", "keyvals", "upstreams"]
        );
    }

    #[test]
    fn unknown_versions_and_paths() {
        for v in ["10", "0", "09", "v9", "+9", "99999999999"] {
            assert_eq!(t(&format!("{v}/nginx")), Err(RouteError::UnknownVersion), "{v}");
        }
        assert_eq!(t("9/license"), Err(RouteError::PathNotFound));
        assert_eq!(t("9/stream/zone_sync"), Err(RouteError::PathNotFound));
        assert_eq!(t("9/stream/requests"), Err(RouteError::PathNotFound));
        assert_eq!(t("9/stream/caches"), Err(RouteError::PathNotFound));
        assert_eq!(t("9/mail/upstreams"), Err(RouteError::PathNotFound));
        assert_eq!(t("9/http/upstreams/b/servers/3/x"), Err(RouteError::PathNotFound));
        assert_eq!(t("9/http/caches/a/b"), Err(RouteError::PathNotFound));
        assert_eq!(t("9/nginx/x"), Err(RouteError::PathNotFound));
    }
}
