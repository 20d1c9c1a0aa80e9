//! nginx's `open_file_cache` (`ngx_open_cached_file`): per shard thread and per `open_file_cache` line, the open
//! descriptors and facts (size, modification time, directory or not) of the files looked up by the static, index
//! and try_files handlers, and under `open_file_cache_errors on` their failures, reused without a system call
//! until `open_file_cache_valid` has passed. Then a kept descriptor is checked by one `stat` of its name: the same
//! file (device and inode) keeps it, another is opened. An entry unused for `inactive` is dropped on a later
//! lookup (at most two a lookup, as nginx's request cleanup); at `max` entries the least recently used goes first.
//! A descriptor is kept once its name was looked up `open_file_cache_min_uses` times. A request holds the
//! descriptor it was given (reference counted) even when its entry goes; files are read at offsets, never by the
//! shared file position. A reload starts new caches ([`clear`] on the shard's tick).

use crate::config::files::OpenFileCacheUse;
use lru::LruCache;
use std::cell::RefCell;
use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::rc::Rc;

/// What the file handlers use of a file's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileFacts {
    pub(super) is_dir: bool,
    pub(super) is_file: bool,
    pub(super) size: u64,
    /// Seconds since the epoch.
    pub(super) mtime: i64,
    /// nginx's `uniq`, with the device: the same file when both are equal.
    dev: u64,
    ino: u64,
}

impl FileFacts {
    fn of(meta: &std::fs::Metadata) -> FileFacts {
        FileFacts {
            is_dir: meta.is_dir(),
            is_file: meta.is_file(),
            size: meta.len(),
            mtime: meta.mtime(),
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }

    fn same_file(&self, other: &FileFacts) -> bool {
        self.dev == other.dev && self.ino == other.ino
    }
}

/// An open file: the request's own, or a cache's, which other requests of the shard may read at the same time.
#[derive(Debug)]
pub(super) enum FileFd {
    Own(File),
    Cached(Rc<File>),
}

impl std::ops::Deref for FileFd {
    type Target = File;

    fn deref(&self) -> &File {
        match self {
            FileFd::Own(f) => f,
            FileFd::Cached(f) => f,
        }
    }
}

/// A file looked up: its descriptor (none for a directory) and its facts.
pub(super) type Found = (Option<FileFd>, FileFacts);

/// Opens `path` (through `cache` when the location has one) and reads its facts. A directory's descriptor is
/// closed at once: the handlers answer a directory without reading it.
pub(super) fn open(cache: Option<&OpenFileCacheUse>, path: &[u8]) -> io::Result<Found> {
    match cache {
        None => open_and_stat(path),
        Some(c) => CACHES.with(|caches| {
            caches
                .borrow_mut()
                .lookup(c, path, Want::Open, crate::clock::now_secs())
        }),
    }
}

/// The facts of `path` (through `cache` when the location has one), as nginx's `test_only` lookups of the index
/// and try_files handlers: a `stat` when not cached.
pub(super) fn stat(cache: Option<&OpenFileCacheUse>, path: &[u8]) -> io::Result<FileFacts> {
    match cache {
        None => stat_path(path),
        Some(c) => CACHES
            .with(|caches| {
                caches
                    .borrow_mut()
                    .lookup(c, path, Want::Stat, crate::clock::now_secs())
            })
            .map(|(_, facts)| facts),
    }
}

/// Drops every cache of this shard thread and closes the descriptors no request holds (after a reload).
pub(crate) fn clear() {
    CACHES.with(|caches| caches.borrow_mut().by_line.clear());
}

/// The entries this shard thread's caches hold (for tests).
#[cfg(test)]
fn entries() -> usize {
    CACHES.with(|caches| caches.borrow().by_line.iter().map(|(_, lru)| lru.len()).sum())
}

thread_local! {
    static CACHES: RefCell<Caches> = RefCell::new(Caches::default());
}

/// One line's cache on one shard thread: path -> entry, least recently used last.
type LineCache = LruCache<Box<[u8]>, Entry>;

/// One shard thread's caches, one per `open_file_cache` line in use (a handful: looked up in order).
#[derive(Default)]
struct Caches {
    by_line: Vec<(u64, LineCache)>,
}

/// One name's entry (`ngx_cached_open_file_t`).
struct Entry {
    state: State,
    /// Lookups of the name since the entry was made.
    uses: u64,
    /// When the file was last looked at (seconds): fresh for `open_file_cache_valid` from then.
    checked: u64,
    /// When the entry was last used (seconds), for `inactive`.
    accessed: u64,
}

enum State {
    /// The descriptor once kept (`min_uses`, not a directory).
    Found { facts: FileFacts, fd: Option<Rc<File>> },
    /// The lookup failed with this errno (`open_file_cache_errors on` only).
    Failed(i32),
}

/// What a lookup needs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    Open,
    Stat,
}

