//! Access logs (`log_format`, `access_log`): formats compiled at load, the files and per-location log sets of a
//! snapshot, and each shard's buffers. A request's line is appended to its shard's buffer for the file; a full
//! buffer (`buffer=`, 64k by default) or one older than `flush=` (1 s by default) goes to the writer thread.

pub mod clock;
pub mod format;
pub mod record;
pub mod render;
pub mod writer;

use crate::config::model::AccessLogConf;
use crate::http::request::RequestHead;
use crate::http::BodyFraming;
use crate::proxy::route::LocationPlan;
use crate::proxy::vars::{ConnVars, RequestVars};
use crate::snapshot::{ServerPlan, Snapshot};
use clock::LogClock;
use format::LogFormat;
use record::RequestRecord;
use render::LineContext;
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use writer::LogWriter;

/// The buffer of a log without `buffer=` (nginx writes each line at once; corelb always buffers).
pub const DEFAULT_BUFFER: usize = 64 * 1024;
/// The flush time of a log without `flush=`.
pub const DEFAULT_FLUSH: Duration = Duration::from_secs(1);

/// One open log file.
#[derive(Debug)]
pub struct LogFile {
    pub path: PathBuf,
    pub file: Arc<File>,
    pub buffer: usize,
    pub flush: Duration,
}

/// One `access_log` line of a set: the file, the format and the `if=` condition.
#[derive(Debug)]
pub struct LogTarget {
    /// Index into [`AccessLogPlan::files`].
    pub file: usize,
    pub format: Arc<LogFormat>,
    pub cond: Option<Arc<LogFormat>>,
}

/// A snapshot's access logs: the files (each opened once) and the sets locations log to. Set 0 is the empty one.
#[derive(Debug)]
pub struct AccessLogPlan {
    pub files: Vec<LogFile>,
    pub sets: Vec<Vec<LogTarget>>,
}

impl Default for AccessLogPlan {
    fn default() -> Self {
        AccessLogPlan {
            files: Vec::new(),
            sets: vec![Vec::new()],
        }
    }
}

impl AccessLogPlan {
    /// The set index of a level's `access_log` lines, opening files not seen yet (0 for none).
    pub fn set_of(&mut self, logs: &[AccessLogConf]) -> Result<usize, String> {
        if logs.is_empty() {
            return Ok(0);
        }
        let mut set = Vec::with_capacity(logs.len());
        for l in logs {
            let file = match self.files.iter().position(|f| f.path == l.path) {
                Some(i) => i,
                None => {
                    let file = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&l.path)
                        .map_err(|e| format!("open() \"{}\" failed ({e})", l.path.display()))?;
                    self.files.push(LogFile {
                        path: l.path.clone(),
                        file: Arc::new(file),
                        buffer: l.buffer.unwrap_or(DEFAULT_BUFFER),
                        flush: l.flush.unwrap_or(DEFAULT_FLUSH),
                    });
                    self.files.len() - 1
                }
            };
            set.push(LogTarget {
                file,
                format: Arc::clone(&l.format),
                cond: l.cond.clone(),
            });
        }
        let same = |s: &Vec<LogTarget>| {
            s.len() == set.len()
                && s.iter()
                    .zip(&set)
                    .all(|(a, b)| a.file == b.file && a.format == b.format && a.cond == b.cond)
        };
        if let Some(i) = self.sets.iter().position(same) {
            return Ok(i);
        }
        self.sets.push(set);
        Ok(self.sets.len() - 1)
    }

    /// Whether any request is logged.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Opens every file again by its path (SIGUSR1, after a log rotation) and puts the new file behind the old
    /// descriptor (`dup2`), so every holder of the `Arc<File>` (shard buffers, the writer) writes to the new file
    /// from its next write on. Returns the files that could not be reopened, with why (they keep the old file).
    pub fn reopen(&self) -> Vec<(PathBuf, std::io::Error)> {
        use std::os::unix::io::AsRawFd;
        let mut failed = Vec::new();
        for f in &self.files {
            let fresh = std::fs::OpenOptions::new().create(true).append(true).open(&f.path);
            // SAFETY: both descriptors are open; dup2 atomically makes the old number name the new file.
            let moved = fresh.and_then(|new| match unsafe { libc::dup2(new.as_raw_fd(), f.file.as_raw_fd()) } {
                -1 => Err(std::io::Error::last_os_error()),
                _ => Ok(()),
            });
            if let Err(e) = moved {
                failed.push((f.path.clone(), e));
            }
        }
        failed
    }
}

