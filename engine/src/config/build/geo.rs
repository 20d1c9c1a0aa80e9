//! `geo [$address] $name { ... }` in `http` and `stream` as nginx's geo modules read it: networks (CIDR, IPv4 and
//! IPv6) or `ranges` (IPv4 `A-B`), `default`, `delete`, `include` (expanded by the parser), `proxy` and
//! `proxy_recursive`; the table is a `Map` whose lookup is by address ([`crate::config::geo`]).

use super::vars::{Module, Vars};
use super::{arg, block_of, Build};
use crate::config::error::ConfigError;
use crate::config::geo::GeoDraft;
use crate::config::key::KeyTemplate;
use crate::config::map::Map;
use crate::config::parser::Directive;

/// Builds the geo block `d` of `module`'s block.
pub fn build(b: &mut Build, d: &Directive, module: Module, vars: &mut Vars) -> Result<Map, ConfigError> {
    let (source, raw_name) = match d.args.len() {
        1 => ("$remote_addr", arg(d, 0)),
        _ => (arg(d, 0), arg(d, 1)),
    };
    let source = vars.compile(source, module, &d.span)?;
    let Some(name) = raw_name.strip_prefix('$') else {
        let msg = format!("invalid variable name \"{raw_name}\"");
        return Err(ConfigError::invalid(msg, &d.span));
    };
    let mut map = Map::new(name, source);
    let empty = map.add_value(KeyTemplate::literal(""));
    let mut geo = GeoDraft::default();
    for (n, e) in block_of(d)?.items.iter().enumerate() {
        let invalid = |msg: String| ConfigError::invalid(msg, &e.span);
        match (e.name.as_str(), e.args.len()) {
            ("ranges", 0) if n == 0 => geo.ranges = true,
            ("ranges", 0) => {
                return Err(invalid(
                    "the \"ranges\" directive must be the first directive inside \"geo\" block".into(),
                ))
            }
            // the stream module has no `proxy` lines (no headers): there they are networks, and invalid
            ("proxy_recursive", 0) if module == Module::Http => geo.proxy_recursive = true,
            (_, 1) if e.block.is_none() => {
                let value = arg(e, 0);
                match e.name.as_str() {
                    "default" => {
                        let v = map.add_value(KeyTemplate::literal(value));
                        geo.set_default(v);
                    }
                    "proxy" if module == Module::Http => geo.proxies.push(net(b, e, value)?),
                    "delete" if geo.ranges => geo.range(value, None).map_err(|err| invalid(err.to_string()))?,
                    "delete" => geo.net(net(b, e, value)?, None),
                    key if geo.ranges => {
                        let v = map.add_value(KeyTemplate::literal(value));
                        geo.range(key, Some(v)).map_err(|err| invalid(err.to_string()))?;
                    }
                    key => {
                        let cidr = net(b, e, key)?;
                        let v = map.add_value(KeyTemplate::literal(value));
                        geo.net(cidr, Some(v));
                    }
                }
            }
            _ => return Err(invalid("invalid number of the geo parameters".into())),
        }
    }
    let xff = match module {
        Module::Http => vars.compile("$http_x_forwarded_for", module, &d.span)?,
        _ => KeyTemplate::literal(""),
    };
    map.geo = Some(Box::new(geo.build(empty, xff)));
    Ok(map)
}

/// nginx's `ngx_http_geo_cidr_value`: a network (`255.255.255.255` included), with the warning for bits beyond
/// its prefix.
fn net(b: &mut Build, e: &Directive, text: &str) -> Result<crate::config::realip::Cidr, ConfigError> {
    let Some((cidr, exact)) = super::realip::cidr(text) else {
        return Err(ConfigError::invalid(format!("invalid network \"{text}\""), &e.span));
    };
    if !exact {
        b.warn(&format!("low address bits of {text} are meaningless"), &e.span);
    }
    Ok(cidr)
}
