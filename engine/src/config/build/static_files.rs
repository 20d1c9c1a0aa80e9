//! The file serving settings of one http, server or location level (`root` or `alias`, `index`, `types`,
//! `default_type`, `etag`), read with nginx's checks and messages, and the tuning directives of nginx's file path (`sendfile`,
//! `sendfile_max_chunk`, `tcp_nopush`, `tcp_nodelay`, `open_file_cache*`, `types_hash_*`): checked as nginx
//! checks them; what each does in corelb is in `docs/directives.md`.

use super::{arg, directive_err, flag_slot, num_slot, unset, value, Build};
use crate::config::error::ConfigError;
use crate::config::files::{
    Alias, FilesConf, IfModifiedSince, MimeTypes, OpenFileCacheSpec, OpenFileCacheUse, TryFiles, TryLast,
    DEFAULT_INDEX, DEFAULT_TYPE,
};
use crate::config::key::KeyTemplate;
use crate::config::model::LocationMatch;
use crate::config::parser::Directive;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The directives this layer reads, by name.
pub const NAMES: [&str; 19] = [
    "root",
    "try_files",
    "if_modified_since",
    "max_ranges",
    "log_not_found",
    "index",
    "types",
    "default_type",
    "etag",
    "sendfile",
    "sendfile_max_chunk",
    "tcp_nopush",
    "tcp_nodelay",
    "open_file_cache",
    "open_file_cache_valid",
    "open_file_cache_min_uses",
    "open_file_cache_errors",
    "types_hash_max_size",
    "types_hash_bucket_size",
];

/// The file serving settings one level sets.
#[derive(Debug, Clone, Default)]
pub struct FilesLayer {
    /// `root` (resolved against the prefix, trailing `/` stripped) or `alias`: one slot, as in nginx.
    root: Option<RootSpec>,
    index: Option<Vec<KeyTemplate>>,
    types: Option<Arc<MimeTypes>>,
    default_type: Option<String>,
    etag: Option<bool>,
    log_not_found: Option<bool>,
    if_modified_since: Option<IfModifiedSince>,
    max_ranges: Option<u32>,
    try_files: Option<Arc<TryFiles>>,
    /// Settings checked and kept only for nginx's `is duplicate` (see the module doc).
    tuning: Tuning,
}

/// A level's `root` or `alias`.
#[derive(Debug, Clone)]
struct RootSpec {
    path: PathBuf,
    vars: Option<KeyTemplate>,
    alias: Alias,
}

/// The tuning directives of one level.
#[derive(Debug, Clone, Default)]
struct Tuning {
    sendfile: Option<bool>,
    tcp_nopush: Option<bool>,
    tcp_nodelay: Option<bool>,
    open_file_cache_errors: Option<bool>,
    sendfile_max_chunk: Option<u64>,
    /// `Some(None)`: `open_file_cache off`.
    open_file_cache: Option<Option<Arc<OpenFileCacheSpec>>>,
    open_file_cache_valid: Option<u64>,
    open_file_cache_min_uses: Option<u64>,
    types_hash_max_size: Option<u64>,
    types_hash_bucket_size: Option<u64>,
}

