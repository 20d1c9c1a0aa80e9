//! Access logs (`log_format`, `access_log`): formats compiled at load, the files and per-location log sets of a
//! snapshot, and each shard's buffers. A request's line is appended to its shard's buffer for the file; a full
//! buffer (`buffer=`, 64k by default) or one older than `flush=` (1 s by default) goes to the writer thread.

pub mod answer_headers;
pub mod head_vars;
pub mod path_vars;
pub use crate::clock::texts as clock;
pub mod record;
pub mod refused;
pub mod render;
pub mod stream;
pub mod upstream_vars;
pub mod writer;

use crate::snapshot::logs::DEFAULT_BUFFER;
use crate::snapshot::Snapshot;
use clock::LogClock;
use record::RequestRecord;
use render::LineContext;
use std::fs::File;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use writer::LogWriter;

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
    /// `gzip=LEVEL`: the writer compresses each buffer as a gzip member.
    gzip: Option<u32>,
    data: Vec<u8>,
    /// When the first line still in `data` was added.
    since: Option<Instant>,
}

impl FileBuf {
    /// Hands the lines over to the writer and takes an empty buffer in exchange.
    fn hand_over(&mut self, writer: &LogWriter) {
        let full = std::mem::take(&mut self.data);
        self.data = writer.send_gzip(&self.file, full, self.buffer + 1024, self.gzip);
        self.since = None;
    }
}

/// One shard's access log state: a buffer per file, the cached times, a scratch line.
#[derive(Debug, Default)]
pub struct ShardLog {
    generation: u64,
    bufs: Vec<FileBuf>,
    clock: LogClock,
    /// The maps a line evaluates when it is written ([`crate::config::key::Var::AnswerMap`]).
    answer_vars: crate::http::var_cache::VarCache,
    line: Vec<u8>,
    /// The path and the line of a log whose path has variables, being put together.
    named_path: Vec<u8>,
    named_line: Vec<u8>,
    /// The last flush request of the process this shard has honoured.
    flushed: u64,
    /// Records of ended stream sessions, for the next ones.
    stream_records: Vec<stream::StreamRecord>,
}

impl ShardLog {
    /// Makes the buffers those of `snap`'s files (a new generation hands the old ones over first).
    fn files_of(&mut self, snap: &Snapshot, writer: &LogWriter) {
        let plan = &snap.access_logs;
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
                    gzip: f.gzip,
                    data: Vec::with_capacity(f.buffer.min(DEFAULT_BUFFER) + 1024),
                    since: None,
                })
                .collect();
        }
    }

    /// Writes the lines of `rec`'s set into this shard's buffers, handing full ones to `writer`.
    pub fn write(&mut self, snap: &Snapshot, rec: &mut RequestRecord, writer: &LogWriter) {
        let plan = &snap.access_logs;
        let Some(set) = plan.sets.get(rec.set) else {
            return;
        };
        self.files_of(snap, writer);
        let now = Instant::now();
        rec.finish_tries(now);
        self.clock.update();
        let maps = snap.config.http.as_ref().map_or(&[][..], |h| h.maps.as_slice());
        self.answer_vars.begin(maps.len());
        let cx = LineContext {
            snap,
            clock: &self.clock,
            now,
            maps,
            answer_vars: &self.answer_vars,
        };
        let mut next = render::Cursor::default();
        for t in set {
            if let Some(cond) = &t.cond {
                self.line.clear();
                render::render(cond, rec, &cx, &mut next, &mut self.line);
                if self.line.is_empty() || self.line == b"0" {
                    next.skip(&t.format);
                    if let Some(p) = &t.path {
                        next.skip(&p.format);
                    }
                    continue;
                }
            }
            if let Some(path) = &t.path {
                let (mut name, mut line) = (
                    std::mem::take(&mut self.named_path),
                    std::mem::take(&mut self.named_line),
                );
                line.clear();
                render::render(&t.format, rec, &cx, &mut next, &mut line);
                line.push(b'\n');
                name.clear();
                name.extend_from_slice(&path.lead);
                render::render(&path.format, rec, &cx, &mut next, &mut name);
                (self.named_path, self.named_line) =
                    writer.send_named(Arc::clone(path) as _, name, line, &mut rec.named_ticket);
                continue;
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