/// What a lookup of a cached name does after the entry was read.
enum Next {
    Answer(io::Result<Found>),
    /// The name's lookup failed and errors are not cached: the entry goes.
    Remove(io::Error),
}

impl Caches {
    fn lookup(&mut self, c: &OpenFileCacheUse, path: &[u8], want: Want, now: u64) -> io::Result<Found> {
        let lru = self.cache_of(c.spec.id);
        expire(lru, now, c.spec.inactive_secs);
        if let Some(e) = lru.get_mut(path) {
            match Self::reuse(e, c, path, want, now) {
                Next::Answer(found) => return found,
                Next::Remove(err) => {
                    lru.pop(path);
                    return Err(err);
                }
            }
        }
        let found = look(path, want);
        if found.is_err() && !c.errors {
            return found;
        }
        let state = match &found {
            Err(e) => State::Failed(e.raw_os_error().unwrap_or(0)),
            Ok((_, facts)) => State::Found {
                facts: *facts,
                fd: None,
            },
        };
        let mut entry = Entry {
            state,
            uses: 1,
            checked: now,
            accessed: now,
        };
        let found = found.map(|(file, facts)| (keep(&mut entry, c, file), facts));
        if lru.len() >= c.spec.max {
            lru.pop_lru();
        }
        lru.push(path.into(), entry);
        found
    }

    /// A lookup of a name that has an entry (`ngx_open_cached_file` for a found `file`).
    fn reuse(e: &mut Entry, c: &OpenFileCacheUse, path: &[u8], want: Want, now: u64) -> Next {
        e.uses += 1;
        e.accessed = now;
        let fresh = now.saturating_sub(e.checked) < c.valid_secs;
        match &e.state {
            State::Failed(errno) if fresh => return Next::Answer(Err(io::Error::from_raw_os_error(*errno))),
            State::Found { facts, fd: Some(fd) } if fresh => {
                return Next::Answer(Ok((Some(FileFd::Cached(Rc::clone(fd))), *facts)))
            }
            State::Found { facts, fd: None } if fresh && facts.is_dir => return Next::Answer(Ok((None, *facts))),
            State::Found { facts, fd: Some(fd) } => {
                // stale: one `stat` of the name tells whether the kept descriptor is still the file
                if let Ok(now_facts) = stat_path(path) {
                    if now_facts.is_file && now_facts.same_file(facts) {
                        let fd = Rc::clone(fd);
                        e.state = State::Found {
                            facts: now_facts,
                            fd: Some(Rc::clone(&fd)),
                        };
                        e.checked = now;
                        return Next::Answer(Ok((Some(FileFd::Cached(fd)), now_facts)));
                    }
                }
            }
            _ => {}
        }
        match look(path, want) {
            Ok((file, facts)) => {
                e.state = State::Found { facts, fd: None };
                e.checked = now;
                Next::Answer(Ok((keep(e, c, file), facts)))
            }
            Err(err) if c.errors => {
                e.state = State::Failed(err.raw_os_error().unwrap_or(0));
                e.checked = now;
                Next::Answer(Err(err))
            }
            Err(err) => Next::Remove(err),
        }
    }

    /// The cache of the line `id`, made empty at its first use on this thread.
    fn cache_of(&mut self, id: u64) -> &mut LineCache {
        let at = match self.by_line.iter().position(|(line, _)| *line == id) {
            Some(at) => at,
            None => {
                self.by_line.push((id, LruCache::unbounded()));
                self.by_line.len() - 1
            }
        };
        &mut self.by_line[at].1
    }
}

/// The descriptor `file` (just opened for `e`) as the request gets it: kept in the entry once the name was used
/// `min_uses` times, the request's own before.
fn keep(e: &mut Entry, c: &OpenFileCacheUse, file: Option<FileFd>) -> Option<FileFd> {
    let file = match file {
        Some(FileFd::Own(f)) if e.uses >= c.min_uses => f,
        other => return other,
    };
    let fd = Rc::new(file);
    if let State::Found { fd: kept, .. } = &mut e.state {
        *kept = Some(Rc::clone(&fd));
    }
    Some(FileFd::Cached(fd))
}

