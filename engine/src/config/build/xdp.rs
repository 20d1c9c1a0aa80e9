//! `listen ADDR:PORT xdp=DEVICE [mode=dr|nat] [udp]` (corelb's): a stream server whose VIP the XDP data path serves,
//! over its upstream's servers. Refused by name where the build, the device, the method or the servers cannot do
//! it: the program missing from the build, IPv6, a method other than round robin, `ip_hash`, `hash $remote_addr`,
//! Maglev and `least_conn`, a direct-return server on another port than the VIP's, and directives the kernel path has no use
//! for.

use super::arg;
use crate::config::error::ConfigError;
use crate::config::model::{Method, Span, UpstreamConf, XdpMode, XdpScheduler, XdpVip};
use crate::config::parser::{Block, Directive};
use std::net::{SocketAddr, SocketAddrV4};
use std::time::Duration;

/// A server's `listen ... xdp=` line as read.
#[derive(Debug)]
pub struct XdpListen {
    addr: SocketAddrV4,
    device: String,
    mode: XdpMode,
    udp: bool,
    span: Span,
}

/// The directives a server with an XDP `listen` may hold: the kernel path uses nothing else.
const SERVER_DIRECTIVES: &[&str] = &["listen", "proxy_pass", "proxy_timeout", "health_check"];

/// Whether `d` (a `listen`) names an XDP device.
pub fn is_xdp(d: &Directive) -> bool {
    d.args.iter().skip(1).any(|a| a.starts_with("xdp="))
}

/// Whether the server block `b` has an XDP `listen`; then refuses the directives the kernel path cannot honour.
pub fn check_server(b: &Block) -> Result<bool, ConfigError> {
    if !b.items.iter().any(|d| d.name == "listen" && is_xdp(d)) {
        return Ok(false);
    }
    if let Some(d) = b.items.iter().find(|d| !SERVER_DIRECTIVES.contains(&d.name.as_str())) {
        let msg = format!(
            "\"{}\" in a server with \"listen ... xdp=\" is not supported by corelb",
            d.name
        );
        return Err(ConfigError::invalid(msg, &d.span));
    }
    if let Some(d) = b.items.iter().find(|d| d.name == "listen" && !is_xdp(d)) {
        let msg = "a server with \"listen ... xdp=\" cannot also listen on a socket";
        return Err(ConfigError::invalid(msg, &d.span));
    }
    Ok(true)
}

/// Reads `listen ADDR:PORT xdp=DEVICE [mode=dr|nat] [udp]`.
pub fn listen(d: &Directive) -> Result<XdpListen, ConfigError> {
    if let Some(why) = corelb_xdp::missing() {
        return Err(ConfigError::invalid(
            format!("\"xdp=\" needs corelb's XDP program, which this build does not have: {why}"),
            &d.span,
        ));
    }
    let text = arg(d, 0);
    let addr = match text.parse::<SocketAddr>() {
        Ok(SocketAddr::V4(a)) if a.port() != 0 && !a.ip().is_unspecified() => a,
        _ => {
            let msg = format!("\"xdp=\" needs an IPv4 address and a port, not \"{text}\", in \"listen\"");
            return Err(ConfigError::invalid(msg, &d.span));
        }
    };
    let (mut device, mut mode, mut udp) = (None, XdpMode::Dr, false);
    for p in d.args.iter().skip(1) {
        if let Some(dev) = p.strip_prefix("xdp=") {
            device = Some(dev.to_string());
        } else if p == "mode=dr" {
            mode = XdpMode::Dr;
        } else if p == "mode=nat" {
            mode = XdpMode::Nat;
        } else if p == "mode=tun" {
            let msg = "\"mode=tun\" is not supported by corelb (it needs IPIP or GUE encapsulation)";
            return Err(ConfigError::invalid(msg, &d.span));
        } else if p == "udp" {
            udp = true;
        } else {
            let msg = format!("the \"{p}\" parameter is not supported with \"xdp=\" by corelb");
            return Err(ConfigError::invalid(msg, &d.span));
        }
    }
    let device = device.unwrap_or_default();
    if corelb_xdp::device::index(&device).is_none() {
        return Err(ConfigError::invalid(
            format!("no device \"{device}\" for \"xdp=\""),
            &d.span,
        ));
    }
    Ok(XdpListen {
        addr,
        device,
        mode,
        udp,
        span: d.span.clone(),
    })
}

