//! The `http2*` directives of http and server blocks (nginx's `ngx_http_v2_module`), merged server over http.

use super::{arg, directive_err, flag_slot, num_slot, set_once, value};
use crate::config::error::ConfigError;
use crate::config::model::Http2Conf;
use crate::config::parser::Directive;

/// The directives read here.
pub const NAMES: &[&str] = &[
    "http2",
    "http2_max_concurrent_streams",
    "http2_chunk_size",
    "http2_recv_buffer_size",
    "http2_body_preread_size",
    "http2_pool_size",
    "http2_streams_index_size",
];

/// What one level (http or server) sets.
#[derive(Debug, Clone, Default)]
pub struct Http2Layer {
    on: Option<bool>,
    max_concurrent_streams: Option<u64>,
    chunk_size: Option<u64>,
    recv_buffer_size: Option<u64>,
    body_preread_size: Option<u64>,
    pool_size: Option<u64>,
    streams_index_size: Option<u64>,
}

/// `ngx_conf_set_size_slot`.
fn size(slot: &mut Option<u64>, d: &Directive) -> Result<(), ConfigError> {
    let v = value::parse_size(arg(d, 0)).ok_or_else(|| directive_err(d, "invalid value"))?;
    set_once(slot, d, v)
}

impl Http2Layer {
    /// Reads `d` (one of [`NAMES`]).
    pub fn directive(&mut self, d: &Directive) -> Result<(), ConfigError> {
        match d.name.as_str() {
            "http2" => flag_slot(&mut self.on, d)?,
            "http2_max_concurrent_streams" => num_slot(&mut self.max_concurrent_streams, d)?,
            "http2_chunk_size" => {
                size(&mut self.chunk_size, d)?;
                if self.chunk_size == Some(0) {
                    return Err(ConfigError::invalid("the http2 chunk size cannot be zero", &d.span));
                }
            }
            "http2_recv_buffer_size" => {
                size(&mut self.recv_buffer_size, d)?;
                // nginx's `ngx_http_v2_recv_buffer_size`: more than its state buffer (16 bytes)
                if self.recv_buffer_size.is_some_and(|n| n <= 16) {
                    return Err(ConfigError::invalid("value is too small", &d.span));
                }
            }
            "http2_body_preread_size" => {
                size(&mut self.body_preread_size, d)?;
                if self.body_preread_size.is_some_and(|n| n > MAX_WINDOW) {
                    let msg = format!("the maximum body preread buffer size is {MAX_WINDOW}");
                    return Err(ConfigError::invalid(msg, &d.span));
                }
            }
            // nginx's per-connection memory pool and stream index: nothing to size in corelb
            "http2_pool_size" => size(&mut self.pool_size, d)?,
            "http2_streams_index_size" => num_slot(&mut self.streams_index_size, d)?,
            _ => {
                return Err(ConfigError::NotAllowedHere {
                    name: d.name.clone(),
                    at: d.span.clone(),
                })
            }
        }
        Ok(())
    }

    /// These settings over `parent`'s (nginx's merge: a level's own value wins, else the parent's).
    pub fn over(&self, parent: &Http2Layer) -> Http2Layer {
        Http2Layer {
            on: self.on.or(parent.on),
            max_concurrent_streams: self.max_concurrent_streams.or(parent.max_concurrent_streams),
            chunk_size: self.chunk_size.or(parent.chunk_size),
            recv_buffer_size: self.recv_buffer_size.or(parent.recv_buffer_size),
            body_preread_size: self.body_preread_size.or(parent.body_preread_size),
            pool_size: self.pool_size.or(parent.pool_size),
            streams_index_size: self.streams_index_size.or(parent.streams_index_size),
        }
    }

    /// The settings with nginx's defaults for what no level set.
    pub fn conf(&self) -> Http2Conf {
        let d = Http2Conf::default();
        let clamp = |v: Option<u64>, d: u32| v.map_or(d, |n| u32::try_from(n).unwrap_or(u32::MAX));
        let chunk_size = clamp(self.chunk_size, d.chunk_size).min(MAX_FRAME);
        Http2Conf {
            on: self.on.unwrap_or(d.on),
            max_concurrent_streams: clamp(self.max_concurrent_streams, d.max_concurrent_streams),
            chunk_size,
            largest_chunk_size: chunk_size,
            recv_buffer_size: clamp(self.recv_buffer_size, d.recv_buffer_size),
            body_preread_size: clamp(self.body_preread_size, d.body_preread_size),
        }
    }
}

/// HTTP/2's largest flow-control window (RFC 9113 6.9.1).
const MAX_WINDOW: u64 = (1 << 31) - 1;
/// HTTP/2's largest frame payload (RFC 9113 4.2).
const MAX_FRAME: u32 = (1 << 24) - 1;