/// Starts the record of a routed request (`requests`: its number on the connection) and, when its location logs,
/// captures the values only the head has (`uri`: the normalized path).
#[allow(clippy::too_many_arguments)]
pub fn begin_request(
    snap: &Snapshot,
    server: &ServerPlan,
    loc: Option<&LocationPlan>,
    head: &RequestHead<'_, '_>,
    uri: &[u8],
    conn: ConnVars,
    requests: u64,
    rec: &mut RequestRecord,
) {
    let set = loc.map_or(server.log_set, |l| l.log_set);
    let body = match head.body {
        BodyFraming::Length(n) => n,
        _ => 0,
    };
    rec.begin(set, requests, head.head_len as u64 + body);
    if set == 0 {
        return;
    }
    let Some(targets) = snap.access_logs.sets.get(set) else {
        return;
    };
    let proxy_host = loc
        .and_then(|l| l.proxy.as_ref())
        .and_then(|p| snap.http_plans.get(p.upstream))
        .map_or("", |u| u.name.as_str());
    let vars = RequestVars {
        req: head,
        uri,
        conn,
        proxy_host,
    };
    let view = render::RequestView {
        vars: &vars,
        server_name: server.names.first().map_or("", String::as_str),
    };
    render::capture(targets, &view, rec);
}

/// The process's side: the writer thread, and the flushes of the shards' buffers it asks for (a fast stop).
#[derive(Debug)]
pub struct ProcessLogs {
    pub writer: LogWriter,
    asked: AtomicU64,
    done: AtomicUsize,
}

impl ProcessLogs {
    /// Starts the writer thread. It starts even when the first config logs nothing, so that a reload can add an
    /// `access_log` (an idle writer only waits on its channel).
    pub fn start() -> Option<ProcessLogs> {
        let writer = LogWriter::start()
            .map_err(|e| crate::log_alert!("could not start the access log writer ({e}): access logs are off"))
            .ok()?;
        Some(ProcessLogs {
            writer,
            asked: AtomicU64::new(0),
            done: AtomicUsize::new(0),
        })
    }

    /// Waits (at most `limit`) until the lines handed over are on disk; with `running` shards, first makes each
    /// of them hand over its buffers at its next tick. Returns whether all was done in time.
    pub fn flush(&self, limit: Duration, running: Option<usize>) -> bool {
        let deadline = Instant::now() + limit;
        if let Some(shards) = running {
            self.done.store(0, Ordering::Relaxed);
            self.asked.fetch_add(1, Ordering::Release);
            while self.done.load(Ordering::Acquire) < shards && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        self.writer.sync(deadline.saturating_duration_since(Instant::now()))
    }
}

/// A buffer being filled for one file.
#[derive(Debug)]
struct FileBuf {
    file: Arc<File>,
    buffer: usize,
    flush: Duration,
    data: Vec<u8>,
    /// When the first line still in `data` was added.
    since: Option<Instant>,
}

impl FileBuf {
    /// Hands the lines over to the writer and takes an empty buffer in exchange.
    fn hand_over(&mut self, writer: &LogWriter) {
        let full = std::mem::take(&mut self.data);
        self.data = writer.send(&self.file, full, self.buffer + 1024);
        self.since = None;
    }
}

/// One shard's access log state: a buffer per file, the cached times, a scratch line.
#[derive(Debug, Default)]
pub struct ShardLog {
    generation: u64,
    bufs: Vec<FileBuf>,
    clock: LogClock,
    line: Vec<u8>,
    /// The last flush request of the process this shard has honoured.
    flushed: u64,
}

impl ShardLog {
    /// Writes the lines of `rec`'s set into this shard's buffers, handing full ones to `writer`.
    pub fn write(&mut self, snap: &Snapshot, rec: &mut RequestRecord, writer: &LogWriter) {
        let plan = &snap.access_logs;
        let Some(set) = plan.sets.get(rec.set) else {
            return;
        };
        if self.generation != snap.generation || self.bufs.len() != plan.files.len() {
            self.flush(None, writer);
            self.generation = snap.generation;
            self.bufs = plan
                .files
                .iter()
                .map(|f| FileBuf {
                    file: Arc::clone(&f.file),
                    buffer: f.buffer,
                    flush: f.flush,
                    data: Vec::with_capacity(f.buffer.min(DEFAULT_BUFFER) + 1024),
                    since: None,
                })
                .collect();
        }
        let now = Instant::now();
        rec.finish_tries(now);
        self.clock.update();
        let cx = LineContext {
            snap,
            clock: &self.clock,
            now,
        };
        let mut next = 0;
        for t in set {
            if let Some(cond) = &t.cond {
                self.line.clear();
                render::render(cond, rec, &cx, &mut next, &mut self.line);
                if self.line.is_empty() || self.line == b"0" {
                    next += t.format.ops().iter().filter(|o| is_request_var(o)).count();
                    continue;
                }
            }
            let Some(buf) = self.bufs.get_mut(t.file) else {
                continue;
            };
            render::render(&t.format, rec, &cx, &mut next, &mut buf.data);
            buf.data.push(b'\n');
            buf.since.get_or_insert(now);
            if buf.data.len() >= buf.buffer {
                buf.hand_over(writer);
            }
        }
    }

