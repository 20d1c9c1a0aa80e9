//! `server NAME resolve` and `service=NAME` (nginx 1.27.3's re-resolved upstream servers): one thread for the
//! whole process asks each name once (not once per shard), again when its answer's TTL (or the resolver's
//! `valid=`) is over plus a second, as nginx's zone module does; the answers live in [`Answers`], from which the
//! control plane fills every config it builds ([`Answers::fill`]), so a change of a name's addresses is a new
//! snapshot made the way an API change makes one (the zone keeps the state of every address that stays) and a
//! reload keeps the addresses already found. SERVFAIL or no answer keeps a name's addresses and asks again after
//! `resolver_timeout` (at least 1 s); NXDOMAIN or an empty answer removes them.

use super::dns::DnsError;
use super::records::{self, Records};
use crate::config::model::{Config, Method, ResolveSpec, ServerLine, UpstreamConf};
use crate::config::resolver::ResolverConf;
use hickory_proto::rr::RecordType;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How often the thread looks for names that are due (and for names a reload or an API change added).
const POLL: Duration = Duration::from_millis(100);

/// How many CNAMEs a name may lead through.
const CNAME_HOPS: usize = 8;

/// One name as asked: by which resolver (its settings' key), the host and the service.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NameKey {
    pub resolver: u64,
    pub host: String,
    pub service: Option<String>,
}

impl NameKey {
    fn of(conf: &ResolverConf, spec: &ResolveSpec) -> NameKey {
        NameKey {
            resolver: conf.cache_key,
            host: spec.host.clone(),
            service: spec.service.clone(),
        }
    }

    /// The name asked: the host, or for a service nginx's `_SERVICE._tcp.HOST` (`SERVICE.HOST` when the service
    /// has a dot).
    fn query_name(&self) -> String {
        match &self.service {
            None => self.host.clone(),
            Some(s) if s.contains('.') => format!("{s}.{}", self.host),
            Some(s) => format!("_{s}._tcp.{}", self.host),
        }
    }
}

/// One address a name resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// With the `SRV` record's port for a service, port 0 (the line's) otherwise.
    pub addr: SocketAddr,
    /// The `SRV` target (the peer's server name); empty for a plain name.
    pub target: String,
    pub priority: u16,
    pub weight: u16,
}

/// How a name's lookups have gone (`/metrics` shows it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NameStatus {
    /// How many addresses it has now.
    pub addresses: usize,
    /// How its last lookup ended (`None`: not asked yet).
    pub last: Option<Result<(), DnsError>>,
    /// Lookups so far, and those that failed.
    pub lookups: u64,
    pub failures: u64,
}

/// The addresses of every name resolved so far, and how its lookups went.
#[derive(Debug, Default)]
pub struct Answers {
    map: Mutex<HashMap<NameKey, Arc<[Found]>>>,
    status: Mutex<HashMap<NameKey, NameStatus>>,
}

impl Answers {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<NameKey, Arc<[Found]>>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets `key`'s addresses; true when the peers they make changed (none before and none now is no change).
    pub fn set(&self, key: &NameKey, found: Vec<Found>) -> bool {
        let mut map = self.lock();
        let same = map.get(key).map_or(found.is_empty(), |old| **old == *found);
        map.insert(key.clone(), Arc::from(found));
        !same
    }

    /// `key`'s addresses, if it was resolved.
    pub fn get(&self, key: &NameKey) -> Option<Arc<[Found]>> {
        self.lock().get(key).cloned()
    }

    /// Forgets the names `keep` says are no longer used.
    pub fn retain(&self, keep: impl Fn(&NameKey) -> bool) {
        self.lock().retain(|k, _| keep(k));
        self.lock_status().retain(|k, _| keep(k));
    }

    fn lock_status(&self) -> std::sync::MutexGuard<'_, HashMap<NameKey, NameStatus>> {
        self.status.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records how a lookup of `key` ended, and how many addresses the name has after it.
    pub fn record(&self, key: &NameKey, result: Result<(), DnsError>) {
        let addresses = self.get(key).map_or(0, |f| f.len());
        let mut status = self.lock_status();
        let s = status.entry(key.clone()).or_default();
        s.lookups += 1;
        s.failures += u64::from(result.is_err());
        s.last = Some(result);
        s.addresses = addresses;
    }

    /// Every name asked so far with its status, by host and service.
    pub fn statuses(&self) -> Vec<(NameKey, NameStatus)> {
        let mut all: Vec<(NameKey, NameStatus)> =
            self.lock_status().iter().map(|(k, s)| (k.clone(), s.clone())).collect();
        all.sort_by(|a, b| (&a.0.host, &a.0.service, a.0.resolver).cmp(&(&b.0.host, &b.0.service, b.0.resolver)));
        all
    }

