//! The resolvers' `status_zone=` counters: bound into every `resolver` of a config when its snapshot is built
//! (the zone keeps a name's counters across reloads), and listed by name for the API and `/metrics`.

use crate::config::model::Config;
use crate::config::resolver::ResolverConf;
use corelb_shared_state::{ResolverStats, Zone};
use std::sync::Arc;

/// The status zones of a config's resolvers, by name.
#[derive(Debug, Default)]
pub struct ResolverZones {
    pub zones: Vec<(String, Arc<ResolverStats>)>,
}

impl ResolverZones {
    /// Binds every resolver of `config` that names a status zone to that zone's counters in `zone`, and forgets
    /// the zones no resolver names any more.
    pub fn bind(config: &mut Config, zone: &Zone) -> ResolverZones {
        let mut zones: Vec<(String, Arc<ResolverStats>)> = Vec::new();
        let mut bind = |slot: &mut Option<Arc<ResolverConf>>| {
            let Some(conf) = slot.as_mut().filter(|c| c.status_zone.is_some()) else {
                return;
            };
            Arc::make_mut(conf).bind_stats(&|name| zone.resolver_stats(name));
            if let (Some(name), Some(stats)) = (&conf.status_zone, &conf.stats.0) {
                if !zones.iter().any(|(n, _)| n == name) {
                    zones.push((name.clone(), Arc::clone(stats)));
                }
            }
        };
        if let Some(http) = &mut config.http {
            for u in &mut http.upstreams {
                bind(&mut u.resolver);
            }
            for l in http.servers.iter_mut().flat_map(|s| s.locations.iter_mut()) {
                bind(&mut l.proxy.resolver);
            }
        }
        if let Some(stream) = &mut config.stream {
            for u in &mut stream.upstreams {
                bind(&mut u.resolver);
            }
        }
        zones.sort_by(|a, b| a.0.cmp(&b.0));
        let names: Vec<&str> = zones.iter().map(|(n, _)| n.as_str()).collect();
        zone.retain_resolvers(&names);
        ResolverZones { zones }
    }

    /// The counters of zone `name`.
    pub fn get(&self, name: &str) -> Option<&ResolverStats> {
        self.zones.iter().find(|(n, _)| n == name).map(|(_, s)| &**s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_str;
    use corelb_shared_state::Asked;
    use std::path::Path;

    fn config(text: &str) -> Config {
        parse_str(text, Path::new("t.conf")).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn every_resolver_of_a_zone_shares_its_counters_across_loads() {
        let text = "events {} http { resolver 127.0.0.1:5353 status_zone=dns; \
            upstream u { zone z 1m; resolver 127.0.0.2 status_zone=up; server a.test resolve; } \
            server { listen 127.0.0.1:1; location / { proxy_pass http://$host; } \
            location /u { proxy_pass http://u; } location /x { resolver 127.0.0.3; proxy_pass http://$host; } } }";
        let zone = Zone::new();
        let mut c = config(text);
        let zones = ResolverZones::bind(&mut c, &zone);
        let names: Vec<&str> = zones.zones.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["dns", "up"]);
        let http = c.http.as_ref().unwrap();
        let loc = |i: usize| http.servers[0].locations[i].proxy.resolver.clone().unwrap();
        loc(0).count_asked(Asked::Name);
        http.upstreams[0].resolver.as_ref().unwrap().count_asked(Asked::Srv);
        loc(2).count_asked(Asked::Name);
        assert_eq!(zones.get("dns").unwrap().requests(), [1, 0, 0]);
        assert_eq!(zones.get("up").unwrap().requests(), [0, 1, 0]);
        assert!(loc(2).stats.0.is_none(), "a resolver without a zone counts nowhere");
        let mut again = config(text);
        let kept = ResolverZones::bind(&mut again, &zone);
        assert_eq!(
            kept.get("dns").unwrap().requests(),
            [1, 0, 0],
            "a reload keeps the counters"
        );
        let mut other = config("events {} http { resolver 127.0.0.1 status_zone=up; server { listen 127.0.0.1:1; } }");
        let other_zones = ResolverZones::bind(&mut other, &zone);
        assert!(other_zones.get("dns").is_none());
        assert_eq!(
            zone.resolver_stats("dns").requests(),
            [0; 3],
            "a zone no longer named is forgotten"
        );
    }
}
