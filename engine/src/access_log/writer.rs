//! The process's access log writer: one thread that takes full buffers from the shards over a channel, does the
//! blocking `write(2)` on the `O_APPEND` file, and hands the emptied buffers back for reuse. Shards never block
//! on it: sending and taking a spare buffer are both non-blocking. What waits in the queue is bounded: when the
//! disk falls more than [`MAX_QUEUED`] bytes behind, new buffers are dropped (and counted, and logged once per
//! episode) rather than let memory grow — nginx would stall its worker on the write instead.

use super::path_vars::NamedFiles;
use crate::config::log_path::NamedRule;
use crate::http::gzip::Encoder;
use crossbeam_channel::{Receiver, Sender};
use std::fs::File;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Spare buffers kept for reuse (beyond that, emptied buffers are dropped).
const SPARES: usize = 64;
/// The most bytes waiting for the writer before shards drop new lines.
pub const MAX_QUEUED: usize = 64 * 1024 * 1024;

/// What the shards and the writer thread share about the queue.
#[derive(Debug, Default)]
struct Backlog {
    /// Bytes sent and not yet written.
    queued: AtomicUsize,
    /// Lines dropped because the queue was full, since start.
    dropped: AtomicU64,
    /// Whether lines are being dropped now (the alert is logged once per episode).
    overflowing: AtomicBool,
    /// Lines of paths with variables sent, and written (the writer takes them in order).
    named_sent: AtomicU64,
    named_done: AtomicU64,
}

enum Msg {
    /// Lines for a file, and the gzip level they are compressed at (as one gzip member) if any.
    Batch(Arc<File>, Vec<u8>, Option<u32>),
    /// A line for the file its request named (a path with variables): the plan, the path, the line.
    Named(Arc<dyn NamedRule>, Vec<u8>, Vec<u8>),
    /// Answered once everything sent before it is written.
    Sync(Sender<()>),
}

/// The sending side, shared by every shard.
#[derive(Debug)]
pub struct LogWriter {
    tx: Sender<Msg>,
    spare: Receiver<Vec<u8>>,
    backlog: Arc<Backlog>,
    max_queued: usize,
    thread: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Msg::Batch(_, b, _) => write!(f, "Batch({} bytes)", b.len()),
            Msg::Named(_, _, b) => write!(f, "Named({} bytes)", b.len()),
            Msg::Sync(_) => f.write_str("Sync"),
        }
    }
}

impl LogWriter {
    /// Starts the writer thread.
    pub fn start() -> io::Result<LogWriter> {
        Self::start_with_limit(MAX_QUEUED)
    }

    /// Starts the writer thread, dropping new lines while more than `max_queued` bytes wait.
    pub fn start_with_limit(max_queued: usize) -> io::Result<LogWriter> {
        let (tx, rx) = crossbeam_channel::unbounded::<Msg>();
        let (spare_tx, spare) = crossbeam_channel::bounded::<Vec<u8>>(SPARES);
        let backlog = Arc::new(Backlog::default());
        let on_thread = Arc::clone(&backlog);
        let thread = std::thread::Builder::new()
            .name("corelb-access-log".into())
            .spawn(move || run(&rx, &spare_tx, &on_thread, max_queued))?;
        Ok(LogWriter {
            tx,
            spare,
            backlog,
            max_queued,
            thread: std::sync::Mutex::new(Some(thread)),
        })
    }

    /// Hands `data` over to be appended to `file`; returns an empty buffer to fill next (a reused one if any).
    /// When the writer is more than the limit behind, `data` is dropped instead (its lines counted).
    pub fn send(&self, file: &Arc<File>, data: Vec<u8>, capacity: usize) -> Vec<u8> {
        self.send_gzip(file, data, capacity, None)
    }

