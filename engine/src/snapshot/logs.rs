//! A snapshot's access logs, opened at load: the files (each once) and the sets of `access_log` lines that
//! locations log to.

use crate::config::key::Var;
use crate::config::log_format::{LogFormat, Op};
use crate::config::log_path::LogPath;
use crate::config::model::AccessLogConf;
use crate::config::stream_format::StreamFormat;
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The buffer of a log without `buffer=` (nginx writes each line at once; corelb always buffers).
pub const DEFAULT_BUFFER: usize = 64 * 1024;
/// The flush time of a log without `flush=`.
pub const DEFAULT_FLUSH: Duration = Duration::from_secs(1);

/// The answer header variables of a set's lines, in the order the lines read them (each target's `if=` first).
pub fn header_vars(set: &[LogTarget]) -> Option<Arc<[Var]>> {
    let vars: Vec<Var> = set
        .iter()
        .flat_map(|t| t.formats())
        .flat_map(|f| f.ops())
        .filter_map(|op| match op {
            Op::Var(v) if v.is_answer_header() => Some(v.clone()),
            _ => None,
        })
        .collect();
    (!vars.is_empty()).then(|| vars.into())
}

/// One open log file.
#[derive(Debug)]
pub struct LogFile {
    pub path: PathBuf,
    pub file: Arc<File>,
    pub buffer: usize,
    pub flush: Duration,
    /// `gzip=LEVEL`: each buffer is written as a gzip member.
    pub gzip: Option<u32>,
}

/// One `access_log` line of a set: the file, the format and the `if=` condition (`F`: an http or a stream format).
#[derive(Debug)]
pub struct LogTarget<F = LogFormat> {
    /// Index into [`AccessLogPlan::files`] (unused when `path` is set).
    pub file: usize,
    pub format: Arc<F>,
    pub cond: Option<Arc<F>>,
    /// A path with variables: the line goes to the file it names, opened by the writer thread.
    pub path: Option<Arc<LogPath<F>>>,
}

impl LogTarget {
    /// The formats of this line in the order a line reads their values: `if=`, the line, the path.
    pub fn formats(&self) -> impl Iterator<Item = &Arc<LogFormat>> {
        self.cond
            .iter()
            .chain(std::iter::once(&self.format))
            .chain(self.path.iter().map(|p| &p.format))
    }
}

/// A snapshot's access logs: the files (each opened once) and the sets locations log to. Set 0 is the empty one.
#[derive(Debug)]
pub struct AccessLogPlan {
    pub files: Vec<LogFile>,
    pub sets: Vec<Vec<LogTarget>>,
    /// The sets stream servers log to (see [`super::stream_logs`]); set 0 is the empty one.
    pub stream_sets: Vec<Vec<LogTarget<StreamFormat>>>,
    /// For each set, the answer header variables its lines name (see [`header_vars`]).
    pub header_vars: Vec<Option<Arc<[Var]>>>,
}

impl Default for AccessLogPlan {
    fn default() -> Self {
        AccessLogPlan {
            files: Vec::new(),
            sets: vec![Vec::new()],
            stream_sets: vec![Vec::new()],
            header_vars: vec![None],
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
            let (file, path) = match &l.dynamic {
                Some(d) => (usize::MAX, Some(Arc::new(d.clone()))),
                None => (self.file_of(l)?, None),
            };
            set.push(LogTarget {
                file,
                format: Arc::clone(&l.format),
                cond: l.cond.clone(),
                path,
            });
        }
        let same = |s: &Vec<LogTarget>| {
            s.len() == set.len()
                && s.iter()
                    .zip(&set)
                    .all(|(a, b)| a.file == b.file && a.format == b.format && a.cond == b.cond && a.path == b.path)
        };
        if let Some(i) = self.sets.iter().position(same) {
            return Ok(i);
        }
        self.header_vars.push(header_vars(&set));
        self.sets.push(set);
        Ok(self.sets.len() - 1)
    }

    /// The index of the file of `l`, opened when not seen yet.
    pub fn file_of<F>(&mut self, l: &AccessLogConf<F>) -> Result<usize, String> {
        if let Some(i) = self.files.iter().position(|f| f.path == l.path) {
            return Ok(i);
        }
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
            gzip: l.gzip,
        });
        Ok(self.files.len() - 1)
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
            gzip: None,
            cond: None,
            dynamic: None,
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
