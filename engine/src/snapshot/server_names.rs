//! Which server of a listen address a `Host` names (`ngx_http_find_virtual_server`, `ngx_hash_find_combined`),
//! built at load: an exact name, else the longest leading wildcard (`*.example.com`, `.example.com`), else the
//! longest trailing wildcard (`www.example.*`), else the first regex name in config order (its groups kept for
//! the request's variables), else the address's default server. A name a second server claims is the first's
//! (nginx's "conflicting server name ... ignored").

use crate::config::regex::{Captures, Regex};
use crate::config::server_names::regex_of;
use std::cmp::Ordering;

/// A regex server name of one server.
#[derive(Debug, Clone)]
pub struct NameRegex {
    regex: Regex,
    server: usize,
    /// The group of each of the http block's named groups ([`crate::config::var::Var::ServerCapture`]) this
    /// regex has.
    groups: Box<[Option<usize>]>,
}

impl NameRegex {
    /// The group number of the block's named group `id`, if this regex has it.
    pub fn group(&self, id: usize) -> Option<usize> {
        self.groups.get(id).copied().flatten()
    }

    /// The group of each of the block's named groups, by index.
    pub fn groups(&self) -> &[Option<usize>] {
        &self.groups
    }
}

/// The names of the servers of one listen address.
#[derive(Debug, Clone, Default)]
pub struct ServerNames {
    /// Exact names (lower-case, `""` included), sorted.
    exact: Vec<(Box<[u8]>, usize)>,
    /// Leading wildcards by the domain after the `*.` or `.`, sorted; `bare`: a `.example.com`, which names
    /// `example.com` itself too.
    head: Vec<Wildcard>,
    /// Trailing wildcards by the name before the `.*`, sorted.
    tail: Vec<Wildcard>,
    regexes: Vec<NameRegex>,
}

#[derive(Debug, Clone)]
struct Wildcard {
    key: Box<[u8]>,
    bare: bool,
    server: usize,
}

/// The server a host named, and the regex name that matched it (its groups are in the caller's captures).
#[derive(Debug, Clone, Copy)]
pub struct Found<'a> {
    pub server: usize,
    pub regex: Option<&'a NameRegex>,
}

/// Compares stored lower-case `key` with `host` read in lower case.
fn cmp_lower(key: &[u8], host: &[u8]) -> Ordering {
    key.iter().copied().cmp(host.iter().map(u8::to_ascii_lowercase))
}

fn find_in<'t, T>(table: &'t [T], key: impl Fn(&T) -> &[u8], host: &[u8]) -> Option<&'t T> {
    let i = table.binary_search_by(|e| cmp_lower(key(e), host)).ok()?;
    table.get(i)
}

impl ServerNames {
    /// The table of `servers` (server index, its names as the config has them), in config order;
    /// `capture_names`: the http block's named groups. `Err`: a regex that does not compile (the config build
    /// refuses it first).
    pub fn build<'n>(
        servers: impl IntoIterator<Item = (usize, &'n [String])>,
        capture_names: &[String],
    ) -> Result<ServerNames, String> {
        let mut t = ServerNames::default();
        for (server, names) in servers {
            for name in names {
                if let Some(re) = regex_of(name) {
                    let regex = re.map_err(|e| e.to_string())?;
                    let mut groups = vec![None; capture_names.len()];
                    for (g, n) in regex.names() {
                        if let Some(slot) = capture_names
                            .iter()
                            .position(|c| c == n)
                            .and_then(|i| groups.get_mut(i))
                        {
                            *slot = Some(g);
                        }
                    }
                    t.regexes.push(NameRegex {
                        regex,
                        server,
                        groups: groups.into(),
                    });
                    continue;
                }
                let lower = name.to_ascii_lowercase();
                if let Some(domain) = lower.strip_prefix("*.") {
                    t.add_wildcard(true, domain, false, server);
                } else if let Some(domain) = lower.strip_prefix('.') {
                    // nginx's ".example.com" conflicts with an exact "example.com" (either order)
                    if !t.exact.iter().any(|(k, _)| **k == *domain.as_bytes()) {
                        t.add_wildcard(true, domain, true, server);
                    }
                } else if let Some(name) = lower.strip_suffix(".*") {
                    t.add_wildcard(false, name, false, server);
                } else {
                    let bare_taken = t.head.iter().any(|w| w.bare && *w.key == *lower.as_bytes());
                    if !bare_taken && !t.exact.iter().any(|(k, _)| **k == *lower.as_bytes()) {
                        t.exact.push((lower.into_bytes().into(), server));
                    }
                }
            }
        }
        t.exact.sort_by(|a, b| a.0.cmp(&b.0));
        t.head.sort_by(|a, b| a.key.cmp(&b.key));
        t.tail.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(t)
    }