/// Drops at most two entries unused for longer than `inactive` seconds, the least recently used first.
fn expire(lru: &mut LineCache, now: u64, inactive: u64) {
    for _ in 0..2 {
        match lru.peek_lru() {
            Some((_, e)) if now.saturating_sub(e.accessed) > inactive => {
                lru.pop_lru();
            }
            _ => return,
        }
    }
}

fn look(path: &[u8], want: Want) -> io::Result<Found> {
    match want {
        Want::Open => open_and_stat(path),
        Want::Stat => stat_path(path).map(|facts| (None, facts)),
    }
}

/// Opens `path` for reading and reads its facts, with O_NONBLOCK as nginx's `ngx_open_file`: opening a FIFO must
/// not wait for a writer (it is then refused as not a regular file).
fn open_and_stat(path: &[u8]) -> io::Result<Found> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(as_path(path))?;
    let facts = fstat(&file)?;
    Ok(((!facts.is_dir).then_some(FileFd::Own(file)), facts))
}

/// `fstat(2)` of an open file, as nginx's `ngx_fd_info`: std's `File::metadata` asks `statx` for every field
/// (`STATX_ALL`, the birth time included), more than the handlers use.
fn fstat(file: &File) -> io::Result<FileFacts> {
    use std::os::fd::AsRawFd;
    let st = crate::runtime::sys::fstat(file.as_raw_fd())?;
    let kind = st.st_mode & libc::S_IFMT;
    Ok(FileFacts {
        is_dir: kind == libc::S_IFDIR,
        is_file: kind == libc::S_IFREG,
        size: u64::try_from(st.st_size).unwrap_or(0),
        mtime: st.st_mtime,
        dev: st.st_dev,
        ino: st.st_ino,
    })
}

fn stat_path(path: &[u8]) -> io::Result<FileFacts> {
    std::fs::metadata(as_path(path)).map(|m| FileFacts::of(&m))
}

