//! The nginx Plus API (version 9): status reads, and upstream server changes with `write=on`.

use super::{AdminRequest, AdminResponse};
use crate::shard::Shared;

/// The API versions served (`GET /api/` lists them).
pub const VERSIONS: &[u32] = &[9];

/// Answers one API request.
pub fn handle(_shared: &Shared, _write: bool, req: &AdminRequest<'_>) -> AdminResponse {
    let rest = req.path.trim_start_matches('/');
    let rest = rest.strip_prefix("api").unwrap_or(rest).trim_matches('/');
    if rest.is_empty() {
        let list: Vec<String> = VERSIONS.iter().map(u32::to_string).collect();
        return AdminResponse::json(200, format!("[{}]", list.join(",")).into_bytes());
    }
    error(404, "PathNotFound", "path not found")
}

/// nginx Plus's error object.
pub fn error(status: u16, code: &str, text: &str) -> AdminResponse {
    let body = format!(
        "{{\"error\":{{\"status\":{status},\"text\":\"{}\",\"code\":\"{code}\"}},\"request_id\":\"\",\"href\":\"https://nginx.org/en/docs/http/ngx_http_api_module.html\"}}",
        text.replace('\\', "\\\\").replace('"', "\\\"")
    );
    AdminResponse::json(status, body.into_bytes())
}
