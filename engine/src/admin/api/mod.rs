//! The nginx Plus API (versions 1 to 9, each client takes its own): status reads, and upstream server changes
//! with `write=on`.
//!
//! `route` says what a path names in which version, `views` builds the upstream answers and `status` the
//! process-wide ones, `versions` shapes what older versions show differently, `body` reads a change's JSON,
//! `change` applies it through the control plane, `json` writes the answers in nginx Plus's field order.

mod body;
mod change;
mod json;
mod route;
mod status;
mod versions;
mod views;

use super::{AdminRequest, AdminResponse};
use crate::snapshot::Snapshot;
use crate::state::Shared;
use change::Change;
use json::Json;
use route::{Block, Route, RouteError, Target};

pub use route::VERSIONS;

/// An answer other than success, as nginx Plus's error object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status} {code}: {text}")]
pub struct ApiError {
    pub status: u16,
    pub code: &'static str,
    pub text: String,
}

impl ApiError {
    pub fn new(status: u16, code: &'static str, text: String) -> Self {
        ApiError { status, code, text }
    }

    fn upstream_not_found() -> Self {
        Self::new(404, "UpstreamNotFound", "upstream not found".into())
    }

    fn upstream_static() -> Self {
        Self::new(400, "UpstreamStatic", "upstream is static".into())
    }

    fn server_not_found(id: u32) -> Self {
        Self::new(
            404,
            "UpstreamServerNotFound",
            format!("server with ID \"{id}\" does not exist"),
        )
    }

    fn resolver_not_found() -> Self {
        Self::new(404, "ResolverZoneNotFound", "resolver zone not found".into())
    }

    fn internal() -> Self {
        Self::new(500, "InternalError", "internal error".into())
    }

    fn response(&self, version: u32, allow: Option<&'static str>) -> AdminResponse {
        AdminResponse {
            allow,
            ..error_in(version, self.status, self.code, &self.text)
        }
    }
}

/// Answers one API request.
pub fn handle(shared: &Shared, write: bool, req: &AdminRequest<'_>) -> AdminResponse {
    let snap = shared.snapshot.load_full();
    let prefix = route::api_prefix(&snap, req.path);
    let rest = req.path.get(prefix.len()..).unwrap_or_default();
    let Route { version, target } = match route::parse(rest) {
        Ok(r) => r,
        Err(RouteError::UnknownVersion) => return error(404, "UnknownVersion", "unknown version"),
        Err(RouteError::PathNotFound) => {
            let version = route::version_in(rest).unwrap_or(route::CURRENT);
            return error_in(version, 404, "PathNotFound", "path not found");
        }
    };
    let allow = allowed(target);
    let answer = match req.method {
        "GET" | "HEAD" => read(shared, &snap, version, target, req.args),
        "POST" | "PATCH" | "DELETE" if !write => Err(ApiError::new(405, "MethodDisabled", "method disabled".into())),
        method => match (method, target) {
            ("POST", Target::Servers(b, name)) => body::parse(req.body, b).map_err(ApiError::from).and_then(|body| {
                drop(snap);
                change::apply(shared, b, name, Change::Add(body))
            }),
            ("PATCH", Target::Server(b, name, id)) => {
                let id = server_id(id);
                let body = body::parse(req.body, b).map_err(ApiError::from);
                id.and_then(|id| body.map(|body| Change::Modify(id, body)))
                    .and_then(|c| change::apply(shared, b, name, c))
            }
            ("DELETE", Target::Resolvers(Some(name))) => {
                let Some(stats) = snap.resolvers.get(name) else {
                    return ApiError::resolver_not_found().response(version, None);
                };
                stats.reset();
                return AdminResponse::json(204, Vec::new());
            }
            ("DELETE", Target::Server(b, name, id)) => {
                server_id(id).and_then(|id| change::apply(shared, b, name, Change::Remove(id)))
            }
            _ => Err(ApiError::new(405, "MethodNotSupported", "method not supported".into())),
        },
    };
    match answer {
        Ok((status, mut body)) => {
            versions::shape(version, target, &mut body);
            AdminResponse::json(status, body.render().into_bytes())
        }
        Err(e) => e.response(version, (e.status == 405).then_some(allow)),
    }
}

