//! What a request's variables keep once computed, in the connection's reused buffers: `$request_id`, the
//! rendered times, and each `map`'s value (evaluated at its first use, once per request unless `volatile`).

use crate::clock::texts::LogClock;
use crate::config::key::{Var, VarSource};
use crate::config::map::{Found, Map};
use std::cell::{Cell, RefCell};

/// Where a map's value stands in this request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Unset,
    /// Being evaluated: a map that needs itself (a cycle) reads as empty.
    Busy,
    Done,
}

/// One map's buffers.
#[derive(Debug)]
struct Slot {
    state: Cell<State>,
    /// The source's value.
    key: RefCell<Vec<u8>>,
    lower: RefCell<Vec<u8>>,
    value: RefCell<Vec<u8>>,
    /// The groups of the map's regex key that matched (a reused buffer).
    captures: RefCell<crate::config::regex::Captures>,
}

impl Default for Slot {
    fn default() -> Self {
        Slot {
            state: Cell::new(State::Unset),
            key: RefCell::new(Vec::with_capacity(64)),
            lower: RefCell::new(Vec::with_capacity(64)),
            value: RefCell::new(Vec::with_capacity(64)),
            captures: RefCell::new(crate::config::regex::Captures::default()),
        }
    }
}

/// The per-request cache of one connection.
#[derive(Debug, Default)]
pub struct VarCache {
    request_id: Cell<Option<[u8; 32]>>,
    clock: RefCell<LogClock>,
    clock_read: Cell<bool>,
    maps: Vec<Slot>,
    /// The values `set` gave this request's variables.
    pub users: crate::http::user_vars::UserVars,
    /// `$limit_req_status`, `$limit_conn_status` (reset by the request's first pass only).
    pub limits: crate::http::limit_status::LimitStatus,
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl VarCache {
    /// Starts a request of a config with `maps` maps: nothing of the last request is kept.
    pub fn begin(&mut self, maps: usize) {
        self.request_id.set(None);
        self.clock_read.set(false);
        self.users.begin();
        if self.maps.len() < maps {
            self.maps.resize_with(maps, Slot::default);
        }
        for s in &self.maps {
            s.state.set(State::Unset);
        }
    }

    /// `$request_id`: 16 random bytes as 32 hex digits, drawn at the first use in the request.
    pub fn append_request_id(&self, out: &mut Vec<u8>) {
        let id = self.request_id.get().unwrap_or_else(|| {
            let bytes: [u8; 16] = rand::random();
            let mut id = [0u8; 32];
            for (i, b) in bytes.iter().enumerate() {
                id[2 * i] = HEX[usize::from(b >> 4)];
                id[2 * i + 1] = HEX[usize::from(b & 15)];
            }
            self.request_id.set(Some(id));
            id
        });
        out.extend_from_slice(&id);
    }

    /// `$time_local`, `$time_iso8601` or `$msec`, the clock read once per request.
    pub fn append_time(&self, var: &Var, out: &mut Vec<u8>) {
        let mut clock = self.clock.borrow_mut();
        if !self.clock_read.replace(true) {
            clock.update();
        }
        match var {
            Var::TimeLocal => out.extend_from_slice(&clock.local),
            Var::TimeIso8601 => out.extend_from_slice(&clock.iso8601),
            _ => clock.append_msec(out),
        }
    }

    /// Appends the value of map `index` of `maps`, with the other variables from `src`.
    pub fn append_map(&self, maps: &[Map], index: usize, src: &dyn VarSource, out: &mut Vec<u8>) {
        let (Some(map), Some(slot)) = (maps.get(index), self.maps.get(index)) else {
            return;
        };
        match slot.state.get() {
            State::Done => {
                out.extend_from_slice(&slot.value.borrow());
                return;
            }
            State::Busy => return,
            State::Unset => {}
        }
        slot.state.set(State::Busy);
        // The buffers are taken out while nested variables (other maps) are evaluated, and put back after.
        let mut key = slot.key.take();
        let mut lower = slot.lower.take();
        let mut value = slot.value.take();
        map.source.eval_into(src, &mut key);
        if map.hostnames && key.last() == Some(&b'.') {
            key.pop();
        }
        if let Some(geo) = map.geo.as_deref().filter(|g| g.proxied()) {
            geo_forwarded(geo, src, &mut key, &mut lower);
        }
        value.clear();
        match map.find(&key, &mut lower) {
            Some(Found::Value(v)) => {
                if let Some(t) = map.values.get(v) {
                    t.eval_into(src, &mut value);
                }
            }
            Some(Found::Regex(r)) => {
                if let Some(re) = map.regexes.get(r).filter(|re| !re.value_captures) {
                    if let Some(t) = map.values.get(re.value) {
                        t.eval_into(src, &mut value);
                    }
                } else if let Some(re) = map.regexes.get(r) {
                    let mut caps = slot.captures.take();
                    caps.clear();
                    re.captures(&key, &mut caps);
                    let with = MapCaptures { src, caps: &caps };
                    if let Some(t) = map.values.get(re.value) {
                        t.eval_into(&with, &mut value);
                    }
                    *slot.captures.borrow_mut() = caps;
                }
            }
            None => {}
        }
        out.extend_from_slice(&value);
        *slot.key.borrow_mut() = key;
        *slot.lower.borrow_mut() = lower;
        *slot.value.borrow_mut() = value;
        slot.state.set(if map.volatile { State::Unset } else { State::Done });
    }
}

/// A regex key's groups over the source's value, in front of the request's other variables.
struct MapCaptures<'a> {
    src: &'a dyn VarSource,
    caps: &'a crate::config::regex::Captures,
}

