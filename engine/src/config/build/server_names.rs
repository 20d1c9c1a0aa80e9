//! `server_name` (`ngx_http_core_server_name`): nginx's checks, names lower-cased, `$hostname` replaced, regex
//! names (`~PATTERN`) compiled to check them (caseless when the pattern has an upper-case letter, as nginx), and the
//! named groups of every regex name in an `http` block, which are variables there.

use super::Build;
use crate::config::error::ConfigError;
use crate::config::parser::{Block, Directive};
use crate::config::regex::{self, Regex};

/// The regex of a `~PATTERN` name, compiled as nginx compiles it; `None` for other names.
pub fn regex_of(name: &str) -> Option<Result<Regex, regex::RegexError>> {
    let pattern = name.strip_prefix('~').filter(|p| !p.is_empty())?;
    Some(regex::compile(pattern, pattern.bytes().any(|c| c.is_ascii_uppercase())))
}

/// `server_name NAME...`, appended to `names` (regex names kept as written, with their `~`).
pub fn directive(b: &mut Build, d: &Directive, names: &mut Vec<String>) -> Result<(), ConfigError> {
    for v in &d.args {
        let bytes = v.as_bytes();
        let bad_wildcard = bytes.first() == Some(&b'*') && (v.len() < 3 || bytes.get(1) != Some(&b'.'));
        if bad_wildcard || (bytes.first() == Some(&b'.') && v.len() < 2) {
            return Err(ConfigError::invalid(format!("server name \"{v}\" is invalid"), &d.span));
        }
        if v.contains('/') {
            b.warn(&format!("server name \"{v}\" has suspicious symbols"), &d.span);
        }
        if v.eq_ignore_ascii_case("$hostname") {
            names.push(hostname());
        } else if v == "~" {
            return Err(ConfigError::invalid(
                format!("empty regex in server name \"{v}\""),
                &d.span,
            ));
        } else if let Some(re) = regex_of(v) {
            re.map_err(|e| ConfigError::invalid(e.to_string(), &d.span))?;
            names.push(v.clone());
        } else {
            names.push(v.to_ascii_lowercase());
        }
    }
    Ok(())
}

/// The machine's host name (nginx's `gethostname()`), lower-cased.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_ascii_lowercase())
        .unwrap_or_else(|_| "localhost".into())
}

/// nginx's `$server_name` of a server whose names are `names`: the first, without the leading dot of `.x`.
pub fn first_name(names: &[String]) -> &str {
    let first = names.first().map_or("", String::as_str);
    match first.strip_prefix('.') {
        Some(rest) if !rest.is_empty() => rest,
        _ => first,
    }
}

/// The named groups of the regex names of the `http` block `http`, each once, in config order: variables of
/// the block (a bad pattern is reported where the server is read).
pub fn capture_names(http: &Block) -> Vec<String> {
    let servers = http.items.iter().filter(|d| d.name == "server");
    let lines = servers
        .filter_map(|s| s.block.as_ref())
        .flat_map(|blk| blk.items.iter().filter(|d| d.name == "server_name"));
    group_names(lines.flat_map(|d| d.args.iter()).map(String::as_str))
}

/// The named groups of the regex names among `names` (every server's, in config order), each once: the same
/// list from the config's text ([`capture_names`]) and from its servers' names.
pub fn group_names<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for re in names.filter_map(|a| regex_of(a)?.ok()) {
        for (_, name) in re.names() {
            if !out.iter().any(|n| n == name) {
                out.push(name.to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regex_names_are_caseless_when_written_with_capitals() {
        let re = regex_of(r"~^EXAMPLE\.COM$").unwrap().unwrap();
        assert!(re.caseless() && re.is_match(b"example.com"));
        let re = regex_of(r"~^example\.com$").unwrap().unwrap();
        assert!(!re.caseless() && !re.is_match(b"EXAMPLE.com"));
        assert!(regex_of("example.com").is_none());
        assert!(regex_of("~").is_none());
        let bad = regex_of("~(x").unwrap().unwrap_err().to_string();
        assert_eq!(bad, "pcre2_compile() failed: missing closing parenthesis in \"(x\"");
    }

    #[test]
    fn server_name_variable_is_nginx_first_name() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(first_name(&names(&[".dot.example.com", "a"])), "dot.example.com");
        assert_eq!(first_name(&names(&["*.wc.example.com"])), "*.wc.example.com");
        assert_eq!(first_name(&names(&["~^EXAMPLE\\.COM$"])), "~^EXAMPLE\\.COM$");
        assert_eq!(first_name(&names(&[""])), "");
        assert_eq!(first_name(&[]), "");
    }
}