    fn add_wildcard(&mut self, head: bool, key: &str, bare: bool, server: usize) {
        let table = if head { &mut self.head } else { &mut self.tail };
        if !table.iter().any(|w| *w.key == *key.as_bytes()) {
            table.push(Wildcard {
                key: key.as_bytes().into(),
                bare,
                server,
            });
        }
    }

    /// Whether a lookup can pick a server other than the default one: false for an address with one server
    /// and no regex names, which then skips the lookup (as nginx keeps no names for it).
    pub fn is_trivial(&self, servers: usize) -> bool {
        servers <= 1 && self.regexes.is_empty()
    }

    /// The server `host` names (port stripped, any case; `""` for a request without a host), as nginx finds it.
    /// A regex name matches the lower-cased host and leaves its groups in `caps`.
    pub fn find(&self, host: &[u8], caps: Option<&mut Captures>) -> Option<Found<'_>> {
        let plain = |server| Some(Found { server, regex: None });
        if let Some((_, s)) = find_in(&self.exact, |e| &e.0, host) {
            return plain(*s);
        }
        if let Some(s) = self.find_head(host) {
            return plain(s);
        }
        if let Some(s) = self.find_tail(host) {
            return plain(s);
        }
        if host.is_empty() || self.regexes.is_empty() {
            return None;
        }
        let mut lower = [0u8; 256];
        let owned;
        let subject: &[u8] = if !host.iter().any(u8::is_ascii_uppercase) {
            host
        } else if let Some(buf) = lower.get_mut(..host.len()) {
            buf.copy_from_slice(host);
            buf.make_ascii_lowercase();
            buf
        } else {
            // longer than any DNS name: rare enough to copy
            owned = host.to_ascii_lowercase();
            &owned
        };
        let regex = match caps {
            Some(caps) => self.regexes.iter().find(|r| r.regex.captures_into(subject, caps)),
            None => self.regexes.iter().find(|r| r.regex.is_match(subject)),
        }?;
        Some(Found {
            server: regex.server,
            regex: Some(regex),
        })
    }

    /// The longest leading wildcard naming `host`: `host` itself for a `.host`, then each domain after a dot.
    fn find_head(&self, host: &[u8]) -> Option<usize> {
        if self.head.is_empty() {
            return None;
        }
        if let Some(w) = find_in(&self.head, |w| &w.key, host).filter(|w| w.bare) {
            return Some(w.server);
        }
        let dots = host.iter().enumerate().filter(|(_, &c)| c == b'.');
        dots.filter_map(|(i, _)| host.get(i + 1..))
            .filter(|rest| !rest.is_empty())
            .find_map(|rest| find_in(&self.head, |w| &w.key, rest))
            .map(|w| w.server)
    }

    /// The longest trailing wildcard naming `host`: the name before each dot, from the last.
    fn find_tail(&self, host: &[u8]) -> Option<usize> {
        if self.tail.is_empty() {
            return None;
        }
        let dots = host.iter().enumerate().rev().filter(|(_, &c)| c == b'.');
        dots.filter(|(i, _)| *i > 0 && *i + 1 < host.len())
            .filter_map(|(i, _)| host.get(..i))
            .find_map(|before| find_in(&self.tail, |w| &w.key, before))
            .map(|w| w.server)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Servers 0.. with these names, on one address.
    fn table(servers: &[&[&str]]) -> ServerNames {
        let names: Vec<Vec<String>> = servers
            .iter()
            .map(|s| s.iter().map(|n| n.to_string()).collect())
            .collect();
        let groups = vec!["name".to_string(), "other".to_string()];
        ServerNames::build(names.iter().enumerate().map(|(i, n)| (i, n.as_slice())), &groups).unwrap()
    }

    fn pick(t: &ServerNames, host: &str) -> Option<usize> {
        t.find(host.as_bytes(), None).map(|f| f.server)
    }

    /// http_server_name.t's servers, and the picks nginx 1.22 makes for them.
    #[test]
    fn nginx_tests_server_names() {
        let t = table(&[
            &["localhost"],
            &[""],
            &["www.example.com"],
            &[r"~^EXAMPLE\.COM$"],
            &[r"~^(?P<name>[a-z]+)\Q.example.com\E$"],
            &[r"~^(?P<name>www\p{N}+)\.example\.com$"],
            &["many.example.com", "many2.example.com"],
            &["many3.example.com", "many4.example.com"],
            &["*.wc.example.com"],
            &["*.pref.wc.example.com"],
            &["wc2.example.*"],
            &["wc2.example.com.*"],
            &[".dot.example.com"],
        ]);
        for (host, want) in [
            ("xxx", None),
            ("", Some(1)),
            ("www.example.com", Some(2)),
            ("WWW.EXAMPLE.COM", Some(2)),
            ("example.com", Some(3)),
            ("EXAMPLE.COM", Some(3)),
            ("blah.example.com", Some(4)),
            ("BLAH.EXAMPLE.COM", Some(4)),
            ("www01.example.com", Some(5)),
            ("many2.example.com", Some(6)),
            ("many4.example.com", Some(7)),
            ("www.wc.example.com", Some(8)),
            ("a.b.wc.example.com", Some(8)),
            ("wc.example.com", Some(4)),
            ("www.pref.wc.example.com", Some(9)),
            ("wc2.example.net", Some(10)),
            ("wc2.example.com.pref", Some(11)),
            ("wc2.example", None),
            ("www.dot.example.com", Some(12)),
            ("dot.example.com", Some(12)),
            ("xdot.example.com", Some(4)),
        ] {
            assert_eq!(pick(&t, host), want, "{host:?}");
        }
    }

    #[test]
    fn exact_then_head_then_tail_then_first_regex() {
        let t = table(&[
            &["~^www\\.", "~example"],
            &["www.example.*"],
            &["*.example.com"],
            &["www.example.com"],
            &["~^www\\.example"],
        ]);
        assert_eq!(pick(&t, "www.example.com"), Some(3), "exact");
        assert_eq!(pick(&t, "a.example.com"), Some(2), "leading wildcard before trailing");
        assert_eq!(pick(&t, "www.example.org"), Some(1), "trailing wildcard before regexes");
        assert_eq!(pick(&t, "www.example"), Some(0), "the first regex in config order");
        assert_eq!(pick(&t, "example"), Some(0));
        assert_eq!(pick(&t, "other"), None);
    }

    #[test]
    fn a_name_claimed_twice_is_the_first_servers() {
        let t = table(&[
            &["a.com"],
            &["a.com", ".b.com"],
            &["b.com", "*.b.com"],
            &["*.c.com"],
            &[".c.com"],
        ]);
        assert_eq!(pick(&t, "a.com"), Some(0));
        assert_eq!(pick(&t, "b.com"), Some(1));
        assert_eq!(pick(&t, "x.b.com"), Some(1));
        assert_eq!(pick(&t, "x.c.com"), Some(3));
        // the `.c.com` that lost to `*.c.com` names nothing
        assert_eq!(pick(&t, "c.com"), None);
    }

    #[test]
    fn regex_groups_by_the_blocks_names() {
        let t = table(&[&[r"~^(?<other>[a-z]+)-(?<name>[0-9]+)\.x$"]]);
        let mut caps = Captures::default();
        let found = t.find(b"Abc-12.X", Some(&mut caps)).unwrap();
        let re = found.regex.unwrap();
        assert_eq!(caps.group(re.group(0).unwrap()), b"12");
        assert_eq!(caps.group(re.group(1).unwrap()), b"abc", "matched in lower case");
        assert_eq!(caps.group(1), b"abc");
        assert!(t.find(b"", Some(&mut caps)).is_none(), "no regex for an empty host");
    }
}
