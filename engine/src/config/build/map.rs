//! `map SOURCE $name { ... }` in `http` and `stream` as nginx's map modules read it: `default`, `hostnames`,
//! `volatile`, `include` (expanded by the parser), exact, wildcard and `~`/`~*` regex keys, a leading `\` escaping
//! a key, values with variables; nginx's messages and places.

use super::vars::{Module, Vars};
use super::{arg, block_of, value};
use crate::config::error::ConfigError;
use crate::config::key::Var;
use crate::config::map::{Map, MapRegex};
use crate::config::model::AccessLogConf;
use crate::config::parser::{Block, Directive};

/// The names of the `map` variables of a block's top level, in order (so a value may name a map defined later in
/// the block, as nginx resolves variables when the block ends).
pub fn names(block: &Block) -> Vec<String> {
    block
        .items
        .iter()
        .filter_map(|d| match d.name.as_str() {
            "map" => d.args.get(1),
            "geo" => d.args.last(),
            _ => None,
        })
        .map(|n| n.strip_prefix('$').unwrap_or(n).to_ascii_lowercase())
        .collect()
}

/// The maps of one block, and its `map_hash_*` settings (checked as nginx does; corelb's tables size themselves).
#[derive(Debug, Default)]
pub struct Maps {
    pub maps: Vec<Map>,
    max_size: Option<u64>,
    bucket_size: Option<u64>,
}