impl FilesLayer {
    /// Reads `d`, one of [`NAMES`]; relative roots resolve against `b.prefix`.
    pub fn directive(&mut self, b: &mut Build, vars: &mut super::vars::Vars, d: &Directive) -> Result<(), ConfigError> {
        let t = &mut self.tuning;
        match d.name.as_str() {
            "root" => {
                self.root_unset(d)?;
                self.root = Some(root_spec(&b.prefix, vars, d, Alias::Root)?);
            }
            "index" => index(self.index.get_or_insert_with(Vec::new), b, vars, d)?,
            "types" => {
                let table = self.types.get_or_insert_with(|| Arc::new(MimeTypes::default()));
                types_block(Arc::make_mut(table), b, d)?;
            }
            "default_type" => {
                unset(&self.default_type, d)?;
                self.default_type = Some(arg(d, 0).to_string());
            }
            "etag" => flag_slot(&mut self.etag, d)?,
            "log_not_found" => flag_slot(&mut self.log_not_found, d)?,
            "if_modified_since" => {
                unset(&self.if_modified_since, d)?;
                self.if_modified_since = Some(match arg(d, 0) {
                    "off" => IfModifiedSince::Off,
                    "exact" => IfModifiedSince::Exact,
                    "before" => IfModifiedSince::Before,
                    v => return Err(ConfigError::invalid(format!("invalid value \"{v}\""), &d.span)),
                });
            }
            "try_files" => {
                unset(&self.try_files, d)?;
                self.try_files = Some(Arc::new(try_files(vars, d)?));
            }
            "max_ranges" => {
                unset(&self.max_ranges, d)?;
                let n = value::atoi(arg(d, 0))
                    .and_then(|n| u32::try_from(n).ok())
                    .filter(|&n| n <= i32::MAX as u32)
                    .ok_or_else(|| directive_err(d, "invalid number"))?;
                self.max_ranges = Some(n);
            }
            "sendfile" => flag_slot(&mut t.sendfile, d)?,
            "tcp_nopush" => flag_slot(&mut t.tcp_nopush, d)?,
            "tcp_nodelay" => {
                flag_slot(&mut t.tcp_nodelay, d)?;
                if t.tcp_nodelay == Some(false) {
                    let msg =
                        "\"tcp_nodelay off\" is not supported by corelb (it sets TCP_NODELAY on every connection)";
                    return Err(ConfigError::invalid(msg, &d.span));
                }
            }
            "open_file_cache_errors" => flag_slot(&mut t.open_file_cache_errors, d)?,
            "sendfile_max_chunk" => {
                unset(&t.sendfile_max_chunk, d)?;
                let size = value::parse_size(arg(d, 0)).ok_or_else(|| directive_err(d, "invalid value"))?;
                t.sendfile_max_chunk = Some(size);
            }
            "open_file_cache" => {
                unset(&t.open_file_cache, d)?;
                t.open_file_cache = Some(open_file_cache(d)?);
            }
            "open_file_cache_valid" => {
                unset(&t.open_file_cache_valid, d)?;
                let secs = value::parse_time(arg(d, 0), true).ok_or_else(|| directive_err(d, "invalid value"))?;
                t.open_file_cache_valid = Some(secs);
            }
            "open_file_cache_min_uses" => num_slot(&mut t.open_file_cache_min_uses, d)?,
            "types_hash_max_size" => num_slot(&mut t.types_hash_max_size, d)?,
            "types_hash_bucket_size" => num_slot(&mut t.types_hash_bucket_size, d)?,
            _ => {
                return Err(ConfigError::NotAllowedHere {
                    name: d.name.clone(),
                    at: d.span.clone(),
                })
            }
        }
        Ok(())
    }

    /// nginx's `is duplicate` for `root` and `alias`, which share one slot.
    fn root_unset(&self, d: &Directive) -> Result<(), ConfigError> {
        let Some(had) = &self.root else { return Ok(()) };
        let had_alias = had.alias != Alias::Root;
        if had_alias == (d.name == "alias") {
            return unset(&Some(()), d);
        }
        let earlier = if had_alias { "alias" } else { "root" };
        let msg = format!(
            "\"{}\" directive is duplicate, \"{earlier}\" directive was specified earlier",
            d.name
        );
        Err(ConfigError::invalid(msg, &d.span))
    }

    /// `alias PATH` in the location `matcher` (`ngx_http_core_root`): the path replaces the location's name in the
    /// request's path (prefix and exact locations), or is the whole file path (regex locations, where `$1`.. name
    /// the rest). Variables are compiled with `vars`.
    pub fn alias(
        &mut self,
        b: &Build,
        vars: &mut super::vars::Vars,
        d: &Directive,
        matcher: &LocationMatch,
    ) -> Result<(), ConfigError> {
        self.root_unset(d)?;
        if let LocationMatch::Named(_) = matcher {
            let msg = "the \"alias\" directive cannot be used inside the named location";
            return Err(ConfigError::invalid(msg, &d.span));
        }
        let alias = match matcher {
            LocationMatch::Regex(_) => Alias::Whole,
            m => Alias::Cut(m.name().len()),
        };
        self.root = Some(root_spec(&b.prefix, vars, d, alias)?);
        Ok(())
    }

    /// Whether this level has `try_files`.
    pub fn has_try_files(&self) -> bool {
        self.try_files.is_some()
    }