    /// Puts in `config` the lines of every resolved name: each `resolve` line is followed by the lines of its
    /// current addresses (made again from the line, so a change of its parameters reaches them), the lines of
    /// earlier answers dropped.
    pub fn fill(&self, config: &mut Config) {
        let map = self.lock();
        for up in upstreams_mut(config) {
            let Some(resolver) = up.resolver.clone() else { continue };
            if !up.servers.iter().any(|l| l.resolve.is_some()) {
                continue;
            }
            let backups = allows_backup(&up.method);
            let lines = std::mem::take(&mut up.servers);
            for line in lines {
                if line.is_derived() {
                    continue;
                }
                let spec = line.resolve.as_deref().filter(|r| !r.derived).cloned();
                up.servers.push(line);
                let Some(spec) = spec else { continue };
                let Some(found) = map.get(&NameKey::of(&resolver, &spec)) else {
                    continue;
                };
                let Some(template) = up.servers.last().cloned() else {
                    continue;
                };
                let derived: Vec<ServerLine> = derive(&template, &spec, found, backups);
                up.servers.extend(derived);
            }
        }
    }
}

/// The lines `template` (a `resolve` line) stands for with `found`: a plain name one line of all its addresses at
/// the line's port; a service one line per address, named by its target, at the record's port, backup unless of
/// the lowest priority, with the record's weight when the line's is 1 (nginx's rules).
fn derive(template: &ServerLine, spec: &ResolveSpec, found: &[Found], backups: bool) -> Vec<ServerLine> {
    let marked = Some(Box::new(ResolveSpec {
        derived: true,
        ..spec.clone()
    }));
    if spec.service.is_none() {
        if found.is_empty() {
            return Vec::new();
        }
        return vec![ServerLine {
            addrs: found.iter().map(|f| SocketAddr::new(f.addr.ip(), spec.port)).collect(),
            resolve: marked,
            ..template.clone()
        }];
    }
    let least = found.iter().map(|f| f.priority).min().unwrap_or(0);
    let mut out = Vec::with_capacity(found.len());
    for f in found {
        let backup = f.priority != least;
        // a backup line's records of higher priorities have nowhere to go; nor backups where the method has none
        if backup && (template.backup || !backups) {
            continue;
        }
        out.push(ServerLine {
            text: f.target.clone(),
            addrs: vec![f.addr],
            weight: if template.weight != 1 {
                template.weight
            } else {
                u32::from(f.weight.max(1))
            },
            backup: template.backup || backup,
            resolve: marked.clone(),
            ..template.clone()
        });
    }
    out
}

/// Round robin, least_conn and least_time have backup servers (hash, ip_hash and random none).
fn allows_backup(method: &Method) -> bool {
    matches!(
        method,
        Method::RoundRobin | Method::LeastConn | Method::LeastTime { .. }
    )
}

fn upstreams_mut(config: &mut Config) -> impl Iterator<Item = &mut UpstreamConf> {
    let http = config.http.iter_mut().flat_map(|h| h.upstreams.iter_mut());
    let stream = config.stream.iter_mut().flat_map(|s| s.upstreams.iter_mut());
    http.chain(stream)
}

/// Every name `config`'s upstreams resolve, once each, with its resolver.
pub fn names_of(config: &Config) -> Vec<(NameKey, Arc<ResolverConf>)> {
    let http = config.http.iter().flat_map(|h| h.upstreams.iter());
    let stream = config.stream.iter().flat_map(|s| s.upstreams.iter());
    let mut out: Vec<(NameKey, Arc<ResolverConf>)> = Vec::new();
    for up in http.chain(stream) {
        let Some(resolver) = &up.resolver else { continue };
        for spec in up.servers.iter().filter_map(|l| l.resolve.as_deref()) {
            let key = NameKey::of(resolver, spec);
            if !out.iter().any(|(k, _)| *k == key) {
                out.push((key, Arc::clone(resolver)));
            }
        }
    }
    out
}

/// Fills `config` with fixed answers (`corelb pick --resolve`): each `(host, found)` answers every `resolve` line
/// of that host (a service's host for `service=` lines), whatever its resolver.
pub fn fill_fixed(config: &mut Config, fixed: &[(String, Vec<Found>)]) {
    let answers = Answers::default();
    for (key, _) in names_of(config) {
        if let Some((_, found)) = fixed.iter().find(|(host, _)| host.eq_ignore_ascii_case(&key.host)) {
            answers.set(&key, found.clone());
        }
    }
    answers.fill(config);
}