/// Refuses `user` (another account than root) beside XDP VIPs: the control thread writes the program's maps and
/// attaches it to devices for the life of the process, which needs root's capabilities (CAP_BPF, CAP_NET_ADMIN)
/// that the switch to the account would drop.
pub fn check_user(vips: &[XdpVip], user: Option<&crate::config::model::ProcessUser>) -> Result<(), ConfigError> {
    match (vips.first(), user) {
        (Some(v), Some(u)) if u.uid != 0 => Err(ConfigError::invalid(
            format!(
                "\"user {}\" with \"listen ... xdp=\" is not supported by corelb (the XDP maps need root's capabilities \
                 while the process runs)",
                u.name
            ),
            &v.span,
        )),
        _ => Ok(()),
    }
}

/// The VIP of `l` over `upstream` (number `index`), once the upstream is read: its method as a scheduler, its
/// servers checked.
pub fn vip(l: XdpListen, (index, upstream): (usize, &UpstreamConf), timeout: Duration) -> Result<XdpVip, ConfigError> {
    let refuse = |msg: String| Err(ConfigError::invalid(msg, &l.span));
    let key_is = |raw: &str, want: &str| raw.replace(['{', '}'], "") == want;
    let scheduler = match &upstream.method {
        Method::RoundRobin => XdpScheduler::RoundRobin,
        Method::IpHash => XdpScheduler::SourceHash,
        Method::Hash { key, consistent: false } if key_is(key.raw(), "$remote_addr") => XdpScheduler::SourceHash,
        Method::Maglev { key } if key_is(key.raw(), "$remote_addr") => XdpScheduler::Maglev { source_only: true },
        Method::Maglev { key } if key_is(key.raw(), "$remote_addr$remote_port") => {
            XdpScheduler::Maglev { source_only: false }
        }
        Method::LeastConn
            if upstream.servers.iter().map(|s| s.addrs.len()).sum::<usize>() > corelb_xdp::maps::LEAST_MAX =>
        {
            return refuse(format!(
                "\"least_conn\" over more than {} servers in upstream \"{}\" is not supported by the XDP path",
                corelb_xdp::maps::LEAST_MAX,
                upstream.name
            ))
        }
        Method::LeastConn => XdpScheduler::LeastConn,
        _ => {
            return refuse(format!(
                "the method of upstream \"{}\" is not supported by the XDP path (round robin, \"ip_hash\", \
                 \"hash $remote_addr\", \"hash $remote_addr[$remote_port] maglev\" and \"least_conn\" are)",
                upstream.name
            ))
        }
    };
    for s in &upstream.servers {
        let at = |msg: String| Err(ConfigError::invalid(msg, &s.span));
        if s.backup {
            return at(format!(
                "a \"backup\" server of upstream \"{}\" used by the XDP path is not supported by corelb",
                upstream.name
            ));
        }
        if s.resolve.is_some() {
            return at(format!(
                "a \"resolve\" server of upstream \"{}\" used by the XDP path is not supported by corelb",
                upstream.name
            ));
        }
        for a in &s.addrs {
            let SocketAddr::V4(a) = a else {
                return at(format!(
                    "the IPv6 server \"{}\" is not supported by the XDP path",
                    s.text
                ));
            };
            if l.mode == XdpMode::Dr && a.port() != l.addr.port() {
                return at(format!(
                    "server \"{}\" has another port than the VIP {}: \"mode=dr\" cannot change ports (\"mode=nat\" can)",
                    s.text, l.addr
                ));
            }
        }
    }
    Ok(XdpVip {
        addr: l.addr,
        device: l.device,
        mode: l.mode,
        udp: l.udp,
        upstream: index,
        scheduler,
        timeout,
        span: l.span,
    })
}

#[cfg(test)]
mod tests {
    use crate::config::model::{XdpMode, XdpScheduler};
    use std::path::Path;

    /// A stream block with upstream lines `up` and an XDP server `listen` line `listen` (on line 5), plus `extra`.
    fn conf(up: &str, listen: &str, extra: &str) -> String {
        format!(
            "events {{}}\nstream {{\n    upstream u {{ {up} }}\n    server {{\n        {listen}\n        \
             proxy_pass u;\n{extra}    }}\n}}\n"
        )
    }

    fn err(text: &str) -> String {
        crate::config::parse_str(text, Path::new("x.conf"))
            .expect_err("refused")
            .to_string()
    }