    /// These settings over `parent`'s (nginx's merge: a level's own value wins, else the parent's; a level's
    /// `types` replace the whole inherited table).
    pub fn over(&self, parent: &FilesLayer) -> FilesLayer {
        FilesLayer {
            root: self.root.clone().or_else(|| parent.root.clone()),
            index: self.index.clone().or_else(|| parent.index.clone()),
            types: self.types.clone().or_else(|| parent.types.clone()),
            default_type: self.default_type.clone().or_else(|| parent.default_type.clone()),
            etag: self.etag.or(parent.etag),
            log_not_found: self.log_not_found.or(parent.log_not_found),
            if_modified_since: self.if_modified_since.or(parent.if_modified_since),
            max_ranges: self.max_ranges.or(parent.max_ranges),
            // nginx's try_files module has no merge: a level's own only
            try_files: self.try_files.clone(),
            // of the tuning directives these change what corelb does; the others are checked only
            tuning: Tuning {
                sendfile: self.tuning.sendfile.or(parent.tuning.sendfile),
                sendfile_max_chunk: self.tuning.sendfile_max_chunk.or(parent.tuning.sendfile_max_chunk),
                open_file_cache: self
                    .tuning
                    .open_file_cache
                    .clone()
                    .or_else(|| parent.tuning.open_file_cache.clone()),
                open_file_cache_valid: self
                    .tuning
                    .open_file_cache_valid
                    .or(parent.tuning.open_file_cache_valid),
                open_file_cache_min_uses: self
                    .tuning
                    .open_file_cache_min_uses
                    .or(parent.tuning.open_file_cache_min_uses),
                open_file_cache_errors: self
                    .tuning
                    .open_file_cache_errors
                    .or(parent.tuning.open_file_cache_errors),
                ..Tuning::default()
            },
        }
    }

    /// The settings with nginx's defaults for what no level set (the root `PREFIX/html`).
    pub fn conf(&self, prefix: &Path) -> FilesConf {
        let d = FilesConf::default();
        FilesConf {
            root: self
                .root
                .as_ref()
                .map_or_else(|| prefix.join(&d.root), |r| r.path.clone()),
            root_vars: self.root.as_ref().and_then(|r| r.vars.clone()),
            alias: self.root.as_ref().map_or(Alias::Root, |r| r.alias),
            index: self
                .index
                .clone()
                .unwrap_or_else(|| vec![KeyTemplate::literal(DEFAULT_INDEX)]),
            types: self.types.clone().unwrap_or(d.types),
            default_type: self.default_type.clone().unwrap_or_else(|| DEFAULT_TYPE.to_string()),
            etag: self.etag.unwrap_or(d.etag),
            log_not_found: self.log_not_found.unwrap_or(d.log_not_found),
            if_modified_since: self.if_modified_since.unwrap_or(d.if_modified_since),
            max_ranges: self.max_ranges.unwrap_or(d.max_ranges),
            try_files: self.try_files.clone(),
            sendfile: (self.tuning.sendfile == Some(true))
                .then(|| self.tuning.sendfile_max_chunk.unwrap_or(SENDFILE_MAX_CHUNK)),
            open_file_cache: self
                .tuning
                .open_file_cache
                .clone()
                .flatten()
                .map(|spec| OpenFileCacheUse {
                    spec,
                    valid_secs: self.tuning.open_file_cache_valid.unwrap_or(OPEN_FILE_CACHE_VALID),
                    min_uses: self.tuning.open_file_cache_min_uses.unwrap_or(1),
                    errors: self.tuning.open_file_cache_errors.unwrap_or(false),
                }),
        }
    }
}

/// nginx's default `open_file_cache_valid` and `inactive=` (60s).
const OPEN_FILE_CACHE_VALID: u64 = 60;

/// The ids of `open_file_cache` lines, unique in the process.
static OPEN_FILE_CACHE_IDS: AtomicU64 = AtomicU64::new(1);

/// nginx's default `sendfile_max_chunk` (2m, since 1.21.4).
const SENDFILE_MAX_CHUNK: u64 = 2 * 1024 * 1024;