/// The methods a target takes (the `Allow` header of a 405).
fn allowed(target: Target<'_>) -> &'static str {
    match target {
        Target::Servers(..) => "GET, HEAD, POST",
        Target::Server(..) => "GET, HEAD, PATCH, DELETE",
        Target::Resolvers(Some(_)) => "GET, HEAD, DELETE",
        _ => "GET, HEAD",
    }
}

/// A `GET` (or `HEAD`) answer in `version`.
fn read(
    shared: &Shared,
    snap: &Snapshot,
    version: u32,
    target: Target<'_>,
    args: Option<&str>,
) -> Result<(u16, Json), ApiError> {
    let now = crate::clock::now_secs();
    let fields = json::requested_fields(args);
    let mut body = match target {
        Target::Versions => Json::Arr(VERSIONS.iter().map(|v| Json::Num(u64::from(*v))).collect()),
        Target::Root => Json::strings(&route::root_endpoints(version)),
        Target::Nginx => views::nginx(shared, crate::clock::now_ms()),
        Target::Processes => status::processes(),
        Target::Connections => status::all_connections(shared),
        Target::Ssl => status::all_ssl(shared, version),
        Target::Workers => status::workers(shared),
        Target::HttpRequests => status::all_requests(shared),
        Target::Empty(_) => Json::Obj(Vec::new()),
        Target::EmptyNamed(zones) => {
            let (code, text) = zones.not_found();
            return Err(ApiError::new(404, code, text.into()));
        }
        Target::BlockRoot(b) => Json::strings(&route::block_endpoints(b, version)),
        Target::Resolvers(name) => views::resolvers(&snap.resolvers, name).ok_or_else(ApiError::resolver_not_found)?,
        Target::LimitReqs(name) => views::limit_reqs(&snap.http_limits, name)
            .ok_or_else(|| ApiError::new(404, "LimitReqNotFound", "limit_req not found".into()))?,
        Target::LimitConns(b, name) => {
            let zones = match b {
                Block::Http => &snap.http_limits,
                Block::Stream => &snap.stream_limits,
            };
            views::limit_conns(zones, name)
                .ok_or_else(|| ApiError::new(404, "LimitConnNotFound", "limit_conn not found".into()))?
        }
        Target::Upstreams(b) => return Ok((200, views::upstream_map(snap, b, &shared.zone, now, fields.as_deref()))),
        Target::Xdp => views::xdp(&crate::l4::counters()),
        Target::Upstream(b, name) => views::upstream(dynamic_upstream(snap, b, name)?, b, &shared.zone, now),
        Target::Servers(b, name) => views::server_confs(dynamic_upstream(snap, b, name)?, b),
        Target::Server(b, name, id) => {
            let up = dynamic_upstream(snap, b, name)?;
            let id = server_id(id)?;
            let (peer, backup) = up.peer_by_id(id).ok_or_else(|| ApiError::server_not_found(id))?;
            views::server_conf(peer, backup, b)
        }
    };
    let filtered = matches!(
        target,
        Target::Nginx
            | Target::Upstream(..)
            | Target::Connections
            | Target::HttpRequests
            | Target::Ssl
            | Target::Processes
    );
    if let (Some(f), true) = (&fields, filtered) {
        body.keep_fields(f);
    }
    Ok((200, body))
}

/// The upstream `name` of `block`, which must have a `zone`.
fn dynamic_upstream<'s>(snap: &'s Snapshot, block: Block, name: &str) -> Result<views::UpstreamRef<'s>, ApiError> {
    let up = views::find_upstream(snap, block, name).ok_or_else(ApiError::upstream_not_found)?;
    if up.is_dynamic() {
        Ok(up)
    } else {
        Err(ApiError::upstream_static())
    }
}

/// A server id as written in a path: a decimal number.
fn server_id(text: &str) -> Result<u32, ApiError> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ApiError::new(400, "UpstreamBadServerId", "invalid server ID".into()));
    }
    text.parse()
        .map_err(|_| ApiError::new(400, "UpstreamBadServerId", "invalid server ID".into()))
}

/// nginx Plus's error object (of the current version).
pub fn error(status: u16, code: &str, text: &str) -> AdminResponse {
    error_in(route::CURRENT, status, code, text)
}

/// nginx Plus's error object as `version` shapes it.
fn error_in(version: u32, status: u16, code: &str, text: &str) -> AdminResponse {
    let body = versions::error_object(version, status, code, text);
    AdminResponse::json(status, body.render().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_nginx_plus_error_objects() {
        let r = error(404, "UpstreamNotFound", "upstream \"a\" not found");
        assert_eq!(r.status, 404);
        let text = String::from_utf8(r.body).unwrap();
        assert_eq!(
            text,
            r#"{"error":{"status":404,"text":"upstream \"a\" not found","code":"UpstreamNotFound"},"request_id":"","href":"https://nginx.org/en/docs/http/ngx_http_api_module.html"}"#
        );
        let e = ApiError::new(405, "MethodDisabled", "method disabled".into()).response(9, Some("GET, HEAD"));
        assert_eq!((e.status, e.allow), (405, Some("GET, HEAD")));
    }

    #[test]
    fn server_ids_are_decimal() {
        assert_eq!(server_id("0"), Ok(0));
        assert_eq!(server_id("17"), Ok(17));
        for bad in ["", "-1", "1a", "+1", "99999999999"] {
            assert_eq!(server_id(bad).unwrap_err().code, "UpstreamBadServerId", "{bad}");
        }
    }
}
