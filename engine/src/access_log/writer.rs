//! The process's access log writer: one thread that takes full buffers from the shards over a channel, does the
//! blocking `write(2)` on the `O_APPEND` file, and hands the emptied buffers back for reuse. Shards never block
//! on it: sending and taking a spare buffer are both non-blocking.

use crossbeam_channel::{Receiver, Sender};
use std::fs::File;
use std::io::{self, Write};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Spare buffers kept for reuse (beyond that, emptied buffers are dropped).
const SPARES: usize = 64;

enum Msg {
    Batch(Arc<File>, Vec<u8>),
    /// Answered once everything sent before it is written.
    Sync(Sender<()>),
}

/// The sending side, shared by every shard.
#[derive(Debug)]
pub struct LogWriter {
    tx: Sender<Msg>,
    spare: Receiver<Vec<u8>>,
    thread: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Msg::Batch(_, b) => write!(f, "Batch({} bytes)", b.len()),
            Msg::Sync(_) => f.write_str("Sync"),
        }
    }
}

impl LogWriter {
    /// Starts the writer thread.
    pub fn start() -> io::Result<LogWriter> {
        let (tx, rx) = crossbeam_channel::unbounded::<Msg>();
        let (spare_tx, spare) = crossbeam_channel::bounded::<Vec<u8>>(SPARES);
        let thread = std::thread::Builder::new()
            .name("corelb-access-log".into())
            .spawn(move || run(&rx, &spare_tx))?;
        Ok(LogWriter {
            tx,
            spare,
            thread: std::sync::Mutex::new(Some(thread)),
        })
    }

    /// Hands `data` over to be appended to `file`; returns an empty buffer to fill next (a reused one if any).
    pub fn send(&self, file: &Arc<File>, data: Vec<u8>, capacity: usize) -> Vec<u8> {
        let _ = self.tx.send(Msg::Batch(Arc::clone(file), data));
        self.spare.try_recv().unwrap_or_else(|_| Vec::with_capacity(capacity))
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

fn run(rx: &Receiver<Msg>, spare: &Sender<Vec<u8>>) {
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Batch(file, mut data) => {
                if let Err(e) = (&*file).write_all(&data) {
                    crate::log_alert!("write() to an access log failed ({e})");
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
}
