//! `queue N [timeout=T]` in an http upstream block (nginx Plus).

use super::arg;
use crate::config::error::ConfigError;
use crate::config::parser::Directive;
use crate::config::queue::QueueConf;
use crate::config::value;
use std::time::Duration;

/// `queue N [timeout=T]`: N from 1, T a time (default 60s).
pub(super) fn directive(d: &Directive) -> Result<QueueConf, ConfigError> {
    let invalid = |p: &str| ConfigError::invalid(format!("invalid parameter \"{p}\""), &d.span);
    let n = arg(d, 0);
    let max = value::atoi(n)
        .filter(|n| *n != 0)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| ConfigError::invalid(format!("invalid value \"{n}\" in \"queue\" directive"), &d.span))?;
    let mut timeout = Duration::from_secs(60);
    if let Some(p) = d.args.get(1) {
        let v = p.strip_prefix("timeout=").ok_or_else(|| invalid(p))?;
        timeout = value::parse_msec(v).ok_or_else(|| invalid(p))?;
    }
    Ok(QueueConf { max, timeout })
}

#[cfg(test)]
mod tests {
    use crate::config::queue::QueueConf;
    use std::path::Path;
    use std::time::Duration;

    fn queue(line: &str) -> Result<Option<QueueConf>, String> {
        let text = format!("events {{}}\nhttp {{\nupstream u {{\nserver 127.0.0.1:1 max_conns=1;\n{line}\n}}\n}}\n");
        let c = crate::config::parse_str(&text, Path::new("/t/n.conf")).map_err(|e| e.to_string())?;
        Ok(c.http.as_ref().and_then(|h| h.upstream("u")).and_then(|u| u.queue))
    }

    #[test]
    fn size_timeout_and_messages() {
        let q = |max, secs| {
            Ok(Some(QueueConf {
                max,
                timeout: Duration::from_secs(secs),
            }))
        };
        assert_eq!(queue("queue 10;"), q(10, 60));
        assert_eq!(queue("queue 2 timeout=5s;"), q(2, 5));
        assert_eq!(
            queue("queue 0;"),
            Err("[emerg] invalid value \"0\" in \"queue\" directive in /t/n.conf:5".into())
        );
        assert_eq!(
            queue("queue 1 wait=3;"),
            Err("[emerg] invalid parameter \"wait=3\" in /t/n.conf:5".into())
        );
        assert_eq!(
            queue("queue 1 2 3;"),
            Err("[emerg] invalid number of arguments in \"queue\" directive in /t/n.conf:5".into())
        );
        // as in nginx Plus, a method after `queue` replaces it
        assert_eq!(queue("queue 3; least_conn;"), Ok(None));
        assert_eq!(queue("least_conn; queue 3;").map(|q| q.map(|q| q.max)), Ok(Some(3)));
    }
}