/// `root PATH` or `alias PATH` (`ngx_http_core_root`): nginx's checks; `root` drops one trailing `/` (`alias`
/// keeps it); a path not starting with a variable is resolved against the prefix at load, one with variables is
/// compiled with `vars` (and resolved per request when its value is relative).
fn root_spec(
    prefix: &Path,
    vars: &mut super::vars::Vars,
    d: &Directive,
    alias: Alias,
) -> Result<RootSpec, ConfigError> {
    let path = arg(d, 0);
    forbidden_vars(path, d)?;
    // nginx drops one trailing `/` first, then tests the first byte as written: `root /;` is the empty root (paths
    // are then the request's path itself), not the prefix.
    let trimmed = match alias {
        Alias::Root => path.strip_suffix('/').unwrap_or(path),
        _ => path,
    };
    let full = if path.starts_with('/') || path.starts_with('$') {
        PathBuf::from(trimmed)
    } else {
        prefix.join(trimmed)
    };
    let text = full.to_string_lossy();
    let template = vars.compile(&text, super::vars::Module::Http, &d.span)?;
    // a regex location's alias is a template even without variables (nginx: its captures may come from `$1`)
    Ok(if template.is_constant() {
        RootSpec {
            path: full,
            vars: None,
            alias,
        }
    } else {
        RootSpec {
            path: prefix.to_path_buf(),
            vars: Some(template),
            alias,
        }
    })
}

/// `try_files FILE... =CODE|@name|URI` (`ngx_http_try_files`): a name ending in `/` (not the last) tests for a
/// directory; `=CODE` is checked as nginx does (`invalid code "=X"`). A last URI with arguments (`?`) is refused
/// by name: corelb's internal redirects keep the request's own arguments.
fn try_files(vars: &mut super::vars::Vars, d: &Directive) -> Result<TryFiles, ConfigError> {
    let (last, names) = d
        .args
        .split_last()
        .ok_or_else(|| directive_err(d, "invalid number of arguments"))?;
    let mut tries = Vec::with_capacity(names.len());
    for name in names {
        let (name, dir) = match name.strip_suffix('/') {
            Some(n) => (n, true),
            None => (name.as_str(), false),
        };
        tries.push((vars.compile(name, super::vars::Module::Http, &d.span)?, dir));
    }
    let last = if let Some(code) = last.strip_prefix('=') {
        let n = value::atoi(code).filter(|&n| n <= 999 && !code.is_empty());
        let n = n.ok_or_else(|| ConfigError::invalid(format!("invalid code \"{last}\""), &d.span))?;
        TryLast::Code(n as u16)
    } else {
        if last.contains('?') {
            let msg = "\"try_files\" with arguments in its last URI is not supported by corelb";
            return Err(ConfigError::invalid(msg, &d.span));
        }
        TryLast::Uri(vars.compile(last, super::vars::Module::Http, &d.span)?)
    };
    Ok(TryFiles { tries, last })
}

/// nginx's refusal of `$document_root` and `$realpath_root` in `root` and `alias`.
fn forbidden_vars(path: &str, d: &Directive) -> Result<(), ConfigError> {
    for var in ["document_root", "realpath_root"] {
        if path.contains(&format!("${var}")) || path.contains(&format!("${{{var}}}")) {
            let msg = format!("the ${var} variable cannot be used in the \"{}\" directive", d.name);
            return Err(ConfigError::invalid(msg, &d.span));
        }
    }
    Ok(())
}

/// `index FILE...` (`ngx_http_index_set_index`): names add up over the lines of a level; an empty one is an
/// error, an absolute one before the last a warning; variables are compiled with `vars`.
fn index(
    names: &mut Vec<KeyTemplate>,
    b: &mut Build,
    vars: &mut super::vars::Vars,
    d: &Directive,
) -> Result<(), ConfigError> {
    let last = d.args.len().saturating_sub(1);
    for (i, name) in d.args.iter().enumerate() {
        if name.starts_with('/') && i != last {
            b.warn("only the last index in \"index\" directive should be absolute", &d.span);
        }
        if name.is_empty() {
            let msg = format!("index \"{name}\" in \"index\" directive is invalid");
            return Err(ConfigError::invalid(msg, &d.span));
        }
        names.push(vars.compile(name, super::vars::Module::Http, &d.span)?);
    }
    Ok(())
}

/// The lines of a `types { TYPE EXT...; }` block (`ngx_http_core_type`) into `table`: a repeated extension is
/// nginx's `duplicate extension` warning and takes the later type.
fn types_block(table: &mut MimeTypes, b: &mut Build, d: &Directive) -> Result<(), ConfigError> {
    let block = super::block_of(d)?;
    for line in &block.items {
        if line.block.is_some() {
            return Err(ConfigError::syntax("unexpected \"{\"", line.span.clone()));
        }
        for ext in &line.args {
            if let Some(old) = table.insert(ext, &line.name) {
                let msg = format!(
                    "duplicate extension \"{}\", content type: \"{}\", previous content type: \"{old}\"",
                    ext.to_ascii_lowercase(),
                    line.name
                );
                b.warn(&msg, &line.span);
            }
        }
    }
    block.close.clone().map(|_| ())
}

