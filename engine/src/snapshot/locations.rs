//! A server's locations as nginx searches them (`ngx_http_core_find_location`): at each level an exact match
//! first, then the longest prefix (searched again among the locations nested in it); then, unless that prefix is
//! `^~`, the level's regexes in config order, the first match winning (and searched inside); else the prefix.
//! Named locations are kept apart, found by name only. A path one `/` short of a `proxy_pass` location's name
//! is redirected to it (nginx's `auto_redirect`).

use crate::config::model::{Location, LocationMatch};
use crate::config::regex::{Captures, Regex};
use crate::http::uri::append_escaped;

/// The locations of one level (the server's, or those nested in one location).
#[derive(Debug, Default)]
struct Level {
    /// `location = /x`: (path, location index).
    exact: Vec<(Box<[u8]>, usize)>,
    /// `location /x` and `location ^~ /x`, longest first: (prefix, `^~`, location index).
    prefixes: Vec<(Box<[u8]>, bool, usize)>,
    /// `location ~ RE` / `~* RE`, in config order.
    regexes: Vec<(Regex, usize)>,
    /// Exact and prefix `proxy_pass` locations whose name ends in `/`.
    slash_redirects: Vec<SlashRedirect>,
}

/// A `proxy_pass` location named `/x/`, which takes `/x` with a 301.
#[derive(Debug)]
struct SlashRedirect {
    /// The name without its last `/`.
    short: Box<[u8]>,
    /// The `Location` of the 301: the name, escaped.
    location: Box<[u8]>,
}

/// What the search found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick<'t> {
    /// The location at this index, or none.
    Location(Option<usize>),
    /// nginx's 301 to a `proxy_pass` location `/x/` for the path `/x`: the `Location` (before arguments).
    SlashRedirect(&'t [u8]),
}

/// The compiled location tree of a server.
#[derive(Debug, Default)]
pub struct LocationTree {
    /// Index 0: the server level; index `i + 1`: the locations nested in location `i`.
    levels: Vec<Level>,
    /// `location @name`: (name, location index), in config order.
    named: Vec<(String, usize)>,
}

impl LocationTree {
    /// The tree of a server's `locations` (each listed before those nested in it, as the model lists them).
    pub fn build(locations: &[Location]) -> LocationTree {
        let mut levels: Vec<Level> = std::iter::repeat_with(Level::default)
            .take(locations.len() + 1)
            .collect();
        let mut named = Vec::new();
        for (i, loc) in locations.iter().enumerate() {
            let level_index = loc.parent.map_or(0, |p| p + 1);
            let Some(level) = levels.get_mut(level_index) else {
                continue;
            };
            if let (Some(_), LocationMatch::Exact(p) | LocationMatch::Prefix(p) | LocationMatch::PrefixNoRegex(p)) =
                (&loc.proxy_pass, &loc.matcher)
            {
                if let Some(short) = p.strip_suffix('/') {
                    let mut escaped = Vec::new();
                    append_escaped(p.as_bytes(), &mut escaped);
                    level.slash_redirects.push(SlashRedirect {
                        short: short.as_bytes().into(),
                        location: escaped.into(),
                    });
                }
            }
            match &loc.matcher {
                LocationMatch::Exact(p) => level.exact.push((p.as_bytes().into(), i)),
                LocationMatch::Prefix(p) => level.prefixes.push((p.as_bytes().into(), false, i)),
                LocationMatch::PrefixNoRegex(p) => level.prefixes.push((p.as_bytes().into(), true, i)),
                LocationMatch::Regex(re) => level.regexes.push((re.clone(), i)),
                LocationMatch::Named(n) => named.push((n.clone(), i)),
            }
        }
        for level in &mut levels {
            // stable: of equal prefixes (a duplicate the config check refuses) the first stays first
            level.prefixes.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
        }
        LocationTree { levels, named }
    }

    /// The location index for the normalized path `uri`, or `None` when no location matches; a matching regex
    /// leaves its groups in `caps` (the last one that matched, as nginx's `r->captures`).
    pub fn find(&self, uri: &[u8], caps: &mut Captures) -> Option<usize> {
        match self.pick(uri, caps) {
            Pick::Location(i) => i,
            Pick::SlashRedirect(_) => None,
        }
    }

