//! corelb's agent settings in an upstream block: the `server` parameters `agent_port=`, `agent_inter=` and
//! `agent_send=`, and the `load_weight` and `endpoint_load_metrics` directives.

use super::{arg, directive_err};
use crate::config::agent::{AgentConf, LoadFormula, LoadMetricsConf, DEFAULT_INTER};
use crate::config::error::ConfigError;
use crate::config::model::Span;
use crate::config::parser::Directive;
use crate::config::value;
use std::time::Duration;

/// The agent parameters of one `server` line, as read so far.
#[derive(Debug, Default)]
pub(super) struct AgentParams {
    port: Option<u16>,
    inter: Option<Duration>,
    send: Option<String>,
    /// The first `agent_inter=`/`agent_send=` word, for the message when `agent_port=` is missing.
    first: Option<String>,
}

impl AgentParams {
    /// Reads `p` if it is an agent parameter: `None` when it is not one, else whether it is valid.
    pub(super) fn read(&mut self, p: &str, at: &Span) -> Option<Result<(), ConfigError>> {
        let invalid = || Some(Err(ConfigError::invalid(format!("invalid parameter \"{p}\""), at)));
        if let Some(v) = p.strip_prefix("agent_port=") {
            let port = value::atoi(v).filter(|n| (1..=65535).contains(n));
            let Some(port) = port.and_then(|n| u16::try_from(n).ok()) else {
                return invalid();
            };
            self.port = Some(port);
        } else if let Some(v) = p.strip_prefix("agent_inter=") {
            let Some(t) = value::parse_msec(v).filter(|t| !t.is_zero()) else {
                return invalid();
            };
            self.inter = Some(t);
            self.first.get_or_insert_with(|| p.to_string());
        } else if let Some(v) = p.strip_prefix("agent_send=") {
            if v.is_empty() {
                return invalid();
            }
            self.send = Some(v.to_string());
            self.first.get_or_insert_with(|| p.to_string());
        } else {
            return None;
        }
        Some(Ok(()))
    }

    /// The line's agent check (`None` without `agent_port=`, which the other two need).
    pub(super) fn finish(self, at: &Span) -> Result<Option<AgentConf>, ConfigError> {
        let Some(port) = self.port else {
            return match self.first {
                Some(p) => Err(ConfigError::invalid(format!("\"{p}\" requires \"agent_port=\""), at)),
                None => Ok(None),
            };
        };
        Ok(Some(AgentConf {
            port,
            inter: self.inter.unwrap_or(DEFAULT_INTER),
            send: self.send,
        }))
    }
}

/// A formula coefficient: a plain non-negative decimal number.
fn coefficient(v: &str) -> Option<f64> {
    let plain = !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    let x: f64 = v.parse().ok().filter(|_| plain)?;
    x.is_finite().then_some(x)
}

/// `load_weight [cpu=A] [mem=B] [base=C] [scale=K]`: each left out keeps the default's; `base` and `scale` above 0.
pub(super) fn load_weight(d: &Directive) -> Result<LoadFormula, ConfigError> {
    let mut f = LoadFormula::default();
    for p in &d.args {
        let invalid = || ConfigError::invalid(format!("invalid parameter \"{p}\""), &d.span);
        let (name, v) = p.split_once('=').ok_or_else(invalid)?;
        let x = coefficient(v).ok_or_else(invalid)?;
        match name {
            "cpu" => f.cpu = x,
            "mem" => f.mem = x,
            "base" if x > 0.0 => f.base = x,
            "scale" if x > 0.0 => f.scale = x,
            _ => return Err(invalid()),
        }
    }
    Ok(f)
}

/// `endpoint_load_metrics on|off [interval=TIME]` (interval default 2s).
pub(super) fn load_metrics(d: &Directive) -> Result<Option<LoadMetricsConf>, ConfigError> {
    let on = match arg(d, 0) {
        "on" => true,
        "off" => false,
        v => {
            let msg = format!(
                "invalid value \"{v}\" in \"{}\" directive, it must be \"on\" or \"off\"",
                d.name
            );
            return Err(ConfigError::invalid(msg, &d.span));
        }
    };
    let mut interval = DEFAULT_INTER;
    if let Some(p) = d.args.get(1) {
        let invalid = || ConfigError::invalid(format!("invalid parameter \"{p}\""), &d.span);
        let v = p.strip_prefix("interval=").ok_or_else(invalid)?;
        interval = value::parse_msec(v).filter(|t| !t.is_zero()).ok_or_else(invalid)?;
        if !on {
            return Err(directive_err(d, "takes no parameter when \"off\""));
        }
    }
    Ok(on.then_some(LoadMetricsConf { interval }))
}

