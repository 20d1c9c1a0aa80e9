//! A snapshot's stream servers: the access log set each one logs its sessions to, and their TLS towards
//! upstreams.

use super::logs::{AccessLogPlan, LogTarget};
use super::SnapshotError;
use crate::config::model::StreamServer;

/// What a stream server needs at session time beyond its config.
#[derive(Debug, Clone)]
pub struct StreamServerPlan {
    /// Index into [`AccessLogPlan::stream_sets`]; 0 = sessions are not logged.
    pub log_set: usize,
    /// `set_real_ip_from`: whose PROXY protocol header names the client.
    pub realip: Option<super::realip::RealIpPlan>,
    /// `limit_conn` (`None`: none, nothing to check per session).
    pub limits: Option<std::sync::Arc<super::limits::LimitPlan>>,
    /// The server's `error_log` lines (`None`: the main log).
    pub errors: Option<std::sync::Arc<crate::log::ErrorLogs>>,
    /// `proxy_ssl on`: what its upstream connections are opened with.
    pub upstream_tls: Option<std::sync::Arc<crate::tls::client_config::UpstreamTls>>,
}

impl StreamServerPlan {
    /// The plan of `srv`, its log files opened into `logs`.
    pub fn build(
        srv: &StreamServer,
        logs: &mut AccessLogPlan,
        zones: &super::limits::LimitZones,
    ) -> Result<StreamServerPlan, SnapshotError> {
        let no_headers = super::headers::HeadersPlan::default();
        let tokens = crate::config::headers::ServerTokens::default();
        let errors = crate::log::ErrorLogs::open(&srv.error_log).map_err(SnapshotError::ErrorLog)?;
        Ok(StreamServerPlan {
            limits: super::limits::LimitPlan::new(&srv.limits, zones, tokens, &no_headers, &errors)
                .map(std::sync::Arc::from),
            log_set: logs.stream_set_of(srv).map_err(SnapshotError::AccessLog)?,
            realip: srv.realip.as_deref().map(super::realip::RealIpPlan::new),
            errors,
            upstream_tls: None,
        })
    }

    /// The plan with the upstream TLS of `srv`, whose `proxy_pass` names `upstream` (the default `proxy_ssl_name`).
    pub fn with_tls(mut self, srv: &StreamServer, upstream: Option<&str>) -> Result<Self, SnapshotError> {
        use std::sync::Arc;
        // a server answering with `return` opens no upstream connection
        let proxies = srv.upstream.is_some() || srv.pass.is_some();
        if let Some(conf) = srv.ssl.proxy.as_ref().filter(|_| proxies) {
            let name = upstream.unwrap_or_default();
            self.upstream_tls = Some(Arc::new(crate::tls::client_config::upstream_tls(conf, name)?));
        }
        Ok(self)
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
            let (file, path) = match &l.dynamic {
                Some(d) => (usize::MAX, Some(std::sync::Arc::new(d.clone()))),
                None => (self.file_of(l)?, None),
            };
            set.push(LogTarget {
                file,
                format: std::sync::Arc::clone(&l.format),
                cond: l.cond.clone(),
                path,
            });
        }
        let same = |s: &Vec<LogTarget<_>>| {
            s.len() == set.len()
                && s.iter()
                    .zip(&set)
                    .all(|(a, b)| a.file == b.file && a.format == b.format && a.cond == b.cond && a.path == b.path)
        };
        if let Some(i) = self.stream_sets.iter().position(same) {
            return Ok(i);
        }
        self.stream_sets.push(set);
        Ok(self.stream_sets.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::{AccessLogConf, Span};
    use crate::config::stream_format::StreamFormat;
    use std::sync::Arc;
    use std::time::Duration;

    fn server(logs: Vec<AccessLogConf<StreamFormat>>) -> StreamServer {
        StreamServer {
            listens: Vec::new(),
            server_names: Vec::new(),
            upstream: Some(0),
            pass: None,
            ret: None,
            access_log: logs,
            error_log: Vec::new(),
            connect_timeout: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            next_upstream: true,
            next_upstream_tries: 0,
            upload_rate: None,
            download_rate: None,
            udp_requests: 0,
            udp_responses: None,
            half_close: false,
            realip: None,
            access: None,
            limits: Default::default(),
            proxy_protocol: false,
            proxy_protocol_timeout: std::time::Duration::from_secs(30),
            ssl: Default::default(),
            span: Span::default(),
        }
    }

    fn line(path: &std::path::Path, format: &Arc<StreamFormat>) -> AccessLogConf<StreamFormat> {
        AccessLogConf {
            path: path.to_path_buf(),
            format: Arc::clone(format),
            buffer: None,
            flush: None,
            gzip: None,
            cond: None,
            dynamic: None,
            span: Span::default(),
        }
    }

    #[test]
    fn servers_with_the_same_lines_share_a_set_and_files_are_shared_with_http() {
        let dir = std::env::temp_dir().join(format!("corelb-stream-plan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a.log"), dir.join("b.log"));
        let fmt = |s: &str| Arc::new(StreamFormat::compile("f", &[s.to_string()]).unwrap().0);
        let (status, addr) = (fmt("$status"), fmt("$remote_addr"));
        let mut plan = AccessLogPlan::default();
        let http = Arc::new(crate::config::log_format::LogFormat::combined());
        let http_line = AccessLogConf {
            path: a.clone(),
            format: http,
            buffer: None,
            flush: None,
            gzip: None,
            cond: None,
            dynamic: None,
            span: Span::default(),
        };
        assert_eq!(plan.set_of(&[http_line]).unwrap(), 1);
        let quiet = StreamServerPlan::build(&server(Vec::new()), &mut plan, &Default::default()).unwrap();
        assert_eq!(quiet.log_set, 0);
        let one = StreamServerPlan::build(&server(vec![line(&a, &status)]), &mut plan, &Default::default()).unwrap();
        let same = StreamServerPlan::build(&server(vec![line(&a, &status)]), &mut plan, &Default::default()).unwrap();
        let other = StreamServerPlan::build(
            &server(vec![line(&a, &status), line(&b, &addr)]),
            &mut plan,
            &Default::default(),
        )
        .unwrap();
        assert_eq!((one.log_set, same.log_set, other.log_set), (1, 1, 2));
        assert_eq!(plan.files.len(), 2, "a.log is opened once for http and stream");
        assert_eq!(plan.stream_sets[2][1].file, 1);
        let missing = server(vec![line(&dir.join("no/such/x.log"), &status)]);
        assert!(matches!(
            StreamServerPlan::build(&missing, &mut plan, &Default::default()),
            Err(SnapshotError::AccessLog(m)) if m.starts_with("open() \"")
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
