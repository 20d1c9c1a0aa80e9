//! A location's file serving compiled at load: its root as bytes to put the request's path after, its index
//! names, its types table and default type, and whether it sends an `ETag`.

use crate::config::files::{extension, FilesConf, MimeTypes};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

/// One `index` name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexName {
    /// A file name tried in the requested directory.
    File(Box<[u8]>),
    /// A name starting with `/`: a URI the request is redirected to at once (nginx's internal redirect).
    Uri(Box<[u8]>),
}

/// How a location (or a server outside its locations) serves files.
#[derive(Debug)]
pub struct FilesPlan {
    /// The root, without a trailing `/`: the file of a request is this followed by its normalized path.
    root: Box<[u8]>,
    pub index: Box<[IndexName]>,
    types: Arc<MimeTypes>,
    default_type: Box<str>,
    /// `etag on`.
    pub etag: bool,
    /// `log_not_found on`.
    pub log_not_found: bool,
}

impl FilesPlan {
    /// The plan of `conf`.
    pub fn new(conf: &FilesConf) -> FilesPlan {
        let index = conf
            .index
            .iter()
            .map(|n| {
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
            index,
            types: Arc::clone(&conf.types),
            default_type: conf.default_type.as_str().into(),
            etag: conf.etag,
            log_not_found: conf.log_not_found,
        }
    }

    /// Writes the file system path of `uri` (a normalized path, [`crate::http::request::RequestHead::uri`]) into
    /// `out`, cleared first: the root, then the path (nginx's `ngx_http_map_uri_to_path` for `root`). A normalized
    /// path has no `.` or `..` segment, so the result stays under the root (symbolic links are followed, as
    /// nginx's default `disable_symlinks off`).
    pub fn path_of(&self, uri: &[u8], out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(&self.root);
        out.extend_from_slice(uri);
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
    use std::path::PathBuf;

    #[test]
    fn paths_and_types() {
        let mut types = MimeTypes::builtin();
        types.insert("css", "text/css");
        let conf = FilesConf {
            root: PathBuf::from("/srv/www"),
            index: vec!["a.html".into(), "/b.html".into()],
            types: Arc::new(types),
            default_type: "application/octet-stream".into(),
            etag: true,
            log_not_found: true,
        };
        let plan = FilesPlan::new(&conf);
        let mut out = Vec::new();
        plan.path_of(b"/x/y%20.css", &mut out);
        assert_eq!(out, b"/srv/www/x/y%20.css");
        plan.path_of(b"/", &mut out);
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