impl Maps {
    /// Reads `d` if it is `map` or `map_hash_*`; `Ok(false)` when it is neither.
    pub fn directive(&mut self, d: &Directive, module: Module, vars: &mut Vars) -> Result<bool, ConfigError> {
        match d.name.as_str() {
            "map" => self.maps.push(build(d, module, vars)?),
            "map_hash_max_size" => super::num_slot(&mut self.max_size, d)?,
            "map_hash_bucket_size" => {
                super::unset(&self.bucket_size, d)?;
                let size = value::parse_size(arg(d, 0)).ok_or_else(|| super::directive_err(d, "invalid value"))?;
                self.bucket_size = Some(size);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// Makes the access logs of `logs` read the maps whose value needs the answer when the line is written
/// ([`Var::AnswerMap`]). Such a map must not also need the request head (its value is computed from the answer
/// alone) nor an answer's header (those are copied only as a format names them).
pub fn answer_time_logs(logs: &mut [AccessLogConf], maps: &[Map]) -> Result<(), ConfigError> {
    use crate::config::key::Phase;
    use std::sync::Arc;
    let answer = |i: usize| maps.get(i).is_some_and(|m| m.answer_time);
    for l in logs {
        let formats = std::iter::once(&l.format).chain(l.cond.as_ref());
        let named: Vec<usize> = formats
            .flat_map(|f| f.ops())
            .filter_map(|op| match op {
                crate::config::log_format::Op::Var(Var::Map(i)) if answer(*i) => Some(*i),
                _ => None,
            })
            .collect();
        if named.is_empty() {
            continue;
        }
        for &i in &named {
            let Some(m) = maps.get(i) else { continue };
            let mixed = m.vars().any(|v| match v {
                Var::Map(j) => !answer(*j),
                Var::SentHttp(_) | Var::UpstreamHttp(_) | Var::UpstreamCookie(_) => true,
                v => v.phase() == Phase::Request && !matches!(v, Var::Capture(_)),
            });
            if mixed {
                let msg = format!(
                    "map \"${}\" in an access log, with variables of both the request and the answer (or an \
                     answer header), is not supported by corelb",
                    m.name
                );
                return Err(ConfigError::invalid(msg, &l.span));
            }
        }
        let swap = |v: &Var| match v {
            Var::Map(i) if answer(*i) => Var::AnswerMap(*i),
            other => other.clone(),
        };
        l.format = Arc::new(l.format.map_vars(swap));
        l.cond = l.cond.as_ref().map(|c| Arc::new(c.map_vars(swap)));
    }
    Ok(())
}

/// Builds the map `d` of `module`'s block.
pub fn build(d: &Directive, module: Module, vars: &mut Vars) -> Result<Map, ConfigError> {
    let source = vars.compile(arg(d, 0), module, &d.span)?;
    let raw_name = arg(d, 1);
    let Some(name) = raw_name.strip_prefix('$') else {
        let msg = format!("invalid variable name \"{raw_name}\"");
        return Err(ConfigError::invalid(msg, &d.span));
    };
    if built_in(name, module) {
        let msg = format!("the duplicate \"{name}\" variable");
        return Err(ConfigError::invalid(msg, &d.span));
    }
    let mut map = Map::new(name, source);
    let mut hostnames = false;
    for e in &block_of(d)?.items {
        let invalid = |msg: String| ConfigError::invalid(msg, &e.span);
        match (e.name.as_str(), e.args.len(), &e.block) {
            ("hostnames", 0, None) => {
                hostnames = true;
                continue;
            }
            ("volatile", 0, None) => {
                map.volatile = true;
                continue;
            }
            (_, 1, None) => {}
            _ => return Err(invalid("invalid number of the map parameters".into())),
        }
        let value = arg(e, 0);
        let key = e.name.as_str();
        if key == "default" {
            let t = vars.compile_map_value(value, module, &e.span, None)?;
            let v = map.add_value(t);
            map.set_default(v).map_err(|err| invalid(err.to_string()))?;
            continue;
        }
        if let Some(pattern) = key.strip_prefix('~') {
            let (pattern, caseless) = match pattern.strip_prefix('*') {
                Some(p) => (p, true),
                None => (pattern, false),
            };
            let index = map.values.len();
            let regex = MapRegex::compile(pattern, caseless, index).map_err(|e| invalid(e.to_string()))?;
            let t = vars.compile_map_value(value, module, &e.span, Some(&regex))?;
            map.add_value(t);
            map.add_regex(regex);
            continue;
        }
        let key = key.strip_prefix('\\').unwrap_or(key);
        let t = vars.compile_map_value(value, module, &e.span, None)?;
        let v = map.add_value(t);
        map.add_key(key, v, hostnames).map_err(|err| invalid(err.to_string()))?;
    }
    map.hostnames = hostnames;
    Ok(map)
}

/// Whether `name` is a built-in variable nginx does not let a `map` replace (all but `$args`; the prefixed
/// families are not in nginx's table, so a map may take one of their names).
fn built_in(name: &str, module: Module) -> bool {
    let lower = name.to_ascii_lowercase();
    let prefixed = [
        "http_",
        "arg_",
        "cookie_",
        "sent_http_",
        "upstream_http_",
        "upstream_cookie_",
    ]
    .iter()
    .any(|p| lower.starts_with(p));
    let known = match module {
        Module::Http => Var::from_name(&lower).is_some(),
        Module::Stream => Var::in_stream(&lower),
    };
    known && !prefixed && lower != "args" && lower != "query_string"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::map::Found;
    use crate::config::parser::parse_text;
    use std::path::Path;

    fn first_map(text: &str) -> Result<(Map, Vars), ConfigError> {
        let tree = parse_text(text.as_bytes(), Path::new("t.conf"));
        let d = tree.items.first().expect("a map");
        let mut vars = Vars::with_maps(names(&tree));
        let m = build(d, Module::Http, &mut vars)?;
        Ok((m, vars))
    }

    fn err(text: &str) -> String {
        first_map(text).unwrap_err().to_string()
    }

    #[test]
    fn entries_as_nginx_reads_them() {
        let (m, vars) = first_map(
            "map $args $y {\n hostnames;\n volatile;\n default 0;\n *.a.com star;\n \\include inc;\n\
             ~*^(?<sub>W+)\\.(b)$ $sub-$2-$y;\n server $server_name;\n}\n",
        )
        .unwrap();
        assert!(m.hostnames && m.volatile);
        let mut lower = Vec::new();
        assert_eq!(m.find(b"x.a.com", &mut lower), Some(Found::Value(1)));
        assert_eq!(m.find(b"include", &mut lower), Some(Found::Value(2)));
        assert_eq!(m.find(b"WW.B", &mut lower), Some(Found::Regex(0)));
        assert_eq!(m.find(b"nope", &mut lower), Some(Found::Value(0)));
        let parts = m.values[3].parts();
        use crate::config::key::Part;
        assert_eq!(parts[0], Part::Var(Var::Capture(1)));
        assert_eq!(parts[2], Part::Var(Var::Capture(2)));
        assert_eq!(parts[4], Part::Var(Var::Map(0)));
        assert!(m.values[4].is_only(&Var::ServerName));
        assert!(vars.finish().is_ok());
    }

    #[test]
    fn nginx_errors_and_places() {
        assert_eq!(
            err("map $args $b {\n default 1;\n default 2;\n}\n"),
            "[emerg] duplicate default map parameter in t.conf:3"
        );
        assert_eq!(
            err("map $args $b {\n A 1;\n a 2;\n}\n"),
            "[emerg] conflicting parameter \"a\" in t.conf:3"
        );
        assert_eq!(
            err("map $args $b {\n hostnames;\n a.*.com 2;\n}\n"),
            "[emerg] invalid hostname or wildcard \"a.*.com\" in t.conf:3"
        );
        assert_eq!(
            err("map $args $b {\n a 1 2;\n}\n"),
            "[emerg] invalid number of the map parameters in t.conf:2"
        );
        assert_eq!(
            err("map $args b {\n}\n"),
            "[emerg] invalid variable name \"b\" in t.conf:1"
        );
        assert_eq!(
            err("map $args $host {\n}\n"),
            "[emerg] the duplicate \"host\" variable in t.conf:1"
        );
        assert_eq!(
            err("map $args $b {\n ~(?=x) 1;\n}\n"),
            "[emerg] regular expression \"(?=x)\" uses look-around, which corelb does not support (its regex engine \
             runs in linear time, without backtracking) in t.conf:2"
        );
        assert_eq!(
            err("map $args $b {\n ~(x 1;\n}\n"),
            "[emerg] pcre2_compile() failed: missing closing parenthesis in \"(x\" in t.conf:2",
            "nginx's message, as for locations"
        );
        // PCRE syntax the regex crate lacks, as locations take it
        let (map, _) = first_map("map $args $b {\n ~^a=(?<v>\\d+)$ $v;\n}\n").unwrap();
        assert_eq!(map.regexes[0].group("v"), Some(1));
        assert!(map.regexes[0].is_match(b"a=12"));
        let (_, vars) = first_map("map $args $b {\n x $nope;\n}\n").unwrap();
        assert_eq!(
            vars.finish().unwrap_err().to_string(),
            "[emerg] unknown \"nope\" variable in t.conf:2"
        );
    }
}