#[cfg(test)]
mod tests {
    use crate::config::agent::{AgentConf, LoadFormula, LoadMetricsConf};
    use crate::config::model::UpstreamConf;
    use std::path::Path;
    use std::time::Duration;

    fn upstream(block: &str, inner: &str) -> Result<UpstreamConf, String> {
        let text = format!("events {{}}\n{block} {{\nupstream u {{\n{inner}\n}}\n}}\n");
        let c = crate::config::parse_str(&text, Path::new("/t/n.conf")).map_err(|e| e.to_string())?;
        let ups = match block {
            "http" => c.http.map(|h| h.upstreams),
            _ => c.stream.map(|s| s.upstreams),
        };
        ups.into_iter()
            .flatten()
            .find(|u| u.name == "u")
            .ok_or_else(|| "no upstream".into())
    }

    #[test]
    fn server_agent_parameters() {
        let u = upstream(
            "http",
            "server 127.0.0.1:1 agent_port=9 agent_inter=500ms agent_send=ping;\nserver 127.0.0.1:2 agent_port=10;\nserver 127.0.0.1:3;",
        )
        .unwrap();
        let agents: Vec<_> = u.servers.iter().map(|s| s.agent.clone()).collect();
        assert_eq!(
            agents,
            [
                Some(AgentConf {
                    port: 9,
                    inter: Duration::from_millis(500),
                    send: Some("ping".into())
                }),
                Some(AgentConf {
                    port: 10,
                    inter: Duration::from_secs(2),
                    send: None
                }),
                None
            ]
        );
        let s = upstream("stream", "server 127.0.0.1:1 agent_port=9;").unwrap();
        assert_eq!(s.servers[0].agent.as_ref().map(|a| a.port), Some(9));
        let err = |p: &str| upstream("http", &format!("server 127.0.0.1:1 {p};")).unwrap_err();
        assert_eq!(
            err("agent_port=0"),
            "[emerg] invalid parameter \"agent_port=0\" in /t/n.conf:4"
        );
        assert_eq!(
            err("agent_port=65536"),
            "[emerg] invalid parameter \"agent_port=65536\" in /t/n.conf:4"
        );
        assert_eq!(
            err("agent_port=9 agent_inter=0"),
            "[emerg] invalid parameter \"agent_inter=0\" in /t/n.conf:4"
        );
        assert_eq!(
            err("agent_send=x"),
            "[emerg] \"agent_send=x\" requires \"agent_port=\" in /t/n.conf:4"
        );
    }

    #[test]
    fn load_weight_and_endpoint_load_metrics() {
        let u = upstream("http", "server 127.0.0.1:1;").unwrap();
        assert_eq!((u.load_weight, u.load_metrics), (LoadFormula::default(), None));
        let u = upstream(
            "http",
            "server 127.0.0.1:1;\nload_weight cpu=1 base=0.5 scale=100;\nendpoint_load_metrics on interval=1s;",
        )
        .unwrap();
        assert_eq!(
            u.load_weight,
            LoadFormula {
                cpu: 1.0,
                mem: 0.4,
                base: 0.5,
                scale: 100.0
            }
        );
        assert_eq!(
            u.load_metrics,
            Some(LoadMetricsConf {
                interval: Duration::from_secs(1)
            })
        );
        let err = |l: &str| upstream("http", &format!("server 127.0.0.1:1;\n{l}")).unwrap_err();
        assert_eq!(
            err("load_weight base=0;"),
            "[emerg] invalid parameter \"base=0\" in /t/n.conf:5"
        );
        assert_eq!(
            err("load_weight cpu=-1;"),
            "[emerg] invalid parameter \"cpu=-1\" in /t/n.conf:5"
        );
        assert_eq!(
            err("load_weight io=1;"),
            "[emerg] invalid parameter \"io=1\" in /t/n.conf:5"
        );
        assert_eq!(
            err("endpoint_load_metrics yes;"),
            "[emerg] invalid value \"yes\" in \"endpoint_load_metrics\" directive, it must be \"on\" or \"off\" in /t/n.conf:5"
        );
        assert_eq!(
            err("load_weight cpu=1;\nload_weight mem=1;"),
            "[emerg] \"load_weight\" directive is duplicate in /t/n.conf:6"
        );
        assert!(upstream("stream", "server 127.0.0.1:1;\nendpoint_load_metrics on;")
            .unwrap_err()
            .contains("\"endpoint_load_metrics\" directive is not allowed here"));
    }
}
