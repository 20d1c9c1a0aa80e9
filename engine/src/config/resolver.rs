//! `resolver ADDRESS... [valid=TIME] [ipv4=on|off] [ipv6=on|off] [status_zone=NAME]` and `resolver_timeout`, read as nginx's
//! `ngx_resolver_create` reads them: name servers on port 53 unless one is written, names among them resolved at
//! load through the system resolver.

use super::error::ConfigError;
use super::parser::Directive;
use super::url::{parse_url, UrlOpts};
use super::value::parse_time;
use corelb_shared_state::{Answered, Asked, ResolverStats};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// nginx's `resolver_timeout` default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// One level's `resolver`, with the `resolver_timeout` that applies there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolverConf {
    /// The name servers, queried in turn.
    pub servers: Vec<SocketAddr>,
    /// `valid=`: how long an answer is kept, instead of its records' TTL.
    pub valid: Option<Duration>,
    /// `ipv4=` (default on): `A` records are asked for.
    pub ipv4: bool,
    /// `ipv6=` (default on): `AAAA` records are asked for.
    pub ipv6: bool,
    /// `resolver_timeout` (default 30s): how long one name's lookup may take.
    pub timeout: Duration,
    /// What the answers are kept under: a hash of what decides them (servers, `valid=`, `ipv4=`, `ipv6=`), so
    /// that lines alike share their answers, also across a reload.
    pub cache_key: u64,
    /// `status_zone=` (nginx Plus): the zone whose counters the API and `/metrics` show.
    pub status_zone: Option<String>,
    /// That zone's counters, bound when the snapshot is built ([`ResolverConf::bind_stats`]).
    pub stats: StatsLink,
}

/// The counters of a resolver's status zone. Not part of what a `resolver` line says: two lines alike are equal
/// whatever their links.
#[derive(Debug, Clone, Default)]
pub struct StatsLink(pub Option<Arc<ResolverStats>>);

impl PartialEq for StatsLink {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for StatsLink {}

impl ResolverConf {
    /// Counts a query sent (when the resolver has a status zone).
    pub fn count_asked(&self, what: Asked) {
        if let Some(s) = &self.stats.0 {
            s.asked(what);
        }
    }

    /// Counts how a query ended.
    pub fn count_answered(&self, how: Answered) {
        if let Some(s) = &self.stats.0 {
            s.answered(how);
        }
    }

    /// Binds the counters of its status zone (from `zone_of`, by name); a resolver without one keeps none.
    pub fn bind_stats(&mut self, zone_of: &impl Fn(&str) -> Arc<ResolverStats>) {
        self.stats = StatsLink(self.status_zone.as_deref().map(zone_of));
    }
}

/// The [`ResolverConf::cache_key`] of these settings.
fn cache_key(servers: &[SocketAddr], valid: Option<Duration>, ipv4: bool, ipv6: bool) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (servers, valid, ipv4, ipv6).hash(&mut h);
    h.finish()
}