fn as_path(bytes: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::files::OpenFileCacheSpec;
    use std::sync::Arc;

    /// A cache with `inactive=20s` when `max` is under 10 (the bounds test), `inactive=1000s` otherwise.
    fn cache(id: u64, max: usize, min_uses: u64, errors: bool) -> OpenFileCacheUse {
        OpenFileCacheUse {
            spec: Arc::new(OpenFileCacheSpec {
                id,
                max,
                inactive_secs: if max < 10 { 20 } else { 1000 },
            }),
            valid_secs: 60,
            min_uses,
            errors,
        }
    }

    fn dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("corelb-ofc-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn path_of(p: &Path) -> Vec<u8> {
        p.as_os_str().as_bytes().to_vec()
    }

    fn lookup(caches: &mut Caches, c: &OpenFileCacheUse, p: &[u8], now: u64) -> io::Result<Found> {
        caches.lookup(c, p, Want::Open, now)
    }

    #[test]
    fn a_kept_descriptor_serves_until_valid_passes_then_a_replaced_file_is_opened() {
        let d = dir("valid");
        let f = d.join("a.txt");
        std::fs::write(&f, b"one").unwrap();
        let (c, p, mut caches) = (cache(1, 10, 1, false), path_of(&f), Caches::default());
        let (fd, facts) = lookup(&mut caches, &c, &p, 100).unwrap();
        assert!(matches!(fd, Some(FileFd::Cached(_))));
        assert_eq!(facts.size, 3);
        // replaced (a new inode): within `valid` the cached facts and descriptor are used
        std::fs::write(d.join("b.txt"), b"second").unwrap();
        std::fs::rename(d.join("b.txt"), &f).unwrap();
        let (fd2, facts2) = lookup(&mut caches, &c, &p, 159).unwrap();
        assert_eq!(facts2.size, 3);
        let (a, b) = (fd.unwrap(), fd2.unwrap());
        assert!(matches!((&a, &b), (FileFd::Cached(x), FileFd::Cached(y)) if Rc::ptr_eq(x, y)));
        // after `valid`: looked at again, the new file
        let (fd3, facts3) = lookup(&mut caches, &c, &p, 160).unwrap();
        assert_eq!(facts3.size, 6);
        assert!(matches!(&fd3, Some(FileFd::Cached(z)) if !matches!(&a, FileFd::Cached(x) if Rc::ptr_eq(x, z))));
        // the old descriptor still reads the old file for the request that holds it
        let mut buf = [0u8; 8];
        use std::os::unix::fs::FileExt;
        assert_eq!(a.read_at(&mut buf, 0).unwrap(), 3);
        assert_eq!(&buf[..3], b"one");
        // the same file after `valid` keeps its descriptor and takes its new size
        std::fs::write(&f, b"second!").unwrap();
        let (fd4, facts4) = lookup(&mut caches, &c, &p, 221).unwrap();
        assert_eq!(facts4.size, 7);
        assert!(matches!((&fd3, &fd4), (Some(FileFd::Cached(x)), Some(FileFd::Cached(y))) if Rc::ptr_eq(x, y)));
    }

    #[test]
    fn errors_are_cached_only_under_open_file_cache_errors() {
        let d = dir("errors");
        let p = path_of(&d.join("missing"));
        let mut caches = Caches::default();
        let off = cache(2, 10, 1, false);
        assert_eq!(
            lookup(&mut caches, &off, &p, 10).unwrap_err().raw_os_error(),
            Some(libc::ENOENT)
        );
        assert_eq!(caches.cache_of(2).len(), 0);
        let on = cache(3, 10, 1, true);
        assert_eq!(
            lookup(&mut caches, &on, &p, 10).unwrap_err().raw_os_error(),
            Some(libc::ENOENT)
        );
        std::fs::write(d.join("missing"), b"x").unwrap();
        // still the cached error within `valid`, then the file
        assert_eq!(
            lookup(&mut caches, &on, &p, 69).unwrap_err().raw_os_error(),
            Some(libc::ENOENT)
        );
        assert_eq!(lookup(&mut caches, &on, &p, 70).unwrap().1.size, 1);
        // without caching errors, a file that went takes its entry with it
        assert!(lookup(&mut caches, &off, &p, 11).is_ok());
        std::fs::remove_file(d.join("missing")).unwrap();
        assert!(lookup(&mut caches, &off, &p, 200).is_err());
        assert_eq!(caches.cache_of(2).len(), 0);
    }

    #[test]
    fn min_uses_max_and_inactive_bound_the_entries() {
        let d = dir("bounds");
        let names: Vec<Vec<u8>> = (0..4)
            .map(|i| {
                let f = d.join(format!("{i}.txt"));
                std::fs::write(&f, b"x").unwrap();
                path_of(&f)
            })
            .collect();
        let mut caches = Caches::default();
        let c = cache(4, 3, 2, false);
        // the first use opens the request's own descriptor, the second keeps it
        assert!(matches!(
            lookup(&mut caches, &c, &names[0], 0).unwrap().0,
            Some(FileFd::Own(_))
        ));
        assert!(matches!(
            lookup(&mut caches, &c, &names[0], 0).unwrap().0,
            Some(FileFd::Cached(_))
        ));
        for n in &names[1..] {
            lookup(&mut caches, &c, n, 1).unwrap();
        }
        // max=3: the least recently used (0) went
        assert_eq!(caches.cache_of(4).len(), 3);
        assert!(caches.cache_of(4).peek(&names[0][..]).is_none());
        // inactive=20: two entries unused for longer go at the next lookup
        lookup(&mut caches, &c, &names[0], 30).unwrap();
        assert_eq!(caches.cache_of(4).len(), 2);
        // a directory is cached without a descriptor
        let dp = path_of(&d);
        let (fd, facts) = lookup(&mut caches, &c, &dp, 30).unwrap();
        assert!(fd.is_none() && facts.is_dir);
        assert!(caches.stat_fresh(&c, &dp, 31));
    }

    #[test]
    fn clear_empties_the_threads_caches() {
        let d = dir("clear");
        let f = d.join("a");
        std::fs::write(&f, b"a").unwrap();
        let c = cache(5, 10, 1, false);
        assert!(open(Some(&c), &path_of(&f)).is_ok());
        assert_eq!(entries(), 1);
        clear();
        assert_eq!(entries(), 0);
    }

    impl Caches {
        /// Whether a stat of `path` is answered from the entry (a directory's, fresh).
        fn stat_fresh(&mut self, c: &OpenFileCacheUse, path: &[u8], now: u64) -> bool {
            let _ = std::fs::remove_dir_all(Path::new(OsStr::from_bytes(path)));
            self.lookup(c, path, Want::Stat, now).is_ok_and(|(_, f)| f.is_dir)
        }
    }
}