    #[test]
    fn a_vip_is_read_with_its_scheduler() {
        if corelb_xdp::missing().is_some() {
            return;
        }
        let text = conf(
            "hash $remote_addr$remote_port maglev; server 10.0.0.11:8080 weight=2;",
            "listen 10.0.0.100:80 xdp=lo mode=nat udp;",
            "        proxy_timeout 30s;\n",
        );
        let c = crate::config::parse_str(&text, Path::new("x.conf")).expect("accepted");
        let stream = c.stream.expect("a stream block");
        assert!(stream.servers.is_empty(), "an XDP server has no socket");
        let v = &stream.xdp[0];
        assert_eq!((v.mode, v.udp, v.device.as_str()), (XdpMode::Nat, true, "lo"));
        assert_eq!(v.scheduler, XdpScheduler::Maglev { source_only: false });
        assert_eq!(v.timeout, std::time::Duration::from_secs(30));
    }

    #[test]
    fn what_the_kernel_path_cannot_do_is_refused_by_name_with_its_line() {
        if let Some(why) = corelb_xdp::missing() {
            let want = format!(
                "[emerg] \"xdp=\" needs corelb's XDP program, which this build does not have: {why} in x.conf:5"
            );
            assert_eq!(
                err(&conf("server 10.0.0.11:80;", "listen 10.0.0.100:80 xdp=lo;", "")),
                want
            );
            return;
        }
        let srv = "server 10.0.0.11:80;";
        for (up, listen, extra, want) in [
            (srv, "listen 10.0.0.100:80 xdp=no-such-dev9;", "", "no device \"no-such-dev9\" for \"xdp=\" in x.conf:5"),
            (srv, "listen 10.0.0.100:80 xdp=lo mode=tun;", "", "\"mode=tun\" is not supported by corelb (it needs IPIP or GUE encapsulation) in x.conf:5"),
            (srv, "listen 10.0.0.100:80 xdp=lo ssl;", "", "the \"ssl\" parameter is not supported with \"xdp=\" by corelb in x.conf:5"),
            (srv, "listen [::1]:80 xdp=lo;", "", "\"xdp=\" needs an IPv4 address and a port, not \"[::1]:80\", in \"listen\" in x.conf:5"),
            (srv, "listen 10.0.0.100:80 xdp=lo;", "        proxy_connect_timeout 1s;\n", "\"proxy_connect_timeout\" in a server with \"listen ... xdp=\" is not supported by corelb in x.conf:7"),
            ("random; server 10.0.0.11:80;", "listen 10.0.0.100:80 xdp=lo;", "", "the method of upstream \"u\" is not supported by the XDP path (round robin, \"ip_hash\", \"hash $remote_addr\", \"hash $remote_addr[$remote_port] maglev\" and \"least_conn\" are) in x.conf:5"),
            ("server 10.0.0.11:81;", "listen 10.0.0.100:80 xdp=lo;", "", "server \"10.0.0.11:81\" has another port than the VIP 10.0.0.100:80: \"mode=dr\" cannot change ports (\"mode=nat\" can) in x.conf:3"),
            ("server 10.0.0.12:80; server 10.0.0.11:80 backup;", "listen 10.0.0.100:80 xdp=lo;", "", "a \"backup\" server of upstream \"u\" used by the XDP path is not supported by corelb in x.conf:3"),
            (srv, "listen 10.0.0.100:80 xdp=lo;", "        listen 127.0.0.1:80;\n", "a server with \"listen ... xdp=\" cannot also listen on a socket in x.conf:7"),
        ] {
            assert_eq!(err(&conf(up, listen, extra)), format!("[emerg] {want}"));
        }
        // the maps need root's capabilities for the process's life: `user` (root's own excepted) is refused
        let text = format!(
            "user nobody nogroup;\n{}",
            conf(srv, "listen 10.0.0.100:80 xdp=lo;", "")
        );
        assert_eq!(
            err(&text),
            "[emerg] \"user nobody\" with \"listen ... xdp=\" is not supported by corelb (the XDP maps need root's \
             capabilities while the process runs) in x.conf:6"
        );
        let text = format!("user root;\n{}", conf(srv, "listen 10.0.0.100:80 xdp=lo;", ""));
        assert!(crate::config::parse_str(&text, Path::new("x.conf")).is_ok());
    }
}