/// What the thread needs of the process: the names of the running config (`None` once the process stops) and
/// how to publish a change of the answers (false when it could not: it is tried again).
pub struct Process<N, P> {
    pub names: N,
    pub publish: P,
}

/// The resolver thread's loop: asks every name that is due (side by side, each on a scoped thread, so that one
/// that does not answer delays no other), records the answers, publishes a change (one that could not be
/// published goes again with the next answers), and sleeps [`POLL`]. At most two threads per name at a time (its
/// `A` and `AAAA` queries), for the names of the running config.
pub fn run<N, P>(answers: &Answers, process: Process<N, P>)
where
    N: Fn() -> Option<Vec<(NameKey, Arc<ResolverConf>)>>,
    P: Fn() -> bool,
{
    let mut due: HashMap<NameKey, Instant> = HashMap::new();
    let mut unpublished = false;
    while let Some(names) = (process.names)() {
        due.retain(|k, _| names.iter().any(|(n, _)| n == k));
        answers.retain(|k| names.iter().any(|(n, _)| n == k));
        let now = Instant::now();
        let asks: Vec<&(NameKey, Arc<ResolverConf>)> = names
            .iter()
            .filter(|(k, _)| due.get(k).is_none_or(|at| *at <= now))
            .collect();
        if asks.is_empty() {
            std::thread::sleep(POLL);
            continue;
        }
        let results: Vec<Result<(Vec<Found>, u32), DnsError>> = std::thread::scope(|s| {
            let running: Vec<_> = asks
                .iter()
                .map(|(k, conf)| beside(s, move || lookup(conf, k)))
                .collect();
            running.into_iter().map(Beside::join).collect()
        });
        let mut changed = false;
        for ((key, conf), result) in asks.into_iter().zip(results) {
            let ended = result.as_ref().map(|_| ()).map_err(|e| *e);
            let (next, found) = outcome(conf, key, result);
            due.insert(key.clone(), Instant::now() + next);
            if let Some(found) = found {
                changed |= answers.set(key, found);
            }
            answers.record(key, ended);
        }
        if changed || unpublished {
            unpublished = !(process.publish)();
        }
    }
}

/// When `key` is asked again after `result`, and its new addresses (`None`: keep the current ones).
fn outcome(
    conf: &ResolverConf,
    key: &NameKey,
    result: Result<(Vec<Found>, u32), DnsError>,
) -> (Duration, Option<Vec<Found>>) {
    let after = |ttl: u32| conf.valid.unwrap_or(Duration::from_secs(u64::from(ttl))) + Duration::from_secs(1);
    match result {
        Ok((found, ttl)) => (after(ttl), Some(found)),
        Err(e) => {
            match &key.service {
                Some(s) => crate::log_error!("service {s} of {} could not be resolved ({e})", key.host),
                None => crate::log_error!("{} could not be resolved ({e})", key.host),
            }
            if e == DnsError::NotFound {
                (after(0), Some(Vec::new()))
            } else {
                (conf.timeout.max(Duration::from_secs(1)), None)
            }
        }
    }
}

/// A query run on a scoped thread of its own, or (when no thread could be made) already run here.
enum Beside<'s, T> {
    Thread(std::thread::ScopedJoinHandle<'s, T>, fn() -> T),
    Done(T),
}

impl<T> Beside<'_, T> {
    /// Its result (a thread that panicked gives the fallback: a server failure, which keeps the addresses).
    fn join(self) -> T {
        match self {
            Beside::Thread(h, failed) => h.join().unwrap_or_else(|_| failed()),
            Beside::Done(t) => t,
        }
    }
}

/// Failure results for [`Beside`].
trait Failed {
    fn failed() -> Self;
}

impl<T> Failed for Result<T, DnsError> {
    fn failed() -> Self {
        Err(DnsError::ServFail)
    }
}

impl<T> Failed for Option<Result<T, DnsError>> {
    fn failed() -> Self {
        Some(Err(DnsError::ServFail))
    }
}

/// Runs `job` on a new thread of scope `s`; here and now when the thread cannot be made.
fn beside<'s, 'e, T: Send + Failed + 's>(
    s: &'s std::thread::Scope<'s, 'e>,
    job: impl FnOnce() -> T + Send + Clone + 's,
) -> Beside<'s, T> {
    match std::thread::Builder::new().spawn_scoped(s, job.clone()) {
        Ok(h) => Beside::Thread(h, T::failed),
        Err(_) => Beside::Done(job()),
    }
}

/// The name servers' turn: each query starts at the next one.
static NEXT_SERVER: AtomicUsize = AtomicUsize::new(0);