impl VarSource for MapCaptures<'_> {
    fn append(&self, var: &Var, out: &mut Vec<u8>) {
        match var {
            Var::Capture(n) => out.extend_from_slice(self.caps.group(*n)),
            other => self.src.append(other, out),
        }
    }
}

/// A `geo` with `proxy` lines: the address `X-Forwarded-For` names when `addr` (the client) is a trusted proxy
/// replaces it (nginx's `ngx_http_geo_real_addr`); `scratch` is a reused buffer.
fn geo_forwarded(geo: &crate::config::geo::GeoTable, src: &dyn VarSource, addr: &mut Vec<u8>, scratch: &mut Vec<u8>) {
    let Some(peer) = std::str::from_utf8(addr)
        .ok()
        .and_then(|t| t.parse::<std::net::IpAddr>().ok())
    else {
        return;
    };
    scratch.clear();
    geo.xff().eval_into(src, scratch);
    if scratch.is_empty() {
        return;
    }
    let trust = |ip: std::net::IpAddr| geo.trusts(ip);
    let peer = std::net::SocketAddr::new(peer, 0);
    let values = std::iter::once(scratch.as_slice());
    if let Some(real) = crate::http::realip::forwarded(peer, values, &trust, geo.recursive()) {
        use std::io::Write;
        addr.clear();
        let _ = write!(addr, "{}", real.ip());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::key::KeyTemplate;
    use crate::config::map::MapRegex;

    /// `$args` is the only variable; `$m0` is map 0, `$m1` map 1; captures as `$1`.
    struct Src<'a> {
        args: &'a str,
        maps: &'a [Map],
        cache: &'a VarCache,
        sources_read: &'a Cell<u32>,
    }

    impl VarSource for Src<'_> {
        fn append(&self, var: &Var, out: &mut Vec<u8>) {
            match var {
                Var::Args => {
                    self.sources_read.set(self.sources_read.get() + 1);
                    out.extend_from_slice(self.args.as_bytes());
                }
                Var::Map(i) => self.cache.append_map(self.maps, *i, self, out),
                _ => {}
            }
        }
    }

    fn resolve(name: &str) -> Option<Var> {
        match name {
            "m0" => Some(Var::Map(0)),
            "m1" => Some(Var::Map(1)),
            "1" => Some(Var::Capture(1)),
            "2" => Some(Var::Capture(2)),
            other => Var::from_name(other),
        }
    }

    fn t(raw: &str) -> KeyTemplate {
        KeyTemplate::compile_with(raw, &resolve).unwrap()
    }

    fn maps() -> Vec<Map> {
        let mut m0 = Map::new("m0", t("$args"));
        let v = m0.add_value(t("[$m1]"));
        m0.add_key("nested", v, false).unwrap();
        let v = m0.add_value(t("$2-$1"));
        m0.add_regex(MapRegex::compile("^(\\w+)=(\\w+)$", false, v).unwrap());
        let v = m0.add_value(t("self:$m0"));
        m0.add_key("cycle", v, false).unwrap();
        let v = m0.add_value(t("none"));
        m0.set_default(v).unwrap();
        let mut m1 = Map::new("m1", t("x$args"));
        let v = m1.add_value(t("inner"));
        m1.add_key("xnested", v, false).unwrap();
        vec![m0, m1]
    }

    fn eval(maps: &[Map], cache: &VarCache, args: &str, template: &str, reads: &Cell<u32>) -> String {
        let src = Src {
            args,
            maps,
            cache,
            sources_read: reads,
        };
        let mut out = b"prefix:".to_vec();
        t(template).eval_into(&src, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn maps_nest_capture_and_cache_per_request() {
        let maps = maps();
        let mut cache = VarCache::default();
        let reads = Cell::new(0);
        cache.begin(maps.len());
        assert_eq!(eval(&maps, &cache, "nested", "$m0|$m0", &reads), "[inner]|[inner]");
        assert_eq!(reads.get(), 2, "each map read its source once");
        cache.begin(maps.len());
        assert_eq!(eval(&maps, &cache, "k=v", "$m0", &reads), "v-k");
        cache.begin(maps.len());
        assert_eq!(eval(&maps, &cache, "cycle", "$m0", &reads), "self:");
        cache.begin(maps.len());
        assert_eq!(eval(&maps, &cache, "other", "$m0.", &reads), "none.");
    }

    #[test]
    fn volatile_maps_evaluate_at_each_use() {
        let mut maps = maps();
        maps[0].volatile = true;
        let mut cache = VarCache::default();
        let reads = Cell::new(0);
        cache.begin(maps.len());
        assert_eq!(eval(&maps, &cache, "x", "$m0$m0", &reads), "nonenone");
        assert_eq!(reads.get(), 2);
    }

    #[test]
    fn request_id_is_one_per_request() {
        let mut cache = VarCache::default();
        cache.begin(0);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        cache.append_request_id(&mut a);
        cache.append_request_id(&mut b);
        assert_eq!(a, b);
        assert_eq!(a.len(), 32);
        assert!(a.iter().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        cache.begin(0);
        b.clear();
        cache.append_request_id(&mut b);
        assert_ne!(a, b, "a new request draws a new id");
    }
}
