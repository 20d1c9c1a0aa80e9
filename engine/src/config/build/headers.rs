//! The response-header directives of one http, server or location level (`add_header`, `expires`,
//! `server_tokens`, `proxy_hide_header`, `proxy_pass_header`, `proxy_redirect`), merged child over parent as
//! nginx's headers filter and proxy module merge them.

use super::vars::{Module, Vars};
use super::{arg, directive_err};
use crate::config::error::ConfigError;
use crate::config::headers::{
    parse_expires, AddHeader, Expires, ExpiresRule, HeadersConf, Redirect, RedirectStyle, ServerTokens,
};
use crate::config::key::{KeyTemplate, Part};
use crate::config::parser::Directive;

/// `proxy_redirect` at one level: nginx's `redirect` flag and `redirects` array.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum RedirectLayer {
    /// Not set here.
    #[default]
    Unset,
    Off,
    /// `default` and `FROM TO` lines, in order.
    Rules(Vec<Redirect>),
}

impl RedirectLayer {
    fn rules(&self) -> Vec<Redirect> {
        match self {
            RedirectLayer::Rules(r) => r.clone(),
            RedirectLayer::Unset | RedirectLayer::Off => Vec::new(),
        }
    }
}

/// A level's own setting, else its parent's (`ngx_conf_merge_ptr_value`).
fn inherit(own: &RedirectLayer, parent: &RedirectLayer) -> RedirectLayer {
    match own {
        RedirectLayer::Unset => parent.clone(),
        own => own.clone(),
    }
}

/// `proxy_cookie_domain`/`proxy_cookie_path`: `off`, or `FROM TO` (a leading dot of a domain FROM and TO
/// dropped, as nginx drops it); a regular expression FROM is refused by name.
fn cookie_rule(slot: &mut RedirectLayer, vars: &mut Vars, d: &Directive) -> Result<(), ConfigError> {
    if *slot == RedirectLayer::Off {
        return Err(directive_err(d, "is duplicate"));
    }
    let first = arg(d, 0);
    if d.args.len() == 1 {
        if first != "off" {
            return Err(ConfigError::invalid(format!("invalid parameter \"{first}\""), &d.span));
        }
        if *slot != RedirectLayer::Unset {
            return Err(directive_err(d, "is duplicate"));
        }
        *slot = RedirectLayer::Off;
        return Ok(());
    }
    if first.starts_with('~') {
        let msg = format!("\"{}\" with a regular expression is not supported by corelb", d.name);
        return Err(ConfigError::invalid(msg, &d.span));
    }
    let domain = d.name == "proxy_cookie_domain";
    let undot = |s: &str| -> String {
        match s.strip_prefix('.') {
            Some(rest) if domain => rest.to_string(),
            _ => s.to_string(),
        }
    };
    let rule = Redirect {
        from: compile(vars, &undot(first), d)?,
        to: compile(vars, &undot(arg(d, 1)), d)?,
        regex: None,
    };
    match slot {
        RedirectLayer::Rules(rules) => rules.push(rule),
        other => *other = RedirectLayer::Rules(vec![rule]),
    }
    Ok(())
}

/// The header settings one level sets.
#[derive(Debug, Clone, Default)]
pub struct HeadersLayer {
    /// `add_header` lines; `Some` when this level has its own (then it inherits none).
    add: Option<Vec<AddHeader>>,
    expires: Option<Expires>,
    server_tokens: Option<ServerTokens>,
    hide: Option<Vec<String>>,
    pass: Option<Vec<String>>,
    redirect: RedirectLayer,
    cookie_domain: RedirectLayer,
    cookie_path: RedirectLayer,
    /// This level's `proxy_pass` URL as written and the location's name (for `proxy_redirect default`).
    proxy_url: Option<(String, String)>,
    /// `absolute_redirect`, `server_name_in_redirect`, `port_in_redirect`.
    absolute: Option<bool>,
    server_name_in: Option<bool>,
    port_in: Option<bool>,
}

impl HeadersLayer {
    /// Notes the location's `proxy_pass URL` (read before the `proxy_redirect default` that needs it).
    pub fn proxy_pass_seen(&mut self, url: &str, location: &str) {
        self.proxy_url = Some((url.to_string(), location.to_string()));
    }