/// `key`'s addresses and their least TTL.
fn lookup(conf: &ResolverConf, key: &NameKey) -> Result<(Vec<Found>, u32), DnsError> {
    let name = key.query_name();
    if key.service.is_none() {
        let (addrs, ttl) = addresses(conf, &name)?;
        let found = addrs.into_iter().map(|ip| found_at(ip, 0, "", 0, 1)).collect();
        return Ok((found, ttl));
    }
    let srv = follow(conf, &name, RecordType::SRV)?;
    if srv.srvs.is_empty() {
        return Err(DnsError::NotFound);
    }
    let mut found = Vec::new();
    let mut ttl = srv.ttl;
    let mut failed = None;
    for s in &srv.srvs {
        match addresses(conf, &s.target) {
            Ok((addrs, t)) => {
                ttl = ttl.min(t);
                found.extend(
                    addrs
                        .into_iter()
                        .map(|ip| found_at(ip, s.port, &s.target, s.priority, s.weight)),
                );
            }
            Err(e) => {
                let svc = key.service.as_deref().unwrap_or_default();
                crate::log_error!(
                    "{} could not be resolved ({e}) while resolving service {svc} of {}",
                    s.target,
                    key.host
                );
                failed.get_or_insert(e);
            }
        }
    }
    match failed {
        Some(e) if found.is_empty() => Err(e),
        _ => Ok((found, ttl)),
    }
}

/// One address found: `ip` at `port` (0 for a plain name: the line's), the SRV `target`, priority and weight.
pub fn found_at(ip: IpAddr, port: u16, target: &str, priority: u16, weight: u16) -> Found {
    Found {
        addr: SocketAddr::new(ip, port),
        target: target.to_string(),
        priority,
        weight,
    }
}

/// `name`'s `A` and `AAAA` addresses as `conf` asks for them (side by side), IPv4 first: an error only when no
/// family gave an address (NXDOMAIN when both were empty).
fn addresses(conf: &ResolverConf, name: &str) -> Result<(Vec<IpAddr>, u32), DnsError> {
    let ask = |on: bool, kind| on.then(|| follow(conf, name, kind));
    let (v4, v6) = std::thread::scope(|s| {
        let v6 = beside(s, || ask(conf.ipv6, RecordType::AAAA));
        let v4 = ask(conf.ipv4, RecordType::A);
        (v4, v6.join())
    });
    let mut addrs = Vec::new();
    let mut ttl = u32::MAX;
    let mut error = None;
    for r in [v4, v6].into_iter().flatten() {
        match r {
            Ok(r) if !r.addrs.is_empty() => {
                addrs.extend(r.addrs);
                ttl = ttl.min(r.ttl);
            }
            Ok(_) => {}
            Err(DnsError::NotFound) => {}
            Err(e) => {
                error.get_or_insert(e);
            }
        }
    }
    if addrs.is_empty() {
        return Err(error.unwrap_or(DnsError::NotFound));
    }
    Ok((addrs, ttl))
}

