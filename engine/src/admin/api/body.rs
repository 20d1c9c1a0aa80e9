//! The JSON body of a server change (`POST .../servers`, `PATCH .../servers/ID`), read and checked as nginx Plus
//! does: known parameters only, each of its type and range.

use super::route::Block;
use super::ApiError;
use crate::config::value;
use serde_json::{Map, Value};
use std::time::Duration;

/// The parameters a body sets; `None` for those it leaves alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerBody {
    pub server: Option<String>,
    pub weight: Option<u32>,
    pub max_conns: Option<u32>,
    pub max_fails: Option<u32>,
    pub fail_timeout: Option<Duration>,
    pub slow_start: Option<Duration>,
    pub backup: Option<bool>,
    pub down: Option<bool>,
    /// http only.
    pub drain: Option<bool>,
}

/// Why a body was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    #[error("json error")]
    Json,
    #[error("nested object or list")]
    Nested,
    #[error("unknown parameter \"{0}\"")]
    Unknown(String),
    #[error("invalid \"{0}\" value")]
    Type(&'static str),
    #[error("invalid \"{0}\"")]
    Range(&'static str),
    #[error("route is not supported by corelb")]
    Route,
}

impl BodyError {
    /// nginx Plus's status and code for this error.
    fn code(&self) -> (u16, &'static str) {
        match self {
            BodyError::Json => (415, "JsonError"),
            BodyError::Nested | BodyError::Unknown(_) | BodyError::Type(_) => (400, "UpstreamConfFormatError"),
            BodyError::Range("weight") => (400, "UpstreamBadWeight"),
            BodyError::Range("max_conns") => (400, "UpstreamBadMaxConns"),
            BodyError::Range("max_fails") => (400, "UpstreamBadMaxFails"),
            BodyError::Range("fail_timeout") => (400, "UpstreamBadFailTimeout"),
            BodyError::Range("slow_start") => (400, "UpstreamBadSlowStart"),
            BodyError::Range(_) => (400, "UpstreamConfFormatError"),
            BodyError::Route => (400, "UpstreamBadRoute"),
        }
    }
}

impl From<BodyError> for ApiError {
    fn from(e: BodyError) -> Self {
        let (status, code) = e.code();
        ApiError::new(status, code, e.to_string())
    }
}

/// Reads a server body of `block`.
pub fn parse(body: &[u8], block: Block) -> Result<ServerBody, BodyError> {
    let value: Value = serde_json::from_slice(body).map_err(|_| BodyError::Json)?;
    let Value::Object(map) = value else {
        return Err(BodyError::Json);
    };
    let mut out = ServerBody::default();
    for (name, v) in &map {
        if matches!(v, Value::Object(_) | Value::Array(_)) {
            return Err(BodyError::Nested);
        }
        set_field(&mut out, name, v, block)?;
    }
    check_read_only(&map)?;
    Ok(out)
}

fn set_field(out: &mut ServerBody, name: &str, v: &Value, block: Block) -> Result<(), BodyError> {
    match name {
        "server" => out.server = Some(string(v, "server")?.to_string()),
        "weight" => out.weight = Some(number(v, "weight").and_then(|w| nonzero(w, "weight"))?),
        "max_conns" => out.max_conns = Some(number(v, "max_conns")?),
        "max_fails" => out.max_fails = Some(number(v, "max_fails")?),
        "fail_timeout" => out.fail_timeout = Some(time(v, "fail_timeout")?),
        "slow_start" => out.slow_start = Some(time(v, "slow_start")?),
        "backup" => out.backup = Some(boolean(v, "backup")?),
        "down" => out.down = Some(boolean(v, "down")?),
        "drain" if block == Block::Http => out.drain = Some(boolean(v, "drain")?),
        "route" if block == Block::Http => {
            if !string(v, "route")?.is_empty() {
                return Err(BodyError::Route);
            }
        }
        // Read-only fields a client may send back as it got them; checked in `check_read_only`.
        "id" | "parent" | "host" | "service" => {}
        _ => return Err(BodyError::Unknown(name.to_string())),
    }
    Ok(())
}

/// `id` must be a number, `parent`/`host` strings, and `service` empty (corelb has no `service=`).
fn check_read_only(map: &Map<String, Value>) -> Result<(), BodyError> {
    if let Some(v) = map.get("id") {
        v.as_u64().ok_or(BodyError::Type("id"))?;
    }
    for name in ["parent", "host"] {
        if let Some(v) = map.get(name) {
            v.as_str().ok_or(BodyError::Type(name))?;
        }
    }
    match map.get("service") {
        Some(v) if v.as_str() != Some("") => Err(BodyError::Unknown("service".into())),
        _ => Ok(()),
    }
}

fn string<'v>(v: &'v Value, name: &'static str) -> Result<&'v str, BodyError> {
    v.as_str().ok_or(BodyError::Type(name))
}

fn boolean(v: &Value, name: &'static str) -> Result<bool, BodyError> {
    v.as_bool().ok_or(BodyError::Type(name))
}

/// A whole number within 32 bits; another number is out of range, anything else the wrong type.
fn number(v: &Value, name: &'static str) -> Result<u32, BodyError> {
    let Value::Number(n) = v else {
        return Err(BodyError::Type(name));
    };
    n.as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or(BodyError::Range(name))
}

fn nonzero(n: u32, name: &'static str) -> Result<u32, BodyError> {
    if n == 0 {
        Err(BodyError::Range(name))
    } else {
        Ok(n)
    }
}

/// nginx's time syntax (`10s`, `1m30s`, a bare number of seconds), as a string.
fn time(v: &Value, name: &'static str) -> Result<Duration, BodyError> {
    value::parse_sec(string(v, name)?).ok_or(BodyError::Range(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(s: &str) -> Result<ServerBody, BodyError> {
        parse(s.as_bytes(), Block::Http)
    }

    #[test]
    fn a_full_body_reads_every_parameter() {
        let b = http(
            r#"{"server":"127.0.0.1:8081","weight":2,"max_conns":0,"max_fails":1,"fail_timeout":"10s",
                "slow_start":"1m","backup":false,"down":false,"drain":true,"route":""}"#,
        )
        .unwrap();
        assert_eq!(
            b,
            ServerBody {
                server: Some("127.0.0.1:8081".into()),
                weight: Some(2),
                max_conns: Some(0),
                max_fails: Some(1),
                fail_timeout: Some(Duration::from_secs(10)),
                slow_start: Some(Duration::from_secs(60)),
                backup: Some(false),
                down: Some(false),
                drain: Some(true),
            }
        );
        assert_eq!(http("{}").unwrap(), ServerBody::default());
        // what GET returned may come back as it was
        let echoed = http(r#"{"id":3,"server":"127.0.0.1:1","parent":"0","host":"h","service":""}"#).unwrap();
        assert_eq!(echoed.server.as_deref(), Some("127.0.0.1:1"));
    }

    #[test]
    fn malformed_json_is_a_json_error() {
        for bad in ["", "{", "{\"weight\":}", "[1]", "\"x\"", "nul"] {
            assert_eq!(http(bad), Err(BodyError::Json), "{bad:?}");
        }
        let e: ApiError = BodyError::Json.into();
        assert_eq!((e.status, e.code), (415, "JsonError"));
    }

    #[test]
    fn wrong_types_unknown_names_and_nesting_are_format_errors() {
        assert_eq!(http(r#"{"weight":"2"}"#), Err(BodyError::Type("weight")));
        assert_eq!(http(r#"{"down":1}"#), Err(BodyError::Type("down")));
        assert_eq!(http(r#"{"fail_timeout":10}"#), Err(BodyError::Type("fail_timeout")));
        assert_eq!(http(r#"{"wieght":2}"#), Err(BodyError::Unknown("wieght".into())));
        assert_eq!(http(r#"{"weight":{"a":1}}"#), Err(BodyError::Nested));
        assert_eq!(http(r#"{"server":["a"]}"#), Err(BodyError::Nested));
        assert_eq!(http(r#"{"service":"http"}"#), Err(BodyError::Unknown("service".into())));
        assert_eq!(http(r#"{"route":"a"}"#), Err(BodyError::Route));
        let e: ApiError = BodyError::Unknown("x".into()).into();
        assert_eq!(
            (e.status, e.code, e.text.as_str()),
            (400, "UpstreamConfFormatError", "unknown parameter \"x\"")
        );
    }

    #[test]
    fn out_of_range_values_name_the_parameter() {
        assert_eq!(http(r#"{"weight":0}"#), Err(BodyError::Range("weight")));
        assert_eq!(http(r#"{"weight":-1}"#), Err(BodyError::Range("weight")));
        assert_eq!(http(r#"{"weight":1.5}"#), Err(BodyError::Range("weight")));
        assert_eq!(http(r#"{"max_conns":4294967296}"#), Err(BodyError::Range("max_conns")));
        assert_eq!(http(r#"{"max_fails":-3}"#), Err(BodyError::Range("max_fails")));
        assert_eq!(http(r#"{"fail_timeout":"ten"}"#), Err(BodyError::Range("fail_timeout")));
        assert_eq!(http(r#"{"slow_start":"-1s"}"#), Err(BodyError::Range("slow_start")));
        let e: ApiError = BodyError::Range("weight").into();
        assert_eq!(
            (e.status, e.code, e.text.as_str()),
            (400, "UpstreamBadWeight", "invalid \"weight\"")
        );
    }

    #[test]
    fn stream_servers_have_no_drain_or_route() {
        let s = |b: &str| parse(b.as_bytes(), Block::Stream);
        assert_eq!(s(r#"{"drain":true}"#), Err(BodyError::Unknown("drain".into())));
        assert_eq!(s(r#"{"route":""}"#), Err(BodyError::Unknown("route".into())));
        assert_eq!(s(r#"{"down":true}"#).unwrap().down, Some(true));
    }
}
