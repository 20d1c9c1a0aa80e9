//! What a location serves from the file system, as nginx's core, static and index modules configure it: the
//! `root` or `alias`, the `index` files, the `types` table with its `default_type`, and `etag`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::key::KeyTemplate;

/// nginx's `NGX_HTTP_DEFAULT_INDEX`.
pub const DEFAULT_INDEX: &str = "index.html";

/// nginx's `default_type` default.
pub const DEFAULT_TYPE: &str = "text/plain";

/// The table nginx uses when no level has a `types` block (`ngx_http_core_default_types`): only these three. A
/// config that wants more includes a `mime.types` file (`examples/mime.types` is nginx's).
pub const BUILTIN_TYPES: [(&str, &str); 3] = [("html", "text/html"), ("gif", "image/gif"), ("jpg", "image/jpeg")];

/// A location's file serving settings, inherited http -> server -> location and filled with nginx's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct FilesConf {
    /// `root`: resolved against the prefix, without a trailing `/` (nginx strips it); default `PREFIX/html`. For
    /// `alias`, its path as written (resolved against the prefix, a trailing `/` kept).
    pub root: PathBuf,
    /// `root` or `alias` with variables: the template evaluated per request (then `root` is the prefix it is
    /// resolved against when relative, as nginx's `ngx_get_full_name`).
    pub root_vars: Option<KeyTemplate>,
    /// What of the request's path follows the root.
    pub alias: Alias,
    /// `index` names in order (default `index.html`), variables compiled; a name starting with `/` is a URI to
    /// redirect to.
    pub index: Vec<KeyTemplate>,
    /// `types`: file name extension -> content type.
    pub types: Arc<MimeTypes>,
    /// `default_type`: the content type of a file whose extension is not in `types`.
    pub default_type: String,
    /// `etag on|off` (default on).
    pub etag: bool,
    /// `log_not_found on|off` (default on): whether a missing file is an error log line.
    pub log_not_found: bool,
    /// `if_modified_since`.
    pub if_modified_since: IfModifiedSince,
    /// `try_files` of this level only (nginx does not inherit it).
    pub try_files: Option<Arc<TryFiles>>,
    /// `max_ranges N` (default: no limit, nginx's `NGX_MAX_INT32_VALUE`); `0` turns ranges off.
    pub max_ranges: u32,
    /// `sendfile on` (default off): a file's bytes go from the page cache to the socket with sendfile(2), at most
    /// `sendfile_max_chunk` bytes a call (default 2m; `0`: no limit). `None`: off.
    pub sendfile: Option<u64>,
    /// `open_file_cache max=N` with the level's `open_file_cache_valid`, `_min_uses` and `_errors`; `None`: off.
    pub open_file_cache: Option<OpenFileCacheUse>,
}

/// One `open_file_cache max=N [inactive=T]` line: each line is its own cache (per shard), which the levels below
/// it share, as each of nginx's lines makes one `ngx_open_file_cache_t` per worker.
#[derive(Debug, PartialEq, Eq)]
pub struct OpenFileCacheSpec {
    /// Unique in the process (a reload's lines get new ones, so a shard starts their caches empty).
    pub id: u64,
    /// `max=N`: entries at most; the least recently used goes first.
    pub max: usize,
    /// `inactive=T` (default 60s): an entry unused this long is dropped.
    pub inactive_secs: u64,
}

/// A location's use of a cache: the cache and the settings nginx merges on their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenFileCacheUse {
    pub spec: Arc<OpenFileCacheSpec>,
    /// `open_file_cache_valid` (default 60s): how long an entry is used before the file is looked at again.
    pub valid_secs: u64,
    /// `open_file_cache_min_uses` (default 1): uses after which the descriptor is kept open.
    pub min_uses: u64,
    /// `open_file_cache_errors on` (default off): failed lookups are cached too.
    pub errors: bool,
}

impl Default for FilesConf {
    fn default() -> Self {
        FilesConf {
            root: PathBuf::from("html"),
            root_vars: None,
            alias: Alias::Root,
            index: vec![KeyTemplate::literal(DEFAULT_INDEX)],
            types: Arc::new(MimeTypes::builtin()),
            default_type: DEFAULT_TYPE.to_string(),
            etag: true,
            log_not_found: true,
            if_modified_since: IfModifiedSince::Exact,
            max_ranges: i32::MAX as u32,
            try_files: None,
            sendfile: None,
            open_file_cache: None,
        }
    }
}

/// `if_modified_since off|exact|before` (nginx's default `exact`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IfModifiedSince {
    Off,
    #[default]
    Exact,
    Before,
}

/// `try_files FILE... LAST` (nginx's try_files module).
#[derive(Debug, Clone, PartialEq)]
pub struct TryFiles {
    /// The names tried in order: a template, and whether it must be a directory (it was written with a trailing
    /// `/`, dropped here).
    pub tries: Vec<(KeyTemplate, bool)>,
    pub last: TryLast,
}

/// What `try_files` does when no name is found.
#[derive(Debug, Clone, PartialEq)]
pub enum TryLast {
    /// `=CODE`.
    Code(u16),
    /// A URI (internal redirect) or, starting with `@` once evaluated, a named location.
    Uri(KeyTemplate),
}

