//! A snapshot's stream servers: the access log set each one logs its sessions to.

use super::logs::{AccessLogPlan, LogTarget};
use super::SnapshotError;
use crate::config::model::StreamServer;

/// What a stream server needs at session time beyond its config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamServerPlan {
    /// Index into [`AccessLogPlan::stream_sets`]; 0 = sessions are not logged.
    pub log_set: usize,
}

impl StreamServerPlan {
    /// The plan of `srv`, its log files opened into `logs`.
    pub fn build(srv: &StreamServer, logs: &mut AccessLogPlan) -> Result<StreamServerPlan, SnapshotError> {
        Ok(StreamServerPlan {
            log_set: logs.stream_set_of(srv).map_err(SnapshotError::AccessLog)?,
        })
    }
}

impl AccessLogPlan {
    /// The stream set of a server's `access_log` lines, opening files not seen yet (0 for none).
    fn stream_set_of(&mut self, srv: &StreamServer) -> Result<usize, String> {
        if srv.access_log.is_empty() {
            return Ok(0);
        }
        let mut set = Vec::with_capacity(srv.access_log.len());
        for l in &srv.access_log {
            set.push(LogTarget {
                file: self.file_of(l)?,
                format: std::sync::Arc::clone(&l.format),
                cond: l.cond.clone(),
            });
        }
        let same = |s: &Vec<LogTarget<_>>| {
            s.len() == set.len()
                && s.iter()
                    .zip(&set)
                    .all(|(a, b)| a.file == b.file && a.format == b.format && a.cond == b.cond)
        };
        if let Some(i) = self.stream_sets.iter().position(same) {
            return Ok(i);
        }
        self.stream_sets.push(set);
        Ok(self.stream_sets.len() - 1)
    }
}
