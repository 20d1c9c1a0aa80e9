//! Directive tree -> typed [`Config`]: one file per context (main and events, http, upstream, stream), with nginx's
//! checks and messages, and nginx's inheritance and defaults.
//!
//! nginx checks most directives as it reads them and some when a block (or the whole file) is done; the builder
//! walks the tree in document order and keeps those deferred checks at the same points, so when a config has several
//! errors the one reported is, as far as corelb models it, the one nginx reports.

mod access;
mod agent;
mod charset;
mod error_pages;
mod fair;
mod geo;
mod gzip;
mod hash_method;
mod headers;
mod health;
mod http;
mod http2;
mod layers;
mod least_time;
mod limit_rate;
mod limits;
mod listen;
mod locations;
mod logs;
mod main_ctx;
mod map;
mod proxy_tls;
mod queue;
mod random_two;
mod realip;
mod regex_names;
mod regex_redirect;
mod rewrite;
mod server_line;
pub mod server_names;
mod set;
mod spec;
mod state;
mod static_files;
mod sticky;
mod stream;
mod stream_logs;
mod temp_path;
mod tls;
mod upstream;
mod user;
mod vars;
mod xdp;

use super::error::ConfigError;
use super::model::{Config, Span};
use super::parser::{Block, Directive};
use super::value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where a directive appears: nginx's `cmd_type` bits, one per context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ctx(u16);

impl Ctx {
    pub const NONE: Ctx = Ctx(0);
    pub const MAIN: Ctx = Ctx(1);
    pub const EVENTS: Ctx = Ctx(1 << 1);
    pub const HTTP: Ctx = Ctx(1 << 2);
    pub const HTTP_SRV: Ctx = Ctx(1 << 3);
    pub const HTTP_LOC: Ctx = Ctx(1 << 4);
    pub const HTTP_UPS: Ctx = Ctx(1 << 5);
    pub const STREAM: Ctx = Ctx(1 << 6);
    pub const STREAM_SRV: Ctx = Ctx(1 << 7);
    pub const STREAM_UPS: Ctx = Ctx(1 << 8);
    /// Inside an http `match NAME { ... }` block (nginx Plus).
    pub const HTTP_MATCH: Ctx = Ctx(1 << 9);
    /// Inside an `if` block of a server (nginx's `NGX_HTTP_SIF_CONF`).
    pub const HTTP_SIF: Ctx = Ctx(1 << 10);
    /// Inside an `if` block of a location (nginx's `NGX_HTTP_LIF_CONF`).
    pub const HTTP_LIF: Ctx = Ctx(1 << 11);

    /// Both sets of contexts.
    pub const fn or(self, other: Ctx) -> Ctx {
        Ctx(self.0 | other.0)
    }

    /// Whether `other` is among these contexts.
    pub fn has(self, other: Ctx) -> bool {
        self.0 & other.0 != 0
    }
}

/// Builds the typed config from a parsed tree; relative file paths resolve against `prefix` (nginx's `-p`).
pub fn build(root: &Block, prefix: &Path) -> Result<Config, ConfigError> {
    main_ctx::build(root, prefix)
}

/// State of the whole build: warnings, and the shared memory zones (global across http and stream, as in nginx).
#[derive(Debug, Default)]
pub struct Build {
    pub warnings: Vec<String>,
    /// nginx's prefix, for `ngx_conf_full_name(cycle, name, 0)` (empty: paths as written).
    pub prefix: PathBuf,
    zones: Vec<ShmZone>,
}

/// A `zone` name as nginx's shared memory list has it.
#[derive(Debug)]
struct ShmZone {
    name: String,
    size: u64,
    stream: bool,
    span: Span,
}

impl Build {
    /// A `[warn]` line, nginx's `ngx_conf_log_error(NGX_LOG_WARN, ...)`.
    pub fn warn(&mut self, msg: &str, at: &Span) {
        self.warnings.push(format!("[warn] {msg} in {at}"));
    }

    /// `ngx_shared_memory_add`: a zone name is declared once per use; a size, if given twice, must agree.
    pub fn add_zone(&mut self, name: &str, size: u64, stream: bool, at: &Span) -> Result<(), ConfigError> {
        let Some(zone) = self.zones.iter_mut().find(|z| z.name == name) else {
            self.zones.push(ShmZone {
                name: name.to_string(),
                size,
                stream,
                span: at.clone(),
            });
            return Ok(());
        };
        if zone.stream != stream {
            let msg = format!("the shared memory zone \"{name}\" is already declared for a different use");
            return Err(ConfigError::invalid(msg, at));
        }
        if zone.size == 0 {
            zone.size = size;
        }
        if size != 0 && size != zone.size {
            let msg = format!(
                "the size {size} of shared memory zone \"{name}\" conflicts with already declared size {}",
                zone.size
            );
            return Err(ConfigError::invalid(msg, at));
        }
        Ok(())
    }

