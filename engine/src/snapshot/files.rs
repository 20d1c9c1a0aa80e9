//! A location's file serving compiled at load: its root or alias as bytes to put the request's path after, its index
//! names, its types table and default type, and whether it sends an `ETag`.

use crate::config::files::{extension, Alias, FilesConf, MimeTypes};
use crate::config::key::{KeyTemplate, VarSource};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

/// One `index` name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexName {
    /// A file name tried in the requested directory.
    File(Box<[u8]>),
    /// A name starting with `/`: a URI the request is redirected to at once (nginx's internal redirect).
    Uri(Box<[u8]>),
    /// A name with variables: evaluated per request, then a file name or (starting with `/`) a URI.
    Vars(KeyTemplate),
}

/// How a location (or a server outside its locations) serves files.
#[derive(Debug)]
pub struct FilesPlan {
    /// The root, without a trailing `/`: the file of a request is this followed by its normalized path.
    root: Box<[u8]>,
    /// `root`/`alias` with variables (then `root` is the prefix a relative result is resolved against).
    root_vars: Option<KeyTemplate>,
    alias: Alias,
    pub index: Box<[IndexName]>,
    types: Arc<MimeTypes>,
    default_type: Box<str>,
    /// `etag on`.
    pub etag: bool,
    /// `log_not_found on`.
    pub log_not_found: bool,
    /// `if_modified_since`.
    pub if_modified_since: crate::config::files::IfModifiedSince,
    /// `max_ranges` (`0`: no ranges).
    pub max_ranges: u32,
    /// `try_files` of the location.
    pub try_files: Option<Arc<crate::config::files::TryFiles>>,
    /// `sendfile on` with its `sendfile_max_chunk` (`0`: no limit); `None`: off.
    pub sendfile: Option<u64>,
    /// `open_file_cache` (`None`: off).
    pub open_file_cache: Option<crate::config::files::OpenFileCacheUse>,
    /// The location's `error_log` lines (`None`: the main log).
    pub errors: Option<Arc<crate::log::ErrorLogs>>,
}

impl FilesPlan {
    /// The plan of `conf`.
    pub fn new(conf: &FilesConf) -> FilesPlan {
        let index = conf
            .index
            .iter()
            .map(|t| {
                if !t.is_constant() {
                    return IndexName::Vars(t.clone());
                }
                let n = t.raw();
                let bytes: Box<[u8]> = n.as_bytes().into();
                if n.starts_with('/') {
                    IndexName::Uri(bytes)
                } else {
                    IndexName::File(bytes)
                }
            })
            .collect();
        FilesPlan {
            root: conf.root.as_os_str().as_bytes().into(),
            root_vars: conf.root_vars.clone(),
            alias: conf.alias,
            index,
            types: Arc::clone(&conf.types),
            default_type: conf.default_type.as_str().into(),
            etag: conf.etag,
            log_not_found: conf.log_not_found,
            if_modified_since: conf.if_modified_since,
            max_ranges: conf.max_ranges,
            try_files: conf.try_files.clone(),
            sendfile: conf.sendfile,
            open_file_cache: conf.open_file_cache.clone(),
            errors: None,
        }
    }

    /// The plan with the location's `error_log` lines.
    pub fn with_errors(mut self, errors: Option<Arc<crate::log::ErrorLogs>>) -> FilesPlan {
        self.errors = errors;
        self
    }

    /// The `error_log` lines the location's messages go to (`None`: the main log).
    pub fn errors(&self) -> Option<&crate::log::ErrorLogs> {
        self.errors.as_deref()
    }

    /// Writes the file system path of `uri` (a normalized path, [`crate::http::request::RequestHead::uri`]) into
    /// `out`, cleared first, as nginx's `ngx_http_map_uri_to_path`: the root, then the path (`root`), the path
    /// after the location's name (`alias` of a prefix location), or nothing (`alias` of a regex location, unless
    /// `whole_uri`: try_files' `add_uri_to_alias`). A root with variables is evaluated with `vars` and resolved
    /// against the prefix when relative. A normalized path has no `.` or `..` segment, so the result stays under
    /// the root (symbolic links are followed, as nginx's default `disable_symlinks off`).
    pub fn path_of(&self, uri: &[u8], vars: &dyn VarSource, whole_uri: bool, out: &mut Vec<u8>) {
        self.root_into(vars, out);
        match self.alias {
            Alias::Root => out.extend_from_slice(uri),
            Alias::Cut(n) => out.extend_from_slice(uri.get(n..).unwrap_or_default()),
            Alias::Whole if whole_uri => out.extend_from_slice(uri),
            Alias::Whole => {}
        }
    }

    /// The file system path of the `try_files` name `name` (evaluated; `constant`: written without variables)
    /// for the request's path `uri`, as nginx's try_files handler makes it: the root and the name, the name
    /// without the location's name when it starts with it (an `alias` of a prefix location, a name with
    /// variables only), or the regex location's alias and the name.
    pub fn try_path_of(&self, name: &[u8], constant: bool, uri: &[u8], vars: &dyn VarSource, out: &mut Vec<u8>) {
        self.root_into(vars, out);
        let name = match self.alias {
            Alias::Cut(n) if !constant && uri.get(..n).is_some_and(|p| name.starts_with(p)) => {
                name.get(n..).unwrap_or_default()
            }
            _ => name,
        };
        out.extend_from_slice(name);
    }

    /// The root (or alias) itself into `out`, cleared first.
    fn root_into(&self, vars: &dyn VarSource, out: &mut Vec<u8>) {
        out.clear();
        match &self.root_vars {
            None => out.extend_from_slice(&self.root),
            Some(t) => {
                t.eval_into(vars, out);
                if out.first() != Some(&b'/') {
                    let mut full = Vec::with_capacity(self.root.len() + 1 + out.len());
                    full.extend_from_slice(&self.root);
                    if !full.ends_with(b"/") {
                        full.push(b'/');
                    }
                    full.extend_from_slice(out);
                    *out = full;
                }
            }
        }
    }

