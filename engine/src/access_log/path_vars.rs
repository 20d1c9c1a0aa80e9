//! The writer thread's side of log paths with variables (nginx's `ngx_http_log_script_write`): each line comes
//! with the path its request named; the file is opened (`O_APPEND|O_CREAT`, 0644), written and closed, or kept
//! open by the location's `open_log_file_cache` as nginx's `ngx_open_cached_file` keeps it. All of it runs on
//! the writer thread, so a shard never waits on an `open(2)` or a `stat(2)`.

use crate::config::log_path::{NamedRule, OpenLogCache};
use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// A file an `open_log_file_cache` knows (nginx's `ngx_cached_open_file_t`).
#[derive(Debug)]
struct Entry {
    name: Vec<u8>,
    uses: u64,
    /// Kept open once used `min_uses` times.
    file: Option<File>,
    /// Device and inode of `file`, to see whether the name still names it.
    id: (u64, u64),
    /// When `file` was opened or last found to be the file its name names.
    checked: Instant,
    accessed: Instant,
}

/// One `open_log_file_cache`'s files, least recently used first.
#[derive(Debug, Default)]
struct FileCache {
    entries: Vec<Entry>,
}

/// The writer thread's state for paths with variables: a file cache per log path plan that has one.
#[derive(Debug, Default)]
pub struct NamedFiles {
    caches: Vec<(Arc<dyn NamedRule>, FileCache)>,
}

/// Opens `name` for appending as nginx opens a log (`NGX_FILE_APPEND`, `NGX_FILE_CREATE_OR_OPEN`, 0644).
fn open(name: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o644)
        .open(name)
}

fn write_line(file: &File, name: &Path, line: &[u8]) {
    if let Err(e) = (&*file).write_all(line) {
        crate::log_alert!("write() to \"{}\" failed ({e})", name.display());
    }
}

fn open_failed(name: &Path, e: &io::Error) {
    crate::log!(crate::log::Level::Crit, "open() \"{}\" failed ({e})", name.display());
}

fn file_id(file: &File) -> (u64, u64) {
    file.metadata().map_or((0, 0), |m| (m.dev(), m.ino()))
}

impl NamedFiles {
    /// Appends `line` to the file `path` names, for a line of `plan` (its root checked first, as nginx's).
    pub fn write(&mut self, plan: &Arc<dyn NamedRule>, path: &[u8], line: &[u8], now: Instant) {
        if let Some(root) = plan.root() {
            match std::fs::metadata(root) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    crate::log_error!("testing \"{}\" existence failed (Not a directory)", root.display());
                    return;
                }
                Err(e) => {
                    crate::log_error!("testing \"{}\" existence failed ({e})", root.display());
                    return;
                }
            }
        }
        let name = Path::new(OsStr::from_bytes(path));
        let Some(policy) = plan.cache() else {
            match open(name) {
                Ok(file) => write_line(&file, name, line),
                Err(e) => open_failed(name, &e),
            }
            return;
        };
        // caches of plans no snapshot holds any more are closed
        self.caches
            .retain(|(p, _)| Arc::strong_count(p) > 1 || Arc::ptr_eq(p, plan));
        let i = match self.caches.iter().position(|(p, _)| Arc::ptr_eq(p, plan)) {
            Some(i) => i,
            None => {
                self.caches.push((Arc::clone(plan), FileCache::default()));
                self.caches.len() - 1
            }
        };
        if let Some((_, cache)) = self.caches.get_mut(i) {
            cache.write(&policy, name, path, line, now);
        }
    }
}