/// `name`'s records of `kind`, through the CNAMEs that lead elsewhere.
fn follow(conf: &ResolverConf, name: &str, kind: RecordType) -> Result<Records, DnsError> {
    let mut name = name.to_string();
    for _ in 0..CNAME_HOPS {
        let first = NEXT_SERVER.fetch_add(1, Ordering::Relaxed);
        let r = records::ask(conf, &name, kind, first)?;
        match r.cname {
            Some(next) => name = next,
            None => return Ok(r),
        }
    }
    Err(DnsError::NotFound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_str;
    use std::path::Path;

    fn config(ups: &str) -> Config {
        let text = format!("events {{}}\nhttp {{ resolver 127.0.0.1:5353; {ups} server {{ listen 127.0.0.1:1; location / {{ proxy_pass http://u; }} }} }}");
        parse_str(&text, Path::new("t.conf")).unwrap_or_else(|e| panic!("{e}"))
    }

    fn found(ip: &str, port: u16, target: &str, priority: u16, weight: u16) -> Found {
        found_at(ip.parse().unwrap(), port, target, priority, weight)
    }

    fn servers(c: &Config) -> Vec<String> {
        c.http.as_ref().unwrap().upstreams[0]
            .servers
            .iter()
            .map(|l| {
                let addrs: Vec<String> = l.addrs.iter().map(|a| a.to_string()).collect();
                format!(
                    "{} [{}] w{}{}",
                    l.text,
                    addrs.join(" "),
                    l.weight,
                    if l.backup { " b" } else { "" }
                )
            })
            .collect()
    }

    #[test]
    fn plain_names_fill_their_lines_and_refill_from_scratch() {
        let mut c = config("upstream u { zone z 1m; server a.test:81 resolve weight=3; server 127.0.0.1:82; }");
        let answers = Answers::default();
        let names = names_of(&c);
        assert_eq!(names.len(), 1);
        answers.fill(&mut c);
        assert_eq!(
            servers(&c),
            ["a.test:81 [] w3", "127.0.0.1:82 [127.0.0.1:82] w1"],
            "not resolved yet"
        );
        assert!(answers.set(
            &names[0].0,
            vec![found("10.0.0.1", 0, "", 0, 1), found("::1", 0, "", 0, 1)]
        ));
        assert!(!answers.set(
            &names[0].0,
            vec![found("10.0.0.1", 0, "", 0, 1), found("::1", 0, "", 0, 1)]
        ));
        answers.fill(&mut c);
        answers.fill(&mut c);
        assert_eq!(
            servers(&c),
            [
                "a.test:81 [] w3",
                "a.test:81 [10.0.0.1:81 [::1]:81] w3",
                "127.0.0.1:82 [127.0.0.1:82] w1"
            ]
        );
        assert!(answers.set(&names[0].0, Vec::new()), "the addresses went");
        assert!(!answers.set(&names[0].0, Vec::new()));
        let other = NameKey {
            host: "b.test".into(),
            ..names[0].0.clone()
        };
        assert!(!answers.set(&other, Vec::new()), "no addresses before, none now");
        answers.fill(&mut c);
        assert_eq!(
            servers(&c),
            ["a.test:81 [] w3", "127.0.0.1:82 [127.0.0.1:82] w1"],
            "NXDOMAIN"
        );
    }

    #[test]
    fn services_by_priority_and_weight() {
        let mut c = config("upstream u { zone z 1m; server s.test service=http resolve; server t.test service=_x._udp resolve weight=5 backup; }");
        let names = names_of(&c);
        assert_eq!(names[0].0.query_name(), "_http._tcp.s.test");
        assert_eq!(names[1].0.query_name(), "_x._udp.t.test");
        let answers = Answers::default();
        answers.set(
            &names[0].0,
            vec![
                found("10.0.0.1", 8080, "a.s.test", 10, 7),
                found("10.0.0.2", 8081, "b.s.test", 20, 1),
            ],
        );
        answers.set(
            &names[1].0,
            vec![
                found("10.0.0.3", 90, "c.t.test", 1, 2),
                found("10.0.0.4", 91, "d.t.test", 2, 2),
            ],
        );
        answers.fill(&mut c);
        assert_eq!(
            servers(&c),
            [
                "s.test [] w1",
                "a.s.test [10.0.0.1:8080] w7",
                "b.s.test [10.0.0.2:8081] w1 b",
                "t.test [] w5 b",
                "c.t.test [10.0.0.3:90] w5 b",
            ]
        );
    }

    #[test]
    fn each_lookup_is_recorded_with_the_addresses_after_it() {
        let c = config("upstream u { zone z 1m; server a.test:81 resolve; }");
        let (key, _) = names_of(&c).remove(0);
        let answers = Answers::default();
        answers.set(
            &key,
            vec![found("10.0.0.1", 0, "", 0, 1), found("10.0.0.2", 0, "", 0, 1)],
        );
        answers.record(&key, Ok(()));
        answers.record(&key, Err(DnsError::ServFail));
        let all = answers.statuses();
        assert_eq!(all.len(), 1);
        let want = NameStatus {
            addresses: 2,
            last: Some(Err(DnsError::ServFail)),
            lookups: 2,
            failures: 1,
        };
        assert_eq!(all[0], (key.clone(), want), "SERVFAIL keeps the addresses");
        answers.retain(|_| false);
        assert!(answers.statuses().is_empty());
    }

    #[test]
    fn when_a_name_is_asked_again() {
        let c = config("upstream u { zone z 1m; server a.test:81 resolve; }");
        let (key, conf) = names_of(&c).remove(0);
        let (next, found) = outcome(&conf, &key, Ok((Vec::new(), 30)));
        assert_eq!((next, found), (Duration::from_secs(31), Some(Vec::new())));
        let (next, found) = outcome(&conf, &key, Err(DnsError::ServFail));
        assert_eq!((next, found), (Duration::from_secs(30), None), "SERVFAIL keeps");
        let (next, found) = outcome(&conf, &key, Err(DnsError::NotFound));
        assert_eq!(
            (next, found),
            (Duration::from_secs(1), Some(Vec::new())),
            "NXDOMAIN removes"
        );
    }
}