/// `open_file_cache off | max=N [inactive=TIME]` (`ngx_http_core_open_file_cache`) with nginx's checks: the
/// cache, or `None` for `off`.
fn open_file_cache(d: &Directive) -> Result<Option<Arc<OpenFileCacheSpec>>, ConfigError> {
    let mut max = 0;
    let mut inactive_secs = OPEN_FILE_CACHE_VALID;
    let mut off = false;
    for p in &d.args {
        let ok = if let Some(n) = p.strip_prefix("max=") {
            max = value::atoi(n).unwrap_or(0);
            max > 0
        } else if let Some(t) = p.strip_prefix("inactive=") {
            value::parse_time(t, true).map(|s| inactive_secs = s).is_some()
        } else if p == "off" {
            off = true;
            true
        } else {
            false
        };
        if !ok {
            let msg = format!("invalid \"open_file_cache\" parameter \"{p}\"");
            return Err(ConfigError::invalid(msg, &d.span));
        }
    }
    if off {
        return Ok(None);
    }
    if max == 0 {
        let msg = "\"open_file_cache\" must have the \"max\" parameter";
        return Err(ConfigError::invalid(msg, &d.span));
    }
    Ok(Some(Arc::new(OpenFileCacheSpec {
        id: OPEN_FILE_CACHE_IDS.fetch_add(1, Ordering::Relaxed),
        max: usize::try_from(max).unwrap_or(usize::MAX),
        inactive_secs,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::Span;
    use crate::config::parser::Block;

    fn directive(name: &str, args: &[&str]) -> Directive {
        Directive::at_t_conf(name, args)
    }

    fn read(layer: &mut FilesLayer, b: &mut Build, name: &str, args: &[&str]) -> Result<(), String> {
        let mut vars = super::super::vars::Vars::default();
        layer
            .directive(b, &mut vars, &directive(name, args))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn root_resolves_against_the_prefix() {
        let mut b = Build {
            prefix: PathBuf::from("/p/"),
            ..Build::default()
        };
        let mut l = FilesLayer::default();
        read(&mut l, &mut b, "root", &["www/"]).unwrap();
        assert_eq!(l.conf(&b.prefix).root, PathBuf::from("/p/www"));
        assert_eq!(
            read(&mut l, &mut b, "root", &["/x"]),
            Err("[emerg] \"root\" directive is duplicate in t.conf:3".into())
        );
        let mut abs = FilesLayer::default();
        read(&mut abs, &mut b, "root", &["/srv/"]).unwrap();
        assert_eq!(abs.conf(&b.prefix).root, PathBuf::from("/srv"));
        let mut slash = FilesLayer::default();
        read(&mut slash, &mut b, "root", &["/"]).unwrap();
        assert_eq!(
            slash.conf(&b.prefix).root,
            PathBuf::from(""),
            "the file system's root, as nginx"
        );
        assert_eq!(FilesLayer::default().conf(&b.prefix).root, PathBuf::from("/p/html"));
        for (arg, msg) in [
            (
                "/a/$document_root",
                "the $document_root variable cannot be used in the \"root\" directive",
            ),
            (
                "${realpath_root}/x",
                "the $realpath_root variable cannot be used in the \"root\" directive",
            ),
        ] {
            let e = read(&mut FilesLayer::default(), &mut b, "root", &[arg]).unwrap_err();
            assert_eq!(e, format!("[emerg] {msg} in t.conf:3"));
        }
    }

    #[test]
    fn index_names_add_up_and_inherit_whole() {
        let mut b = Build::default();
        let mut l = FilesLayer::default();
        read(&mut l, &mut b, "index", &["/first.html", "a.html"]).unwrap();
        read(&mut l, &mut b, "index", &["b.html"]).unwrap();
        assert_eq!(
            b.warnings,
            vec!["[warn] only the last index in \"index\" directive should be absolute in t.conf:3"]
        );
        let raw = |l: &FilesLayer| {
            l.conf(Path::new(""))
                .index
                .iter()
                .map(|t| t.raw().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(raw(&l), ["/first.html", "a.html", "b.html"]);
        let child = FilesLayer::default().over(&l);
        assert_eq!(child.conf(Path::new("")).index.len(), 3);
        assert_eq!(raw(&FilesLayer::default()), ["index.html"]);
        assert_eq!(
            read(&mut l, &mut b, "index", &[""]),
            Err("[emerg] index \"\" in \"index\" directive is invalid in t.conf:3".into())
        );
        read(&mut l, &mut b, "index", &["$uri.html"]).unwrap();
        assert!(!l.conf(Path::new("")).index[3].is_constant());
    }

    #[test]
    fn types_replace_the_inherited_table() {
        let mut b = Build::default();
        let mut http = FilesLayer::default();
        let mut d = directive("types", &[]);
        d.block = Some(Block {
            items: vec![
                directive("text/css", &["CSS", "scss"]),
                directive("text/x-empty", &[]),
                directive("text/x-sass", &["scss"]),
            ],
            close: Ok(Span::default()),
        });
        http.directive(&mut b, &mut super::super::vars::Vars::default(), &d)
            .unwrap();
        assert_eq!(
            b.warnings,
            vec![
                "[warn] duplicate extension \"scss\", content type: \"text/x-sass\", previous content type: \
                 \"text/css\" in t.conf:3"
            ]
        );
        let conf = FilesLayer::default().over(&http).conf(Path::new(""));
        assert_eq!(conf.types.get(b"css"), Some("text/css"));
        assert_eq!(conf.types.get(b"scss"), Some("text/x-sass"));
        assert_eq!(
            conf.types.get(b"html"),
            None,
            "a types block replaces the built-in table"
        );
        let plain = FilesLayer::default().conf(Path::new(""));
        assert_eq!(plain.types.get(b"html"), Some("text/html"));
        assert_eq!(plain.types.get(b"css"), None);
        assert_eq!(plain.default_type, "text/plain");
    }

    #[test]
    fn tuning_directives_are_checked() {
        let mut b = Build::default();
        let mut l = FilesLayer::default();
        for (name, args) in [
            ("sendfile", &["on"][..]),
            ("tcp_nopush", &["off"]),
            ("tcp_nodelay", &["on"]),
            ("sendfile_max_chunk", &["2m"]),
            ("open_file_cache", &["max=1000", "inactive=20s"]),
            ("open_file_cache_valid", &["30s"]),
            ("open_file_cache_min_uses", &["2"]),
            ("open_file_cache_errors", &["on"]),
            ("types_hash_max_size", &["2048"]),
            ("types_hash_bucket_size", &["64"]),
            ("etag", &["off"]),
            ("log_not_found", &["off"]),
        ] {
            read(&mut l, &mut b, name, args).unwrap();
            assert_eq!(
                read(&mut l, &mut b, name, args),
                Err(format!("[emerg] \"{name}\" directive is duplicate in t.conf:3"))
            );
        }
        assert!(!l.conf(Path::new("")).etag);
        assert!(!l.conf(Path::new("")).log_not_found);
        let mut one = |name: &str, args: &[&str]| read(&mut FilesLayer::default(), &mut b, name, args);
        assert_eq!(one("open_file_cache", &["off"]), Ok(()));
        assert_eq!(
            one("open_file_cache", &["inactive=1m"]),
            Err("[emerg] \"open_file_cache\" must have the \"max\" parameter in t.conf:3".into())
        );
        assert_eq!(
            one("open_file_cache", &["max=0"]),
            Err("[emerg] invalid \"open_file_cache\" parameter \"max=0\" in t.conf:3".into())
        );
        assert_eq!(
            one("sendfile", &["yes"]),
            Err(
                "[emerg] invalid value \"yes\" in \"sendfile\" directive, it must be \"on\" or \"off\" in t.conf:3"
                    .into()
            )
        );
        assert_eq!(
            one("sendfile_max_chunk", &["x"]),
            Err("[emerg] \"sendfile_max_chunk\" directive invalid value in t.conf:3".into())
        );
        assert_eq!(
            one("tcp_nodelay", &["off"]),
            Err(
                "[emerg] \"tcp_nodelay off\" is not supported by corelb (it sets TCP_NODELAY on every connection) \
                 in t.conf:3"
                    .into()
            )
        );
    }
}
