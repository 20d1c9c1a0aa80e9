//! corelb's own endpoints, configured in a location like nginx's: `api [write=on]` (the nginx Plus API, its
//! versions' paths and JSON), `metrics` (Prometheus text) and `stub_status` (nginx's status page). They run on
//! the shard that took the request, read the zone and the snapshot, and make changes through the control plane
//! ([`crate::control`]).

pub mod api;
pub mod metrics;
pub mod stub_status;

use crate::config::model::AdminEndpoint;
use crate::http::keepalive::Connection;
use crate::http::pages::{append_decimal, reason, SERVER_FULL};
use crate::state::Shared;

/// The largest request body an endpoint reads (an API change is a small JSON object).
pub const MAX_BODY: usize = 64 * 1024;

/// One request to an endpoint, body read whole.
#[derive(Debug, Clone, Copy)]
pub struct AdminRequest<'a> {
    pub method: &'a str,
    /// The path, without the query string.
    pub path: &'a str,
    pub args: Option<&'a str>,
    pub body: &'a [u8],
}

/// A request to an endpoint that owns its parts (to be answered on the control thread).
#[derive(Debug, Clone, Default)]
pub struct OwnedAdminRequest {
    pub method: String,
    pub path: String,
    pub args: Option<String>,
    pub body: Vec<u8>,
}

impl OwnedAdminRequest {
    /// The borrowed form.
    pub fn as_request(&self) -> AdminRequest<'_> {
        AdminRequest {
            method: &self.method,
            path: &self.path,
            args: self.args.as_deref(),
            body: &self.body,
        }
    }
}

/// Whether `method` at `endpoint` changes the running config (then it is answered on the control thread).
pub fn changes(endpoint: AdminEndpoint, method: &str) -> bool {
    matches!(endpoint, AdminEndpoint::Api { write: true }) && matches!(method, "POST" | "PATCH" | "DELETE")
}

/// An endpoint's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminResponse {
    pub status: u16,
    pub content_type: &'static str,
    /// The `Allow` header of a 405.
    pub allow: Option<&'static str>,
    pub body: Vec<u8>,
}

impl AdminResponse {
    /// A JSON answer.
    pub fn json(status: u16, body: Vec<u8>) -> Self {
        AdminResponse {
            status,
            content_type: "application/json",
            allow: None,
            body,
        }
    }

    /// Appends the whole answer (head and body, no body for HEAD) to `out`.
    pub fn write(&self, date: &[u8], keepalive: Connection, head_request: bool, out: &mut Vec<u8>) {
        self.write_head(SERVER_FULL, date, keepalive, out);
        out.extend_from_slice(b"\r\n");
        if !head_request {
            out.extend_from_slice(&self.body);
        }
    }

    /// Appends the head up to its `Connection` line (without the blank line that ends it), naming `server`.
    pub fn write_head(&self, server: &str, date: &[u8], keepalive: Connection, out: &mut Vec<u8>) {
        out.extend_from_slice(b"HTTP/1.1 ");
        append_decimal(out, u64::from(self.status));
        out.push(b' ');
        out.extend_from_slice(reason(self.status).as_bytes());
        out.extend_from_slice(b"\r\nServer: ");
        out.extend_from_slice(server.as_bytes());
        out.extend_from_slice(b"\r\nDate: ");
        out.extend_from_slice(date);
        out.extend_from_slice(b"\r\nContent-Type: ");
        out.extend_from_slice(self.content_type.as_bytes());
        out.extend_from_slice(b"\r\nContent-Length: ");
        append_decimal(out, self.body.len() as u64);
        if let Some(allow) = self.allow {
            out.extend_from_slice(b"\r\nAllow: ");
            out.extend_from_slice(allow.as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        keepalive.write(out);
    }
}

/// Answers `req` at `endpoint`.
pub fn handle(shared: &Shared, endpoint: AdminEndpoint, req: &AdminRequest<'_>) -> AdminResponse {
    match endpoint {
        AdminEndpoint::Api { write } => api::handle(shared, write, req),
        AdminEndpoint::Metrics => metrics::handle(shared, req),
        AdminEndpoint::StubStatus => stub_status::handle(shared, req),
    }
}