    /// Reads `d` if it is one of the header directives; `Ok(false)` when it is not.
    pub fn directive(&mut self, vars: &mut Vars, d: &Directive) -> Result<bool, ConfigError> {
        match d.name.as_str() {
            "add_header" => {
                let value = compile(vars, arg(d, 1), d)?;
                let always = match d.args.get(2).map(String::as_str) {
                    None => false,
                    Some("always") => true,
                    Some(other) => return Err(ConfigError::invalid(format!("invalid parameter \"{other}\""), &d.span)),
                };
                self.add.get_or_insert_with(Vec::new).push(AddHeader {
                    name: arg(d, 0).to_string(),
                    value,
                    always,
                });
            }
            "expires" => {
                if self.expires.is_some() {
                    return Err(directive_err(d, "is duplicate"));
                }
                let (modified, raw) = match d.args.as_slice() {
                    [v] => (false, v.as_str()),
                    [m, v] if m == "modified" => (true, v.as_str()),
                    _ => return Err(directive_err(d, "invalid value")),
                };
                let value = compile(vars, raw, d)?;
                let expires = if has_variables(&value) {
                    Expires::Var { modified, value }
                } else {
                    match parse_expires(raw, modified).map_err(|e| directive_err(d, e))? {
                        ExpiresRule::Off => Expires::Off,
                        rule => Expires::Fixed(rule),
                    }
                };
                self.expires = Some(expires);
            }
            "server_tokens" => {
                if self.server_tokens.is_some() {
                    return Err(directive_err(d, "is duplicate"));
                }
                self.server_tokens = Some(match arg(d, 0) {
                    "on" | "build" => ServerTokens::On,
                    "off" => ServerTokens::Off,
                    v => return Err(ConfigError::invalid(format!("invalid value \"{v}\""), &d.span)),
                });
            }
            "proxy_hide_header" => self
                .hide
                .get_or_insert_with(Vec::new)
                .push(arg(d, 0).to_ascii_lowercase()),
            "proxy_pass_header" => self
                .pass
                .get_or_insert_with(Vec::new)
                .push(arg(d, 0).to_ascii_lowercase()),
            "proxy_redirect" => self.proxy_redirect(vars, d)?,
            "absolute_redirect" => super::flag_slot(&mut self.absolute, d)?,
            "server_name_in_redirect" => super::flag_slot(&mut self.server_name_in, d)?,
            "port_in_redirect" => super::flag_slot(&mut self.port_in, d)?,
            "msie_padding" | "msie_refresh" => {
                // corelb pads no page and refreshes no redirect: what nginx does with `off`
                let mut on = None;
                super::flag_slot(&mut on, d)?;
                if on == Some(true) {
                    let msg = format!("\"{} on\" is not supported by corelb (README: error pages)", d.name);
                    return Err(ConfigError::invalid(msg, &d.span));
                }
            }
            "proxy_cookie_domain" => cookie_rule(&mut self.cookie_domain, vars, d)?,
            "proxy_cookie_path" => cookie_rule(&mut self.cookie_path, vars, d)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// `ngx_http_proxy_redirect`: `off`, `default` (after `proxy_pass`), or `FROM TO` (a literal FROM, or a `~`
    /// regex one: [`super::regex_redirect`]).
    fn proxy_redirect(&mut self, vars: &mut Vars, d: &Directive) -> Result<(), ConfigError> {
        if self.redirect == RedirectLayer::Off {
            return Err(directive_err(d, "is duplicate"));
        }
        let first = arg(d, 0);
        if d.args.len() == 1 {
            if first == "off" {
                if self.redirect != RedirectLayer::Unset {
                    return Err(directive_err(d, "is duplicate"));
                }
                self.redirect = RedirectLayer::Off;
                return Ok(());
            }
            if first != "default" {
                return Err(ConfigError::invalid(format!("invalid parameter \"{first}\""), &d.span));
            }
            let Some((url, location)) = &self.proxy_url else {
                let msg = "\"proxy_redirect default\" should be placed after the \"proxy_pass\" directive";
                return Err(ConfigError::invalid(msg, &d.span));
            };
            let rule = default_rule_of(url, location);
            self.push_rule(rule);
            return Ok(());
        }
        if let Some(pattern) = first.strip_prefix('~') {
            let rule = super::regex_redirect::rule(pattern, arg(d, 1), vars, d)?;
            self.push_rule(rule);
            return Ok(());
        }
        let from = compile(vars, first, d)?;
        let to = compile(vars, arg(d, 1), d)?;
        self.push_rule(Redirect { from, to, regex: None });
        Ok(())
    }

    fn push_rule(&mut self, rule: Redirect) {
        match &mut self.redirect {
            RedirectLayer::Rules(rules) => rules.push(rule),
            other => *other = RedirectLayer::Rules(vec![rule]),
        }
    }

    /// These settings over `parent`'s: nginx's merge (a level with its own `add_header` lines keeps only those;
    /// `proxy_redirect` rules inherit unless set here, and a level with `proxy_pass` and none gets `default`).
    pub fn over(&self, parent: &HeadersLayer) -> HeadersLayer {
        let redirect = match (&self.redirect, &parent.redirect) {
            (RedirectLayer::Unset, inherited) => inherited.clone(),
            (own, _) => own.clone(),
        };
        let redirect = match (redirect, &self.proxy_url) {
            (RedirectLayer::Unset, Some((url, location))) => RedirectLayer::Rules(vec![default_rule_of(url, location)]),
            (r, _) => r,
        };
        HeadersLayer {
            add: self.add.clone().or_else(|| parent.add.clone()),
            expires: self.expires.clone().or_else(|| parent.expires.clone()),
            server_tokens: self.server_tokens.or(parent.server_tokens),
            hide: self.hide.clone().or_else(|| parent.hide.clone()),
            pass: self.pass.clone().or_else(|| parent.pass.clone()),
            redirect,
            cookie_domain: inherit(&self.cookie_domain, &parent.cookie_domain),
            cookie_path: inherit(&self.cookie_path, &parent.cookie_path),
            proxy_url: None,
            absolute: self.absolute.or(parent.absolute),
            server_name_in: self.server_name_in.or(parent.server_name_in),
            port_in: self.port_in.or(parent.port_in),
        }
    }

    /// The settings with nginx's defaults for what no level set.
    pub fn conf(&self) -> HeadersConf {
        HeadersConf {
            add: self.add.clone().unwrap_or_default(),
            expires: self.expires.clone().unwrap_or_default(),
            server_tokens: self.server_tokens.unwrap_or_default(),
            hide: self.hide.clone().unwrap_or_default(),
            pass: self.pass.clone().unwrap_or_default(),
            redirects: self.redirect.rules(),
            cookie_domains: self.cookie_domain.rules(),
            cookie_paths: self.cookie_path.rules(),
            redirect_style: RedirectStyle {
                absolute: self.absolute.unwrap_or(RedirectStyle::NGINX.absolute),
                server_name: self.server_name_in.unwrap_or(RedirectStyle::NGINX.server_name),
                port: self.port_in.unwrap_or(RedirectStyle::NGINX.port),
            },
        }
    }
}

/// A value with variables, checked as nginx's complex values are.
fn compile(vars: &mut Vars, raw: &str, d: &Directive) -> Result<KeyTemplate, ConfigError> {
    vars.compile(raw, Module::Http, &d.span)
}

fn has_variables(t: &KeyTemplate) -> bool {
    t.parts().iter().any(|p| matches!(p, Part::Var(_)))
}

/// `proxy_redirect default` of `proxy_pass URL` in location `location`: the URL with its URI part is replaced by
/// the location's name; a URL without one, followed by `/`, by `/`.
fn default_rule_of(url: &str, location: &str) -> Redirect {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let has_uri = url.get(after_scheme..).is_some_and(|rest| rest.contains('/'));
    let (from, to) = if has_uri {
        (url.to_string(), location.to_string())
    } else {
        (format!("{url}/"), "/".to_string())
    };
    Redirect {
        from: KeyTemplate::literal(&from),
        to: KeyTemplate::literal(&to),
        regex: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(name: &str, args: &[&str]) -> Directive {
        Directive::at_t_conf(name, args)
    }

    fn layer(lines: &[(&str, &[&str])]) -> HeadersLayer {
        let mut l = HeadersLayer::default();
        let mut vars = Vars::default();
        for (name, args) in lines {
            assert!(l.directive(&mut vars, &d(name, args)).unwrap(), "{name}");
        }
        l
    }

    fn names(c: &HeadersConf) -> Vec<String> {
        c.add.iter().map(|a| format!("{}={}", a.name, a.value.raw())).collect()
    }

    #[test]
    fn a_level_with_its_own_add_header_inherits_none() {
        let http = layer(&[("add_header", &["X-Http", "1"]), ("add_header", &["X-Both", "h"])]);
        let server = layer(&[("add_header", &["X-Server", "2", "always"])]);
        let plain_server = layer(&[("expires", &["1h"])]);
        let location = HeadersLayer::default();
        let s = server.over(&http);
        assert_eq!(names(&location.over(&s).conf()), ["X-Server=2"]);
        assert!(location.over(&s).conf().add[0].always);
        let s = plain_server.over(&http);
        let l = location.over(&s).conf();
        assert_eq!(names(&l), ["X-Http=1", "X-Both=h"]);
        assert_eq!(l.expires, Expires::Fixed(ExpiresRule::Access(3600)));
        let own = layer(&[("add_header", &["X-Loc", "$uri"])]);
        assert_eq!(names(&own.over(&s).conf()), ["X-Loc=$uri"]);
        assert_eq!(HeadersLayer::default().conf(), HeadersConf::default());
        // `absolute_redirect` and its companions inherit each on its own
        let mut vars = Vars::default();
        let mut server = HeadersLayer::default();
        server.directive(&mut vars, &d("absolute_redirect", &["off"])).unwrap();
        let mut loc = HeadersLayer::default();
        loc.directive(&mut vars, &d("port_in_redirect", &["off"])).unwrap();
        let style = loc.over(&server).conf().redirect_style;
        assert_eq!((style.absolute, style.server_name, style.port), (false, false, false));
    }

    #[test]
    fn refusals_have_nginx_messages() {
        let mut vars = Vars::default();
        let mut err = |lines: &[(&str, &[&str])]| {
            let mut l = HeadersLayer::default();
            let mut last = None;
            for (name, args) in lines {
                if let Err(e) = l.directive(&mut vars, &d(name, args)) {
                    last = Some(e.to_string());
                }
            }
            last.unwrap()
        };
        assert_eq!(
            err(&[("add_header", &["A", "b", "c"])]),
            "[emerg] invalid parameter \"c\" in t.conf:3"
        );
        assert_eq!(
            err(&[("expires", &["1"]), ("expires", &["2"])]),
            "[emerg] \"expires\" directive is duplicate in t.conf:3"
        );
        assert_eq!(
            err(&[("expires", &["1", "2"])]),
            "[emerg] \"expires\" directive invalid value in t.conf:3"
        );
        assert_eq!(
            err(&[("expires", &["@25h"])]),
            "[emerg] \"expires\" directive daily time value must be less than 24 hours in t.conf:3"
        );
        assert_eq!(
            err(&[("server_tokens", &["x"])]),
            "[emerg] invalid value \"x\" in t.conf:3"
        );
        assert_eq!(
            err(&[("absolute_redirect", &["yes"])]),
            "[emerg] invalid value \"yes\" in \"absolute_redirect\" directive, it must be \"on\" or \"off\" in t.conf:3"
        );
        assert_eq!(
            err(&[("msie_padding", &["on"])]),
            "[emerg] \"msie_padding on\" is not supported by corelb (README: error pages) in t.conf:3"
        );
        assert_eq!(
            err(&[("port_in_redirect", &["off"]), ("port_in_redirect", &["on"])]),
            "[emerg] \"port_in_redirect\" directive is duplicate in t.conf:3"
        );
        assert_eq!(
            err(&[("proxy_redirect", &["default"])]),
            "[emerg] \"proxy_redirect default\" should be placed after the \"proxy_pass\" directive in t.conf:3"
        );
        assert_eq!(
            err(&[("proxy_redirect", &["a"])]),
            "[emerg] invalid parameter \"a\" in t.conf:3"
        );
        assert_eq!(
            err(&[("proxy_redirect", &["a", "b"]), ("proxy_redirect", &["off"])]),
            "[emerg] \"proxy_redirect\" directive is duplicate in t.conf:3"
        );
        assert_eq!(
            err(&[("proxy_redirect", &["off"]), ("proxy_redirect", &["off"])]),
            "[emerg] \"proxy_redirect\" directive is duplicate in t.conf:3"
        );
        assert!(err(&[("proxy_redirect", &["~^/a", "/$host"])]).contains("is not supported by corelb"));
    }

    fn rules(c: &HeadersConf) -> Vec<(String, String)> {
        c.redirects
            .iter()
            .map(|r| (r.from.raw().to_string(), r.to.raw().to_string()))
            .collect()
    }

    #[test]
    fn proxy_redirect_default_off_and_inheritance() {
        // location /impl_default/ { proxy_pass http://127.0.0.1:8081/replace_this/; }
        let mut with_uri = HeadersLayer::default();
        with_uri.proxy_pass_seen("http://127.0.0.1:8081/replace_this/", "/impl_default/");
        let server = HeadersLayer::default().over(&HeadersLayer::default());
        assert_eq!(
            rules(&with_uri.over(&server).conf()),
            [("http://127.0.0.1:8081/replace_this/".into(), "/impl_default/".into())]
        );
        // proxy_pass without a URI part: URL/ -> /
        let mut bare = HeadersLayer::default();
        bare.proxy_pass_seen("http://127.0.0.1:8081", "/x/");
        assert_eq!(
            rules(&bare.over(&server).conf()),
            [("http://127.0.0.1:8081/".into(), "/".into())]
        );
        // off at the parent is inherited; a child's own rules replace it; a grandchild inherits those
        let off = layer(&[("proxy_redirect", &["off"])]);
        let mut child = HeadersLayer::default();
        child.proxy_pass_seen("http://127.0.0.1:8081", "/off/on/");
        assert!(child.over(&off).conf().redirects.is_empty());
        let mut own = layer(&[]);
        own.proxy_pass_seen("http://127.0.0.1:8081", "/off/on/");
        let mut vars = Vars::default();
        own.directive(&mut vars, &d("proxy_redirect", &["http://127.0.0.1:8081/off/", "/"]))
            .unwrap();
        let merged = own.over(&off);
        let mut grandchild = HeadersLayer::default();
        grandchild.proxy_pass_seen("http://127.0.0.1:8081", "/off/on/on/");
        assert_eq!(
            rules(&grandchild.over(&merged).conf()),
            [("http://127.0.0.1:8081/off/".into(), "/".into())]
        );
        // explicit default after proxy_pass, beside another rule
        let mut explicit = HeadersLayer::default();
        explicit.proxy_pass_seen("http://u/replace_this/", "/expl_default/");
        explicit
            .directive(&mut vars, &d("proxy_redirect", &["wrong", "wrong"]))
            .unwrap();
        explicit
            .directive(&mut vars, &d("proxy_redirect", &["default"]))
            .unwrap();
        assert_eq!(
            rules(&explicit.over(&server).conf()),
            [
                ("wrong".into(), "wrong".into()),
                ("http://u/replace_this/".into(), "/expl_default/".into())
            ]
        );
    }

    #[test]
    fn cookie_rules_off_and_inheritance() {
        let server = layer(&[
            ("proxy_cookie_domain", &[".backend", ".example.com"]),
            ("proxy_cookie_path", &["/app/", "/"]),
        ]);
        let c = HeadersLayer::default().over(&server).conf();
        assert_eq!(
            c.cookie_domains
                .iter()
                .map(|r| (r.from.raw(), r.to.raw()))
                .collect::<Vec<_>>(),
            [("backend", "example.com")]
        );
        assert_eq!(c.cookie_paths.len(), 1);
        let off = layer(&[("proxy_cookie_domain", &["off"])]);
        let c = off.over(&server).conf();
        assert!(c.cookie_domains.is_empty() && c.cookie_paths.len() == 1);
        let mut vars = Vars::default();
        let mut l = layer(&[("proxy_cookie_path", &["off"])]);
        let e = l
            .directive(&mut vars, &d("proxy_cookie_path", &["/a", "/b"]))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "[emerg] \"proxy_cookie_path\" directive is duplicate in t.conf:3"
        );
        let e = l.directive(&mut vars, &d("proxy_cookie_domain", &["x"])).unwrap_err();
        assert_eq!(e.to_string(), "[emerg] invalid parameter \"x\" in t.conf:3");
        let e = l
            .directive(&mut vars, &d("proxy_cookie_domain", &["~x", "y"]))
            .unwrap_err();
        assert!(e.to_string().contains("is not supported by corelb"), "{e}");
    }

    #[test]
    fn hide_and_pass_inherit_each_on_its_own() {
        let server = layer(&[("proxy_hide_header", &["X-Secret"]), ("proxy_pass_header", &["Server"])]);
        let loc = layer(&[("proxy_hide_header", &["X-Other"])]);
        let c = loc.over(&server).conf();
        assert_eq!(c.hide, ["x-other"]);
        assert_eq!(c.pass, ["server"]);
    }
}