    /// nginx's check when it creates the zones: every zone needs a size somewhere.
    fn check_zones(&self) -> Result<(), ConfigError> {
        match self.zones.iter().find(|z| z.size == 0) {
            Some(z) => Err(ConfigError::invalid(
                format!("zero size shared memory zone \"{}\"", z.name),
                &z.span,
            )),
            None => Ok(()),
        }
    }
}

/// Checks and hands each directive of `block` (read in context `ctx`) to `each`, in order, then returns where the
/// block closed, or the syntax error that cut it short.
pub fn walk(
    block: &Block,
    ctx: Ctx,
    mut each: impl FnMut(&Directive) -> Result<(), ConfigError>,
) -> Result<Span, ConfigError> {
    for d in &block.items {
        spec::check(d, ctx)?;
        each(d)?;
    }
    block.close.clone()
}

/// The block of a directive that [`spec::check`] found to open one.
pub fn block_of(d: &Directive) -> Result<&Block, ConfigError> {
    d.block
        .as_ref()
        .ok_or_else(|| ConfigError::invalid(format!("directive \"{}\" has no opening \"{{\"", d.name), &d.span))
}

/// Argument `i` (0 = first after the name); empty when absent (the table already checked the count).
pub fn arg(d: &Directive, i: usize) -> &str {
    d.args.get(i).map(String::as_str).unwrap_or_default()
}

/// `"NAME" directive MSG`: the message nginx makes of a handler's returned string.
pub fn directive_err(d: &Directive, msg: &str) -> ConfigError {
    ConfigError::invalid(format!("\"{}\" directive {msg}", d.name), &d.span)
}

/// nginx's `is duplicate` when `slot` is already set (checked before the value, as nginx does).
pub fn unset<T>(slot: &Option<T>, d: &Directive) -> Result<(), ConfigError> {
    match slot {
        Some(_) => Err(directive_err(d, "is duplicate")),
        None => Ok(()),
    }
}

/// Fills `slot` once: nginx's `is duplicate` for a second time.
pub fn set_once<T>(slot: &mut Option<T>, d: &Directive, v: T) -> Result<(), ConfigError> {
    if slot.is_some() {
        return Err(directive_err(d, "is duplicate"));
    }
    *slot = Some(v);
    Ok(())
}

/// `ngx_conf_set_msec_slot`.
pub fn msec_slot(slot: &mut Option<Duration>, d: &Directive) -> Result<(), ConfigError> {
    if slot.is_some() {
        return Err(directive_err(d, "is duplicate"));
    }
    let v = value::parse_msec(arg(d, 0)).ok_or_else(|| directive_err(d, "invalid value"))?;
    *slot = Some(v);
    Ok(())
}

/// `ngx_conf_set_num_slot`.
pub fn num_slot(slot: &mut Option<u64>, d: &Directive) -> Result<(), ConfigError> {
    if slot.is_some() {
        return Err(directive_err(d, "is duplicate"));
    }
    let v = value::atoi(arg(d, 0)).ok_or_else(|| directive_err(d, "invalid number"))?;
    *slot = Some(v);
    Ok(())
}

/// `ngx_conf_set_flag_slot`: `on` or `off`, any case.
pub fn flag_slot(slot: &mut Option<bool>, d: &Directive) -> Result<(), ConfigError> {
    if slot.is_some() {
        return Err(directive_err(d, "is duplicate"));
    }
    let v = arg(d, 0);
    let on = if v.eq_ignore_ascii_case("on") {
        true
    } else if v.eq_ignore_ascii_case("off") {
        false
    } else {
        let msg = format!(
            "invalid value \"{v}\" in \"{}\" directive, it must be \"on\" or \"off\"",
            d.name
        );
        return Err(ConfigError::invalid(msg, &d.span));
    };
    *slot = Some(on);
    Ok(())
}

/// A number that must fit the model's type: too large is `invalid value`.
pub fn to_usize(n: u64, d: &Directive) -> Result<usize, ConfigError> {
    usize::try_from(n).map_err(|_| directive_err(d, "invalid value"))
}

/// See [`crate::config::load_charsets_for_tests`].
#[cfg(test)]
pub fn charset_tables_for_tests(block: &crate::config::parser::Block) -> crate::config::charset::Charsets {
    let mut c = charset::names(block);
    for d in block.items.iter().filter(|d| d.name == "charset_map") {
        let _ = charset::charset_map(&mut c, d);
    }
    c
}
