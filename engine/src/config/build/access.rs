//! `allow` and `deny` (http, server, location; stream, server): each level's rules in the order written, with
//! nginx's merge (a level with rules of its own replaces what it would inherit).

use super::{arg, Build};
use crate::config::access::{AccessRules, AccessTarget};
use crate::config::error::ConfigError;
use crate::config::parser::Directive;
use std::sync::Arc;

/// What one level writes.
#[derive(Debug, Clone, Default)]
pub struct AccessLayer {
    rules: Option<AccessRules>,
}

impl AccessLayer {
    /// Reads `d` if it is `allow` or `deny`; `Ok(false)` when it is not.
    pub fn directive(&mut self, b: &mut Build, d: &Directive) -> Result<bool, ConfigError> {
        let deny = match d.name.as_str() {
            "allow" => false,
            "deny" => true,
            _ => return Ok(false),
        };
        let target = target(b, d)?;
        self.rules.get_or_insert_with(AccessRules::default).push(target, deny);
        Ok(true)
    }

    /// These rules over `parent`'s.
    pub fn over(&self, parent: &AccessLayer) -> AccessLayer {
        AccessLayer {
            rules: self.rules.clone().or_else(|| parent.rules.clone()),
        }
    }

    /// The effective rules, `None` where no level has any (nothing to check per request).
    pub fn conf(&self) -> Option<Arc<AccessRules>> {
        self.rules.clone().map(Arc::new)
    }
}

/// nginx's `ngx_http_access_rule`: `all`, `unix:`, or an address or network (a warning when it has bits beyond
/// its prefix).
fn target(b: &mut Build, d: &Directive) -> Result<AccessTarget, ConfigError> {
    let text = arg(d, 0);
    match text {
        "all" => Ok(AccessTarget::All),
        "unix:" => Ok(AccessTarget::Unix),
        _ => {
            let Some((net, exact)) = super::realip::cidr(text) else {
                return Err(ConfigError::invalid(format!("invalid parameter \"{text}\""), &d.span));
            };
            if !exact {
                b.warn(&format!("low address bits of {text} are meaningless"), &d.span);
            }
            Ok(AccessTarget::Net(net))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn read(layer: &mut AccessLayer, name: &str, value: &str) -> Result<bool, ConfigError> {
        let mut b = Build::default();
        layer.directive(&mut b, &Directive::at_t_conf(name, &[value]))
    }

    #[test]
    fn rules_in_order_and_nginx_merge() {
        let mut http = AccessLayer::default();
        assert!(read(&mut http, "deny", "192.168.1.1").unwrap());
        assert!(read(&mut http, "allow", "192.168.1.0/24").unwrap());
        assert!(read(&mut http, "deny", "all").unwrap());
        assert!(!read(&mut http, "listen", "80").unwrap());
        let mut loc = AccessLayer::default();
        assert!(read(&mut loc, "allow", "all").unwrap());
        let a = |s: &str| SocketAddr::new(s.parse().unwrap(), 1);
        let inherited = AccessLayer::default().over(&http).conf().unwrap();
        assert!(inherited.denies(a("192.168.1.1")));
        assert!(!inherited.denies(a("192.168.1.2")));
        assert!(inherited.denies(a("10.0.0.1")));
        // the location's own rules replace the inherited ones
        assert!(!loc.over(&http).conf().unwrap().denies(a("192.168.1.1")));
        assert!(AccessLayer::default().conf().is_none());
    }

    #[test]
    fn bad_parameter_is_refused_with_nginx_words() {
        let err = read(&mut AccessLayer::default(), "allow", "10.0.0.0/33").unwrap_err();
        assert_eq!(err.to_string(), "[emerg] invalid parameter \"10.0.0.0/33\" in t.conf:3");
        assert!(read(&mut AccessLayer::default(), "deny", "localhost").is_err());
    }
}
