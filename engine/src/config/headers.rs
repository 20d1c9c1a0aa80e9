//! The response-header settings of a location as nginx's headers filter and proxy module read them (`add_header`,
//! `expires`, `server_tokens`, `proxy_hide_header`, `proxy_pass_header`, `proxy_redirect`), merged and resolved.

use super::key::KeyTemplate;
use super::value;

/// One `add_header NAME VALUE [always]` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddHeader {
    pub name: String,
    /// An empty value (after evaluation) adds nothing, as in nginx.
    pub value: KeyTemplate,
    /// Added whatever the status; otherwise only for nginx's "safe" statuses ([`safe_status`]).
    pub always: bool,
}

/// What `expires` sets (nginx's `ngx_http_expires_t` with its time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExpiresRule {
    #[default]
    Off,
    /// `Expires: Thu, 01 Jan 1970 00:00:01 GMT`, `Cache-Control: no-cache`.
    Epoch,
    /// `Expires: Thu, 31 Dec 2037 23:55:55 GMT`, `Cache-Control: max-age=315360000`.
    Max,
    /// Seconds after the request (negative: in the past).
    Access(i64),
    /// Seconds after the response's `Last-Modified` (as `Access` when there is none).
    Modified(i64),
    /// `@TIME`: the next time of day TIME (seconds after midnight, UTC in corelb).
    Daily(i64),
}

/// `expires` as configured: a fixed rule, or a value with variables parsed per request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Expires {
    #[default]
    Off,
    Fixed(ExpiresRule),
    /// `expires [modified] $var`: the value is read with [`parse_expires`] per request; one that does not parse
    /// sets nothing, as in nginx.
    Var {
        modified: bool,
        value: KeyTemplate,
    },
}

/// `server_tokens on|off|build`: the `Server` header and the error page footer with or without corelb's version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ServerTokens {
    /// `corelb/VERSION` (nginx's default `on`; `build` is the same, corelb has no build name).
    #[default]
    On,
    /// `corelb`.
    Off,
}

/// One `proxy_redirect FROM TO` (or `proxy_cookie_domain`/`proxy_cookie_path`) rule: a literal FROM, both with
/// variables; or (`regex`) a regular expression FROM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    pub from: KeyTemplate,
    pub to: KeyTemplate,
    pub regex: Option<Box<RegexRedirect>>,
}

/// `proxy_redirect ~REGEX TO` (`~*`: without case): a matching URL is replaced whole by TO, whose `$1`..`$9` and
/// named groups are the match's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegexRedirect {
    pub regex: super::regex::Regex,
    pub to: Vec<super::rewrite::Piece>,
}

/// The resolved response-header settings of a location (or of a server, for answers outside any location).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HeadersConf {
    /// The `add_header` lines of the nearest level that has some, in order.
    pub add: Vec<AddHeader>,
    pub expires: Expires,
    pub server_tokens: ServerTokens,
    /// `proxy_hide_header` names (lower case).
    pub hide: Vec<String>,
    /// `proxy_pass_header` names (lower case).
    pub pass: Vec<String>,
    /// `proxy_redirect` rules in order (empty: `off`, or nothing to rewrite).
    pub redirects: Vec<Redirect>,
    /// `proxy_cookie_domain` rules (FROM without its leading dot).
    pub cookie_domains: Vec<Redirect>,
    /// `proxy_cookie_path` rules.
    pub cookie_paths: Vec<Redirect>,
    /// `absolute_redirect`, `server_name_in_redirect`, `port_in_redirect`.
    pub redirect_style: RedirectStyle,
}

/// `absolute_redirect`, `server_name_in_redirect` and `port_in_redirect` (nginx's header filter): how a
/// `Location` that starts with `/` is completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedirectStyle {
    /// `absolute_redirect` (on): `SCHEME://HOST[:PORT]` goes in front of a `Location` starting with `/`.
    pub absolute: bool,
    /// `server_name_in_redirect` (off): HOST is the server's first name rather than the request's host.
    pub server_name: bool,
    /// `port_in_redirect` (on): `:PORT`, the port the client connected to, unless it is the scheme's own.
    pub port: bool,
}

impl RedirectStyle {
    /// nginx's defaults.
    pub const NGINX: RedirectStyle = RedirectStyle {
        absolute: true,
        server_name: false,
        port: true,
    };
}

impl Default for RedirectStyle {
    fn default() -> Self {
        Self::NGINX
    }
}

/// nginx's statuses that get `add_header` lines without `always`, and `expires`.
pub fn safe_status(status: u16) -> bool {
    matches!(status, 200 | 201 | 204 | 206 | 301 | 302 | 303 | 304 | 307 | 308)
}

/// `ngx_http_parse_expires`: `epoch`, `max`, `off` (unless `modified`), `@TIME` (daily, not with `modified`),
/// `[+|-]TIME`; the error is nginx's message.
pub fn parse_expires(v: &str, modified: bool) -> Result<ExpiresRule, &'static str> {
    if !modified {
        match v {
            "epoch" => return Ok(ExpiresRule::Epoch),
            "max" => return Ok(ExpiresRule::Max),
            "off" => return Ok(ExpiresRule::Off),
            _ => {}
        }
    }
    let (daily, minus, rest) = if let Some(r) = v.strip_prefix('@') {
        if modified {
            return Err("daily time cannot be used with \"modified\" parameter");
        }
        (true, false, r)
    } else if let Some(r) = v.strip_prefix('+') {
        (false, false, r)
    } else if let Some(r) = v.strip_prefix('-') {
        (false, true, r)
    } else {
        (false, false, v)
    };
    let secs = value::parse_time(rest, true).ok_or("invalid value")?;
    if daily && secs > 24 * 60 * 60 {
        return Err("daily time value must be less than 24 hours");
    }
    let secs = i64::try_from(secs).map_err(|_| "invalid value")?;
    let secs = if minus { -secs } else { secs };
    Ok(if daily {
        ExpiresRule::Daily(secs)
    } else if modified {
        ExpiresRule::Modified(secs)
    } else {
        ExpiresRule::Access(secs)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expires_values_as_nginx_parses_them() {
        assert_eq!(parse_expires("epoch", false), Ok(ExpiresRule::Epoch));
        assert_eq!(parse_expires("max", false), Ok(ExpiresRule::Max));
        assert_eq!(parse_expires("off", false), Ok(ExpiresRule::Off));
        assert_eq!(parse_expires("epoch", true), Err("invalid value"));
        assert_eq!(parse_expires("2048", false), Ok(ExpiresRule::Access(2048)));
        assert_eq!(parse_expires("-2048", false), Ok(ExpiresRule::Access(-2048)));
        assert_eq!(parse_expires("+1h", true), Ok(ExpiresRule::Modified(3600)));
        assert_eq!(parse_expires("@15h30m33s", false), Ok(ExpiresRule::Daily(55833)));
        assert_eq!(
            parse_expires("@1h", true),
            Err("daily time cannot be used with \"modified\" parameter")
        );
        assert_eq!(
            parse_expires("@25h", false),
            Err("daily time value must be less than 24 hours")
        );
        assert_eq!(parse_expires("bad", false), Err("invalid value"));
        assert_eq!(parse_expires("", false), Err("invalid value"));
        assert!(safe_status(304) && safe_status(308) && !safe_status(404) && !safe_status(202));
    }
}