    /// [`LogWriter::send`], the lines written as one gzip member at `gzip` (`access_log ... gzip=LEVEL`): the
    /// writer thread compresses them, not the shard.
    pub fn send_gzip(&self, file: &Arc<File>, mut data: Vec<u8>, capacity: usize, gzip: Option<u32>) -> Vec<u8> {
        let queued = self.backlog.queued.load(Ordering::Relaxed);
        if queued.saturating_add(data.len()) > self.max_queued {
            let lines = data.iter().filter(|&&b| b == b'\n').count() as u64;
            self.backlog.dropped.fetch_add(lines, Ordering::Relaxed);
            if !self.backlog.overflowing.swap(true, Ordering::Relaxed) {
                crate::log_alert!(
                    "the access log writer is {} KiB behind: dropping lines until it catches up",
                    queued >> 10
                );
            }
            data.clear();
            return data;
        }
        self.backlog.queued.fetch_add(data.len(), Ordering::Relaxed);
        let _ = self.tx.send(Msg::Batch(Arc::clone(file), data, gzip));
        self.spare.try_recv().unwrap_or_else(|_| Vec::with_capacity(capacity))
    }

    /// Hands one `line` over to be appended to the file `path` names (a log path with variables: the writer
    /// opens it, see [`super::path_vars`]); returns two empty buffers for the next path and line. When the writer
    /// is more than the limit behind, the line is dropped instead (and counted). `ticket` is set to the line's
    /// number, for [`LogWriter::named_written`].
    pub fn send_named(
        &self,
        plan: Arc<dyn NamedRule>,
        path: Vec<u8>,
        mut line: Vec<u8>,
        ticket: &mut u64,
    ) -> (Vec<u8>, Vec<u8>) {
        let queued = self.backlog.queued.load(Ordering::Relaxed);
        if queued.saturating_add(line.len()) > self.max_queued {
            self.backlog.dropped.fetch_add(1, Ordering::Relaxed);
            line.clear();
            return (path, line);
        }
        self.backlog.queued.fetch_add(line.len(), Ordering::Relaxed);
        *ticket = self.backlog.named_sent.fetch_add(1, Ordering::Relaxed) + 1;
        let _ = self.tx.send(Msg::Named(plan, path, line));
        let spare = || self.spare.try_recv().unwrap_or_default();
        (spare(), spare())
    }

    /// Whether the line of path with variables numbered `ticket` (0: none) is written.
    pub fn named_written(&self, ticket: u64) -> bool {
        self.backlog.named_done.load(Ordering::Acquire) >= ticket
    }

    /// Lines dropped so far because the writer was too far behind.
    pub fn dropped(&self) -> u64 {
        self.backlog.dropped.load(Ordering::Relaxed)
    }