/// How the root and the request's path make the file's path (nginx's `clcf->alias`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alias {
    /// `root`: the whole path follows it.
    Root,
    /// `alias` in a prefix or exact location: the path after the location's name (this many bytes) follows it.
    Cut(usize),
    /// `alias` in a regex location: it is the whole file path (its captures name the rest).
    Whole,
}

/// A `types { TYPE EXT...; }` table: extensions are lower case (nginx lower-cases them as it reads them) and
/// looked up without regard to case, as nginx does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MimeTypes {
    by_ext: HashMap<Box<[u8]>, usize>,
    types: Vec<String>,
    /// The longest extension in the table (a longer one cannot match; it is not lower-cased to find out).
    longest: usize,
}

/// The longest extension looked up without allocating; longer ones are lower-cased on the heap.
const STACK_EXT: usize = 32;

impl MimeTypes {
    /// nginx's built-in table ([`BUILTIN_TYPES`]).
    pub fn builtin() -> Self {
        let mut t = MimeTypes::default();
        for (ext, ty) in BUILTIN_TYPES {
            t.insert(ext, ty);
        }
        t
    }

    /// Maps `ext` (lower-cased here) to `content_type`; returns the type it had before, if any (nginx warns
    /// `duplicate extension`, and the later line wins).
    pub fn insert(&mut self, ext: &str, content_type: &str) -> Option<String> {
        let key: Box<[u8]> = ext.to_ascii_lowercase().into_bytes().into_boxed_slice();
        let index = match self.types.iter().position(|t| t == content_type) {
            Some(i) => i,
            None => {
                self.types.push(content_type.to_string());
                self.types.len() - 1
            }
        };
        self.longest = self.longest.max(key.len());
        let old = self.by_ext.insert(key, index)?;
        self.types.get(old).cloned()
    }

    /// The content type of the extension `ext` (any case), if the table has it.
    pub fn get(&self, ext: &[u8]) -> Option<&str> {
        if ext.len() > self.longest {
            return None;
        }
        let index = if ext.iter().any(u8::is_ascii_uppercase) {
            let mut stack = [0u8; STACK_EXT];
            match stack.get_mut(..ext.len()) {
                Some(lower) => {
                    lower.copy_from_slice(ext);
                    lower.make_ascii_lowercase();
                    self.by_ext.get(&*lower)
                }
                None => self.by_ext.get(ext.to_ascii_lowercase().as_slice()),
            }
        } else {
            self.by_ext.get(ext)
        };
        index.and_then(|&i| self.types.get(i)).map(String::as_str)
    }

    /// How many extensions the table maps.
    pub fn len(&self) -> usize {
        self.by_ext.len()
    }

    /// Whether the table maps no extension.
    pub fn is_empty(&self) -> bool {
        self.by_ext.is_empty()
    }
}

/// The extension of the last segment of the path `uri` as nginx finds it (`ngx_http_set_exten`): after its last
/// `.`, unless that `.` starts the segment (`/.htaccess` has none). Empty when there is none.
pub fn extension(uri: &[u8]) -> &[u8] {
    let mut i = uri.len();
    while i > 2 {
        i -= 1;
        match uri.get(i) {
            Some(b'.') if uri.get(i - 1) != Some(&b'/') => return uri.get(i + 1..).unwrap_or_default(),
            Some(b'/') => return &[],
            _ => {}
        }
    }
    &[]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_as_nginx_finds_them() {
        assert_eq!(extension(b"/a/b.css"), b"css");
        assert_eq!(extension(b"/a/x.tar.GZ"), b"GZ");
        assert_eq!(extension(b"/a/.htaccess"), b"");
        assert_eq!(extension(b"/a.b/c"), b"");
        assert_eq!(extension(b"/a/b."), b"");
        assert_eq!(extension(b"/a/..x"), b"x");
        assert_eq!(extension(b"/.x"), b"");
        assert_eq!(extension(b"/x.y"), b"y");
        assert_eq!(extension(b"/"), b"");
        assert_eq!(extension(b""), b"");
    }

    #[test]
    fn lookup_ignores_case_and_later_lines_win() {
        let mut t = MimeTypes::builtin();
        assert_eq!(t.get(b"html"), Some("text/html"));
        assert_eq!(t.get(b"HtMl"), Some("text/html"));
        assert_eq!(t.get(b"css"), None);
        assert_eq!(t.insert("CSS", "text/css"), None);
        assert_eq!(t.get(b"css"), Some("text/css"));
        assert_eq!(t.insert("html", "application/xhtml+xml"), Some("text/html".to_string()));
        assert_eq!(t.get(b"HTML"), Some("application/xhtml+xml"));
        let long = "x".repeat(STACK_EXT + 3);
        t.insert(&long, "a/b");
        assert_eq!(t.get(long.to_ascii_uppercase().as_bytes()), Some("a/b"));
        assert_eq!(t.get(b""), None);
        assert_eq!(t.len(), 5);
    }
}
