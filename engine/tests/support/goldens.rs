//! The golden scenarios recorded from nginx 1.22 (`tests/golden/NAME/`, see `tools/record_golden.py`), read and
//! parsed: the config text, each server address's mode, the requests and what nginx did with each.

use corelb_engine::simulate::{parse_trace, BackendMode, Backends, Timing, TraceLine};
use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// What nginx did with one request: `STATUS UPSTREAM_ADDR`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub status: u16,
    /// `$upstream_addr` split at `, `: addresses, the upstream's name ("no live upstreams"), or `-` (none asked).
    pub upstream: Vec<String>,
}

/// One recorded scenario.
#[derive(Debug, Clone)]
pub struct Golden {
    pub name: String,
    pub dir: PathBuf,
    /// `corelb.conf` as recorded (fixed ports).
    pub conf: String,
    /// `backends`: each address's mode, in file order.
    pub modes: Vec<(SocketAddr, BackendMode)>,
    /// `backends` again: each address's answer times (`head=`, `body=`).
    pub backends: Backends,
    /// `sent`, for the least_time scenarios: when each request was sent and answered (ms from the start).
    pub sent: Option<Vec<(u64, u64)>>,
    pub trace: Vec<TraceLine>,
    pub expected: Vec<Outcome>,
    /// Whether the config proxies a `stream` server (else `http`).
    pub stream: bool,
}

impl Golden {
    /// The recorded mode of `addr` (`ok` when the backends file does not list it).
    pub fn mode(&self, addr: SocketAddr) -> BackendMode {
        self.modes
            .iter()
            .find(|(a, _)| *a == addr)
            .map_or(BackendMode::Ok, |(_, m)| *m)
    }

    /// When `addr` answers, as recorded.
    pub fn timing(&self, addr: SocketAddr) -> Timing {
        self.backends.timing(addr)
    }
}

/// The directory of every recorded scenario, sorted.
pub fn dirs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut dirs: Vec<PathBuf> = fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("expected").is_file())
        .collect();
    dirs.sort();
    dirs
}

/// Every recorded scenario, parsed (a scenario that does not parse is a panic naming it).
pub fn all() -> Vec<Golden> {
    dirs()
        .iter()
        .map(|d| read(d).unwrap_or_else(|e| panic!("{}: {e}", d.display())))
        .collect()
}

fn file(dir: &Path, name: &str) -> Result<String, String> {
    fs::read_to_string(dir.join(name)).map_err(|e| format!("{name}: {e}"))
}

/// Reads one scenario directory.
pub fn read(dir: &Path) -> Result<Golden, String> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let conf = file(dir, "corelb.conf")?;
    let backends_text = file(dir, "backends")?;
    let backends = Backends::parse(&backends_text).map_err(|e| format!("backends: {e}"))?;
    let mut modes = Vec::new();
    for line in backends_text.lines().filter(|l| !l.trim().is_empty()) {
        let addr = line.split_whitespace().next().unwrap_or_default();
        let addr = addr.parse().map_err(|_| format!("backends: address {addr:?}"))?;
        modes.push((addr, backends.mode(addr)));
    }
    let sent = match fs::read_to_string(dir.join("sent")) {
        Ok(text) => Some(parse_sent(&text).map_err(|e| format!("sent: {e}"))?),
        Err(_) => None,
    };
    let trace = parse_trace(&file(dir, "requests")?).map_err(|e| format!("requests: {e}"))?;
    let expected = file(dir, "expected")?
        .lines()
        .map(|l| {
            let (status, up) = l.split_once(' ').ok_or(format!("expected: {l:?}"))?;
            Ok(Outcome {
                status: status.parse().map_err(|_| format!("expected: status {status:?}"))?,
                upstream: up.split(", ").map(str::to_string).collect(),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    if expected.len() != trace.len() {
        return Err(format!(
            "{} requests but {} expected lines",
            trace.len(),
            expected.len()
        ));
    }
    if sent.as_ref().is_some_and(|s| s.len() != trace.len()) {
        return Err("the sent file does not have a line per request".into());
    }
    let stream = conf.lines().any(|l| l.trim() == "stream {");
    Ok(Golden {
        name,
        dir: dir.to_path_buf(),
        conf,
        modes,
        backends,
        sent,
        trace,
        expected,
        stream,
    })
}

/// Parses a scenario's `sent` file: per request, `START END`, the ms from the scenario's start at which the
/// recording sent it and got its whole answer.
pub fn parse_sent(text: &str) -> Result<Vec<(u64, u64)>, String> {
    text.lines()
        .enumerate()
        .map(|(n, line)| {
            let mut w = line.split_whitespace().map(str::parse::<u64>);
            match (w.next(), w.next(), w.next()) {
                (Some(Ok(start)), Some(Ok(end)), None) if start <= end => Ok((start, end)),
                _ => Err(format!("line {}: expected \"START END\" in ms", n + 1)),
            }
        })
        .collect()
}