impl FileCache {
    fn write(&mut self, policy: &OpenLogCache, name: &Path, path: &[u8], line: &[u8], now: Instant) {
        self.entries
            .retain(|e| now.saturating_duration_since(e.accessed) <= policy.inactive);
        let Some(i) = self.entries.iter().position(|e| e.name == path) else {
            let file = match open(name) {
                Ok(f) => f,
                Err(e) => return open_failed(name, &e),
            };
            write_line(&file, name, line);
            if self.entries.len() >= policy.max && !self.entries.is_empty() {
                self.entries.remove(0);
            }
            let id = file_id(&file);
            self.entries.push(Entry {
                name: path.to_vec(),
                uses: 1,
                file: (policy.min_uses <= 1).then_some(file),
                id,
                checked: now,
                accessed: now,
            });
            return;
        };
        let mut e = self.entries.remove(i);
        e.uses += 1;
        e.accessed = now;
        let fresh = now.saturating_duration_since(e.checked) < policy.valid;
        let same = |e: &Entry| {
            std::fs::metadata(name)
                .map(|m| (m.dev(), m.ino()) == e.id)
                .unwrap_or(false)
        };
        match &e.file {
            Some(file) if fresh || same(&e) => {
                if !fresh {
                    e.checked = now;
                }
                write_line(file, name, line);
            }
            _ => {
                // not kept yet, or the name names another file now (or none): opened again
                e.file = None;
                let file = match open(name) {
                    Ok(f) => f,
                    // nginx drops the entry of a file it could not open
                    Err(err) => return open_failed(name, &err),
                };
                write_line(&file, name, line);
                e.id = file_id(&file);
                e.checked = now;
                e.file = (e.uses >= policy.min_uses).then_some(file);
            }
        }
        self.entries.push(e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::log_format::LogFormat;
    use std::time::Duration;

    fn plan(dir: &Path, cache: Option<OpenLogCache>) -> Arc<dyn NamedRule> {
        Arc::new(crate::config::log_path::LogPath {
            lead: Vec::new(),
            format: Arc::new(LogFormat::compile("path", &[]).unwrap()),
            cache,
            root: Some(dir.to_path_buf()),
        })
    }

    fn lines(p: &Path) -> usize {
        std::fs::read(p).map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count())
    }

    #[test]
    fn without_a_cache_each_line_opens_the_file_it_names() {
        let dir = std::env::temp_dir().join(format!("corelb-path-vars-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let p = plan(&dir, None);
        let mut files = NamedFiles::default();
        let a = dir.join("a.log");
        let now = Instant::now();
        files.write(&p, a.as_os_str().as_bytes(), b"one\n", now);
        files.write(&p, a.as_os_str().as_bytes(), b"two\n", now);
        assert_eq!(std::fs::read(&a).unwrap(), b"one\ntwo\n");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&a).unwrap().permissions().mode() & 0o777 & !0o022,
            0o644
        );
        // a missing root: nothing is written
        let gone = plan(&dir.join("no-root"), None);
        files.write(&gone, dir.join("b.log").as_os_str().as_bytes(), b"x\n", now);
        assert!(!dir.join("b.log").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// access_log.t's cache case: `max=3 min_uses=2`, the directory renamed after seven lines.
    #[test]
    fn the_cache_keeps_files_used_min_uses_times_and_drops_the_least_recent() {
        let base = std::env::temp_dir().join(format!("corelb-path-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let dir = base.join("dir");
        std::fs::create_dir_all(&dir).unwrap();
        let policy = OpenLogCache {
            max: 3,
            inactive: Duration::from_secs(20),
            valid: Duration::from_secs(60),
            min_uses: 2,
        };
        let p = plan(&base, Some(policy));
        let mut files = NamedFiles::default();
        let now = Instant::now();
        let name = |n: &str| dir.join(n).as_os_str().as_bytes().to_vec();
        for n in ["lru", "lru", "once", "first", "first", "second", "second"] {
            files.write(&p, &name(n), b"/\n", now);
        }
        let moved = base.join("dir_moved");
        std::fs::rename(&dir, &moved).unwrap();
        for n in ["lru", "once", "first", "second"] {
            files.write(&p, &name(n), b"/\n", now);
        }
        assert_eq!(lines(&moved.join("lru")), 2, "closed as least recently used");
        assert_eq!(lines(&moved.join("once")), 1, "used fewer than min_uses times");
        assert_eq!(lines(&moved.join("first")), 3, "kept open");
        assert_eq!(lines(&moved.join("second")), 3, "kept open");
        // past `valid`, a kept file is checked against its name: gone, it is opened again (and fails here)
        let later = now + Duration::from_secs(61);
        files.write(&p, &name("first"), b"/\n", later);
        assert_eq!(lines(&moved.join("first")), 3);
        // past `inactive`, files are closed
        files.write(&p, &name("x"), b"/\n", now + Duration::from_secs(100));
        assert!(files.caches[0].1.entries.is_empty());
        let _ = std::fs::remove_dir_all(&base);
    }
}