    /// Whether `uri` would leave an `alias` ending in `/` of a location whose name does not (`location /a { alias
    /// /srv/x/; }` and `/a../f`: the path `/srv/x/../f`). nginx serves that file; corelb answers 404 instead.
    pub fn escapes(&self, uri: &[u8]) -> bool {
        let Alias::Cut(n) = self.alias else { return false };
        let rest = uri.get(n..).unwrap_or_default();
        let ends_slash = self.root_vars.is_some() || self.root.ends_with(b"/");
        ends_slash && rest.starts_with(b"..") && matches!(rest.get(2), None | Some(b'/'))
    }

    /// How the root and the request's path make a file's path.
    pub fn alias(&self) -> Alias {
        self.alias
    }

    /// Whether the location's files are named by `alias`.
    pub fn is_alias(&self) -> bool {
        self.alias != Alias::Root
    }

    /// The content type for the file of `uri`: its extension's in `types` (any case), else `default_type`.
    pub fn content_type(&self, uri: &[u8]) -> &str {
        let ext = extension(uri);
        if ext.is_empty() {
            return &self.default_type;
        }
        self.types.get(ext).unwrap_or(&self.default_type)
    }
}

impl super::route::LocationPlan {
    /// Whether the location serves files: it neither returns, proxies nor is an endpoint.
    pub fn serves_files(&self) -> bool {
        self.fixed.is_none() && self.admin.is_none() && self.proxy.is_none() && self.var_proxy.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::key::Var;
    use std::path::PathBuf;

    struct NoVars;
    impl VarSource for NoVars {
        fn append(&self, _: &Var, _: &mut Vec<u8>) {}
    }

    /// `$1` is `one`.
    struct One;
    impl VarSource for One {
        fn append(&self, var: &Var, out: &mut Vec<u8>) {
            if let Var::Capture(1) = var {
                out.extend_from_slice(b"one");
            }
        }
    }

    #[test]
    fn alias_paths_as_nginx_maps_them() {
        let conf = |root: &str, vars: Option<&str>, alias| FilesConf {
            root: PathBuf::from(root),
            root_vars: vars.map(|v| KeyTemplate::compile_with(v, &|n| n.parse().ok().map(Var::Capture)).unwrap()),
            alias,
            ..FilesConf::default()
        };
        let mut out = Vec::new();
        let cut = FilesPlan::new(&conf("/srv/", None, Alias::Cut(5)));
        cut.path_of(b"/pre/x/y", &NoVars, false, &mut out);
        assert_eq!(out, b"/srv/x/y", "the location's name `/pre/` is replaced");
        cut.path_of(b"/pre", &NoVars, false, &mut out);
        assert_eq!(out, b"/srv/", "a path shorter than the name adds nothing");
        let whole = FilesPlan::new(&conf("/srv/f", None, Alias::Whole));
        whole.path_of(b"/any", &NoVars, false, &mut out);
        assert_eq!(out, b"/srv/f");
        whole.path_of(b"/any", &NoVars, true, &mut out);
        assert_eq!(out, b"/srv/f/any");
        let captured = FilesPlan::new(&conf("/p", Some("/srv/$1.txt"), Alias::Whole));
        captured.path_of(b"/x", &One, false, &mut out);
        assert_eq!(out, b"/srv/one.txt");
        let relative = FilesPlan::new(&conf("/p", Some("$1/x"), Alias::Cut(3)));
        relative.path_of(b"/a/b", &One, false, &mut out);
        assert_eq!(out, b"/p/one/xb", "resolved against the prefix");
        assert!(relative.is_alias() && !FilesPlan::new(&FilesConf::default()).is_alias());
        let short = FilesPlan::new(&conf("/srv/", None, Alias::Cut(2)));
        assert!(short.escapes(b"/a../f") && short.escapes(b"/a.."));
        assert!(!short.escapes(b"/a..b/f") && !short.escapes(b"/a/f") && !cut.escapes(b"/pre/x"));
    }

    #[test]
    fn paths_and_types() {
        let mut types = MimeTypes::builtin();
        types.insert("css", "text/css");
        let conf = FilesConf {
            root: PathBuf::from("/srv/www"),
            root_vars: None,
            alias: Alias::Root,
            index: vec![KeyTemplate::literal("a.html"), KeyTemplate::literal("/b.html")],
            types: Arc::new(types),
            default_type: "application/octet-stream".into(),
            etag: true,
            log_not_found: true,
            ..FilesConf::default()
        };
        let plan = FilesPlan::new(&conf);
        let mut out = Vec::new();
        plan.path_of(b"/x/y%20.css", &NoVars, false, &mut out);
        assert_eq!(out, b"/srv/www/x/y%20.css");
        plan.path_of(b"/", &NoVars, false, &mut out);
        assert_eq!(out, b"/srv/www/");
        assert_eq!(plan.content_type(b"/a/B.CSS"), "text/css");
        assert_eq!(plan.content_type(b"/a/b.html"), "text/html");
        assert_eq!(plan.content_type(b"/a/b.txt"), "application/octet-stream");
        assert_eq!(plan.content_type(b"/a/.css"), "application/octet-stream");
        assert_eq!(plan.content_type(b"/a.css/b"), "application/octet-stream");
        assert_eq!(
            &*plan.index,
            &[
                IndexName::File((*b"a.html").into()),
                IndexName::Uri((*b"/b.html").into())
            ]
        );
    }
}