    /// [`LocationTree::find`], or nginx's redirect to a `proxy_pass` location one `/` longer than `uri`.
    pub fn pick(&self, uri: &[u8], caps: &mut Captures) -> Pick<'_> {
        let mut current = None;
        let mut redirect = None;
        self.search(0, uri, caps, &mut current, &mut redirect);
        match redirect {
            Some(to) => Pick::SlashRedirect(to),
            None => Pick::Location(current),
        }
    }

    /// The location `@name`, if the server has it (the first of that name).
    pub fn named(&self, name: &str) -> Option<usize> {
        self.named.iter().find(|(n, _)| n == name).map(|&(_, i)| i)
    }

    /// Searches one level as nginx's `ngx_http_core_find_location` does; `current` is nginx's `r->loc_conf`, the
    /// best location so far. True when the search is over (an exact or a regex location matched).
    fn search<'t>(
        &'t self,
        level_index: usize,
        uri: &[u8],
        caps: &mut Captures,
        current: &mut Option<usize>,
        redirect: &mut Option<&'t [u8]>,
    ) -> bool {
        let Some(level) = self.levels.get(level_index) else {
            return false;
        };
        // most locations have none nested (slash redirects come with prefixes and exact names)
        if level.prefixes.is_empty() && level.exact.is_empty() && level.regexes.is_empty() {
            return false;
        }
        if let Some(&(_, i)) = level.exact.iter().find(|(p, _)| **p == *uri) {
            *current = Some(i);
            return true;
        }
        // nginx's NGX_DONE: no location of this level is the path itself, one is the path and a `/`
        if !level.prefixes.iter().any(|(p, _, _)| **p == *uri) {
            if let Some(r) = level.slash_redirects.iter().find(|r| *r.short == *uri) {
                *redirect = Some(&r.location);
                return true;
            }
        }
        let mut no_regex = false;
        if let Some(&(_, stop, i)) = level.prefixes.iter().find(|(p, _, _)| uri.starts_with(p)) {
            *current = Some(i);
            no_regex = stop;
            if self.search(i + 1, uri, caps, current, redirect) {
                return true;
            }
        }
        if !no_regex {
            for (re, i) in &level.regexes {
                if re.captures_into(uri, caps) {
                    *current = Some(*i);
                    // nginx turns a redirect found inside a regex location into a plain match
                    self.search(i + 1, uri, caps, current, &mut None);
                    return true;
                }
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::{ClientConf, HttpProxyConf, Span};
    use crate::config::regex::compile;

    /// A location of kind `m` nested in `parent`.
    fn loc(m: LocationMatch, parent: Option<usize>) -> Location {
        Location {
            matcher: m,
            parent,
            proxy_pass: None,
            ret: None,
            script: Vec::new(),
            admin: None,
            proxy: HttpProxyConf::default(),
            client: ClientConf::default(),
            files: Default::default(),
            headers: Default::default(),
            realip: None,
            access: None,
            limits: Default::default(),
            gzip: Default::default(),
            charset: Default::default(),
            error_pages: Default::default(),
            proxy_tls: None,
            span: Span::default(),
        }
    }

    fn prefix(p: &str) -> LocationMatch {
        LocationMatch::Prefix(p.into())
    }

    fn regex(p: &str, caseless: bool) -> LocationMatch {
        LocationMatch::Regex(compile(p, caseless).unwrap())
    }

    fn pick(tree: &LocationTree, uri: &str) -> Option<usize> {
        tree.find(uri.as_bytes(), &mut Captures::default())
    }

    /// nginx-tests' http_location.t, with the location each request must reach.
    #[test]
    fn http_location_t_precedence() {
        let locations = [
            loc(LocationMatch::Exact("/".into()), None),                // 0 exactlyroot
            loc(prefix("/"), None),                                     // 1 root
            loc(LocationMatch::PrefixNoRegex("/images/".into()), None), // 2 images
            loc(regex(r"\.(gif|jpg|jpeg)$", true), None),               // 3 regex
            loc(regex("casefull", false), None),                        // 4 casefull
            loc(LocationMatch::Exact("/foo".into()), None),             // 5 /foo exact
            loc(prefix("/foo"), None),                                  // 6 /foo prefix
            loc(LocationMatch::Exact("/foo/".into()), None),            // 7 /foo/ exact
            loc(prefix("/foo/"), None),                                 // 8 /foo/ prefix
            loc(prefix("/lowercase"), None),                            // 9
            loc(prefix("/UPPERCASE"), None),                            // 10
        ];
        let tree = LocationTree::build(&locations);
        for (uri, want) in [
            ("/", 0),
            ("/x", 1),
            ("/images/t.gif", 2),
            ("/t.gif", 3),
            ("/t.GIF", 3),
            ("/casefull/t.gif", 3),
            ("/casefull/", 4),
            ("/foo", 5),
            ("/foobar", 6),
            ("/foo/", 7),
            ("/foo/bar", 8),
            ("/CASEFULL/", 1),
            ("/lowercase", 9),
            ("/UPPERCASE", 10),
        ] {
            assert_eq!(pick(&tree, uri), Some(want), "{uri}");
        }
    }

    #[test]
    fn nested_locations_refine_their_parent() {
        let locations = [
            loc(prefix("/a/"), None),                                   // 0
            loc(prefix("/a/b/"), Some(0)),                              // 1
            loc(regex(r"\.php$", false), Some(0)),                      // 2
            loc(LocationMatch::Exact("/a/x".into()), Some(0)),          // 3
            loc(regex(r"\.php$", false), None),                         // 4
            loc(regex(r"^/r/", false), None),                           // 5
            loc(regex("x$", false), Some(5)),                           // 6
            loc(LocationMatch::PrefixNoRegex("/s/".into()), None),      // 7
            loc(regex(r"\.gif$", false), Some(7)),                      // 8
            loc(LocationMatch::PrefixNoRegex("/s/t/".into()), Some(7)), // 9
            loc(LocationMatch::Named("@fallback".into()), None),        // 10
        ];
        let tree = LocationTree::build(&locations);
        for (uri, want) in [
            ("/a/", Some(0)),
            ("/a/b/c", Some(1)),
            ("/a/b/c.php", Some(2)), // nested regex beats the nested prefix
            ("/a/c.php", Some(2)),   // nested regex beats the outer one
            ("/a/x", Some(3)),
            ("/b.php", Some(4)),
            ("/r/x", Some(6)),
            ("/r/y", Some(5)),
            ("/s/a.gif", Some(8)), // ^~ stops the server's regexes, not those nested in it
            ("/s/t/a.gif", Some(9)),
            ("/@fallback", None),
            ("/zzz", None),
        ] {
            assert_eq!(pick(&tree, uri), want, "{uri}");
        }
        assert_eq!(tree.named("@fallback"), Some(10));
        assert_eq!(tree.named("@other"), None);
    }

    /// nginx quirk mirrored: a nested `^~` stops the regexes of its own level only; the outer level's are still
    /// tried (its longest prefix is not `^~`).
    #[test]
    fn nested_no_regex_stops_its_level_only() {
        let locations = [
            loc(prefix("/a/"), None),                                   // 0
            loc(LocationMatch::PrefixNoRegex("/a/b/".into()), Some(0)), // 1
            loc(regex(r"\.php$", false), Some(0)),                      // 2
            loc(regex(r"\.php$", false), None),                         // 3
        ];
        let tree = LocationTree::build(&locations);
        assert_eq!(pick(&tree, "/a/b/x.php"), Some(3));
        assert_eq!(pick(&tree, "/a/b/x"), Some(1));
        assert_eq!(pick(&tree, "/a/x.php"), Some(2));
    }

    #[test]
    fn a_path_one_slash_short_of_a_proxy_location_is_redirected() {
        let mut proxied = loc(prefix("/api/"), None);
        proxied.proxy_pass = Some(crate::config::model::ProxyPass {
            scheme: "http".into(),
            upstream: 0,
            uri: None,
            url: None,
        });
        let locations = [
            loc(prefix("/"), None),
            proxied,
            loc(prefix("/plain/"), None),
            loc(regex(r"api$", false), None),
        ];
        let tree = LocationTree::build(&locations);
        let mut caps = Captures::default();
        assert_eq!(tree.pick(b"/api", &mut caps), Pick::SlashRedirect(b"/api/"));
        assert_eq!(tree.pick(b"/api/x", &mut caps), Pick::Location(Some(1)));
        // no redirect for a location without proxy_pass
        assert_eq!(tree.pick(b"/plain", &mut caps), Pick::Location(Some(0)));
    }

    #[test]
    fn regex_captures_are_kept() {
        let locations = [
            loc(regex(r"^/u/(?<user>[a-z]+)/(\d+)$", false), None),
            loc(regex(r"^/nocap", false), None),
        ];
        let tree = LocationTree::build(&locations);
        let mut caps = Captures::default();
        let uri = b"/u/ann/42";
        assert_eq!(tree.find(uri, &mut caps), Some(0));
        assert_eq!(caps.group(1), b"ann");
        assert_eq!(caps.group(2), b"42");
        caps.clear();
        assert_eq!(tree.find(b"/nocap", &mut caps), Some(1));
        assert_eq!(caps.len(), 1, "a regex without groups leaves only the whole match");
    }
}