    /// Waits (at most `limit`) until everything sent so far is written; false if the writer did not answer.
    pub fn sync(&self, limit: Duration) -> bool {
        let (done_tx, done_rx) = crossbeam_channel::bounded(1);
        self.tx.send(Msg::Sync(done_tx)).is_ok() && done_rx.recv_timeout(limit).is_ok()
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        // Closing the channel ends the thread once it has written what it holds.
        let (closed, _) = crossbeam_channel::bounded(0);
        self.tx = closed;
        let thread = self.thread.lock().ok().and_then(|mut t| t.take());
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

fn run(rx: &Receiver<Msg>, spare: &Sender<Vec<u8>>, backlog: &Backlog, max_queued: usize) {
    // the compressor of gzipped logs (one, reused; made again for another level) and its output
    let mut gzip: Option<Encoder> = None;
    let mut z = Vec::new();
    let mut named = NamedFiles::default();
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Named(plan, mut path, mut line) => {
                named.write(&plan, &path, &line, std::time::Instant::now());
                backlog.queued.fetch_sub(line.len(), Ordering::Relaxed);
                backlog.named_done.fetch_add(1, Ordering::Release);
                path.clear();
                line.clear();
                let _ = spare.try_send(path);
                let _ = spare.try_send(line);
            }
            Msg::Batch(file, mut data, level) => {
                let out = match level {
                    None => &data,
                    Some(level) => {
                        let enc = match &mut gzip {
                            Some(e) if e.level() == level => e,
                            slot => slot.insert(Encoder::new(level)),
                        };
                        enc.reset();
                        z.clear();
                        enc.write(&data, &mut z);
                        enc.finish(&mut z);
                        &z
                    }
                };
                if let Err(e) = (&*file).write_all(out) {
                    crate::log_alert!("write() to an access log failed ({e})");
                }
                let left = backlog.queued.fetch_sub(data.len(), Ordering::Relaxed) - data.len();
                if left < max_queued / 2 && backlog.overflowing.swap(false, Ordering::Relaxed) {
                    let dropped = backlog.dropped.load(Ordering::Relaxed);
                    crate::log_notice!("the access log writer caught up ({dropped} lines dropped since start)");
                }
                data.clear();
                let _ = spare.try_send(data);
            }
            Msg::Sync(done) => {
                let _ = done.send(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_in_order_and_gives_buffers_back() {
        let path = std::env::temp_dir().join(format!("corelb-writer-{}.log", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let file = Arc::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .unwrap(),
        );
        let w = LogWriter::start().unwrap();
        let next = w.send(&file, b"one\n".to_vec(), 16);
        assert!(next.is_empty() && next.capacity() >= 16);
        let _ = w.send(&file, b"two\n".to_vec(), 16);
        assert!(w.sync(Duration::from_secs(5)));
        assert_eq!(std::fs::read(&path).unwrap(), b"one\ntwo\n");
        let reused = w.send(&file, b"three\n".to_vec(), 16);
        assert!(reused.is_empty());
        drop(w);
        assert_eq!(
            std::fs::read(&path).unwrap(),
            b"one\ntwo\nthree\n",
            "dropping the writer drains it"
        );
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn gzipped_batches_are_gzip_members_appended() {
        use std::io::Read;
        let path = std::env::temp_dir().join(format!("corelb-writer-gz-{}.log", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let file = Arc::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .unwrap(),
        );
        let w = LogWriter::start().unwrap();
        let _ = w.send_gzip(&file, b"one\n".to_vec(), 16, Some(1));
        let _ = w.send_gzip(&file, b"two\nthree\n".to_vec(), 16, Some(9));
        assert!(w.sync(Duration::from_secs(5)));
        let raw = std::fs::read(&path).unwrap();
        assert_eq!(&raw[..2], &[0x1f, 0x8b]);
        let members = raw
            .windows(10)
            .filter(|w| w[..4] == [0x1f, 0x8b, 8, 0] && w[9] == 3)
            .count();
        assert_eq!(members, 2, "one member per buffer");
        let mut text = String::new();
        flate2::read::MultiGzDecoder::new(&raw[..])
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "one\ntwo\nthree\n");
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_writer_too_far_behind_drops_lines_instead_of_growing() {
        use std::io::Read;
        use std::os::unix::io::FromRawFd;
        let mut fds = [0; 2];
        // SAFETY: pipe fills two descriptors, each then owned by exactly one File.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: the two descriptors pipe() just opened, nothing else owns them.
        let (mut reader, writer) = unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
        let file = Arc::new(writer);
        // Nobody reads the pipe yet: the writer blocks once the pipe (64 KiB) is full, and the queue fills.
        let w = LogWriter::start_with_limit(256 * 1024).unwrap();
        let batch = |n: usize| {
            vec![b'x'; 1023]
                .into_iter()
                .chain([b'\n'])
                .cycle()
                .take(n * 1024)
                .collect::<Vec<u8>>()
        };
        let mut sent_lines = 0u64;
        for _ in 0..40 {
            let _ = w.send(&file, batch(32), 32 * 1024);
            sent_lines += 32;
        }
        let dropped = w.dropped();
        assert!(dropped > 0 && dropped < sent_lines, "{dropped} of {sent_lines} dropped");
        assert_eq!(dropped % 32, 0, "whole buffers are dropped");
        let reading = std::thread::spawn(move || {
            let mut all = Vec::new();
            let _ = reader.read_to_end(&mut all);
            all
        });
        assert!(w.sync(Duration::from_secs(10)));
        drop(w);
        drop(file);
        let written = reading.join().unwrap();
        assert_eq!(
            written.iter().filter(|&&b| b == b'\n').count() as u64,
            sent_lines - dropped,
            "every line not dropped is written"
        );
    }
}