    /// A shard tick: hands over the buffers past their `flush` time, or all of them when the process asked (or
    /// `all`, when the shard ends).
    pub fn tick(&mut self, logs: &ProcessLogs, all: bool) {
        let asked = logs.asked.load(Ordering::Acquire);
        if !all && asked == self.flushed {
            self.flush(Some(Instant::now()), &logs.writer);
            return;
        }
        self.flush(None, &logs.writer);
        if asked != self.flushed {
            self.flushed = asked;
            logs.done.fetch_add(1, Ordering::Release);
        }
    }

    /// Hands over every buffer whose first line is older than its file's `flush` time at `now`, or every non-empty
    /// buffer when `now` is `None` (a stop, or a flush the process asked for).
    pub fn flush(&mut self, now: Option<Instant>, writer: &LogWriter) {
        for buf in &mut self.bufs {
            let due = match (buf.since, now) {
                (None, _) => false,
                (Some(_), None) => true,
                (Some(since), Some(at)) => at.saturating_duration_since(since) >= buf.flush,
            };
            if due {
                buf.hand_over(writer);
            }
        }
    }
}

fn is_request_var(op: &format::Op) -> bool {
    matches!(op, format::Op::Var(v) if v.from_request())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::Span;
    use std::path::Path;

    fn conf(path: &Path, format: &Arc<LogFormat>, buffer: Option<usize>) -> AccessLogConf {
        AccessLogConf {
            path: path.to_path_buf(),
            format: Arc::clone(format),
            buffer,
            flush: None,
            cond: None,
            span: Span::default(),
        }
    }

    #[test]
    fn sets_and_files_are_shared() {
        let dir = std::env::temp_dir().join(format!("corelb-log-plan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let combined = Arc::new(LogFormat::combined());
        let other = Arc::new(LogFormat::compile("s", &["$status".to_string()]).unwrap());
        let (a, b) = (dir.join("a.log"), dir.join("b.log"));
        let mut plan = AccessLogPlan::default();
        assert_eq!(plan.set_of(&[]).unwrap(), 0);
        assert!(plan.is_empty());
        let first = plan
            .set_of(&[conf(&a, &combined, None), conf(&b, &other, Some(4096))])
            .unwrap();
        assert_eq!(first, 1);
        assert_eq!(
            plan.set_of(&[conf(&a, &combined, None), conf(&b, &other, Some(4096))])
                .unwrap(),
            1
        );
        assert_eq!(plan.set_of(&[conf(&b, &combined, Some(4096))]).unwrap(), 2);
        assert_eq!(plan.files.len(), 2, "one open file per path");
        assert_eq!(
            (plan.files[0].buffer, plan.files[0].flush),
            (DEFAULT_BUFFER, DEFAULT_FLUSH)
        );
        assert_eq!(plan.files[1].buffer, 4096);
        let missing = dir.join("no/such/dir/x.log");
        let err = plan.set_of(&[conf(&missing, &combined, None)]).unwrap_err();
        assert!(
            err.starts_with(&format!("open() \"{}\" failed (", missing.display())),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