/// Reads a `resolver` line (its timeout is set later, from the level's `resolver_timeout`).
pub fn parse(d: &Directive) -> Result<ResolverConf, ConfigError> {
    let mut conf = ResolverConf {
        servers: Vec::new(),
        valid: None,
        ipv4: true,
        ipv6: true,
        timeout: DEFAULT_TIMEOUT,
        cache_key: 0,
        status_zone: None,
        stats: StatsLink::default(),
    };
    let invalid = |a: &str| ConfigError::invalid(format!("invalid parameter: {a}"), &d.span);
    let flag = |a: &str, v: &str| match v {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(invalid(a)),
    };
    for a in &d.args {
        if let Some(v) = a.strip_prefix("valid=") {
            let secs = parse_time(v, true).ok_or_else(|| invalid(a))?;
            // nginx: `valid=0` is no `valid=` (the answers' TTL)
            conf.valid = (secs > 0).then(|| Duration::from_secs(secs));
        } else if let Some(v) = a.strip_prefix("ipv4=") {
            conf.ipv4 = flag(a, v)?;
        } else if let Some(v) = a.strip_prefix("ipv6=") {
            conf.ipv6 = flag(a, v)?;
        } else if let Some(v) = a.strip_prefix("status_zone=") {
            if v.is_empty() {
                return Err(invalid(a));
            }
            conf.status_zone = Some(v.to_string());
        } else {
            let opts = UrlOpts {
                default_port: 53,
                ..UrlOpts::default()
            };
            let url =
                parse_url(a, opts).map_err(|e| ConfigError::invalid(format!("{e} in resolver \"{a}\""), &d.span))?;
            conf.servers.extend(url.addrs);
        }
    }
    if !conf.ipv4 && !conf.ipv6 {
        return Err(ConfigError::invalid(
            "\"ipv4\" and \"ipv6\" cannot both be \"off\"",
            &d.span,
        ));
    }
    if conf.servers.is_empty() {
        return Err(ConfigError::invalid("no name servers defined", &d.span));
    }
    conf.cache_key = cache_key(&conf.servers, conf.valid, conf.ipv4, conf.ipv6);
    Ok(conf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(args: &str) -> Result<ResolverConf, String> {
        let args: Vec<&str> = args.split(' ').collect();
        let d = Directive::at_t_conf("resolver", &args);
        parse(&d).map_err(|e| e.to_string())
    }

    #[test]
    fn servers_and_parameters() {
        let c = read("127.0.0.1 127.0.0.2:5353 [::1]:54 valid=30s ipv6=off").unwrap();
        let servers: Vec<String> = c.servers.iter().map(|s| s.to_string()).collect();
        assert_eq!(servers, ["127.0.0.1:53", "127.0.0.2:5353", "[::1]:54"]);
        assert_eq!(c.valid, Some(Duration::from_secs(30)));
        assert!(c.ipv4 && !c.ipv6);
        assert_eq!(c.timeout, DEFAULT_TIMEOUT);
        assert_eq!(
            read("127.0.0.1 valid=0").unwrap().valid,
            None,
            "valid=0 is the TTL, as nginx"
        );
        let key = |a: &str| read(a).unwrap().cache_key;
        assert_eq!(key("127.0.0.1 valid=5s"), key("127.0.0.1:53 valid=5s"));
        assert_ne!(key("127.0.0.1"), key("127.0.0.1 ipv6=off"));
        assert_eq!(
            key("127.0.0.1"),
            key("127.0.0.1 status_zone=dns"),
            "the zone decides no answer"
        );
    }

    #[test]
    fn status_zone_counts_once_bound() {
        let mut c = read("127.0.0.1 status_zone=dns").unwrap();
        assert_eq!(c.status_zone.as_deref(), Some("dns"));
        c.count_asked(Asked::Name);
        let zone = corelb_shared_state::Zone::new();
        c.bind_stats(&|name| zone.resolver_stats(name));
        c.count_asked(Asked::Srv);
        c.count_answered(Answered::NxDomain);
        let s = zone.resolver_stats("dns");
        assert_eq!(s.requests(), [0, 1, 0], "counted from the binding on");
        assert_eq!(s.responses()[Answered::NxDomain as usize], 1);
        let mut plain = read("127.0.0.1").unwrap();
        plain.bind_stats(&|name| zone.resolver_stats(name));
        assert!(plain.stats.0.is_none());
        assert!(read("127.0.0.1 status_zone=")
            .unwrap_err()
            .contains("invalid parameter: status_zone="));
    }

    #[test]
    fn nginx_messages() {
        let msg = |a: &str| read(a).unwrap_err();
        assert!(
            msg("127.0.0.1 valid=x").contains("invalid parameter: valid=x"),
            "{}",
            msg("127.0.0.1 valid=x")
        );
        assert!(msg("127.0.0.1 ipv6=no").contains("invalid parameter: ipv6=no"));
        assert!(msg("127.0.0.1 ipv4=off ipv6=off").contains("\"ipv4\" and \"ipv6\" cannot both be \"off\""));
        assert!(msg("valid=10s").contains("no name servers defined"));
        assert!(
            msg("127.0.0.1:x").contains("invalid port in resolver \"127.0.0.1:x\""),
            "{}",
            msg("127.0.0.1:x")
        );
    }
}
