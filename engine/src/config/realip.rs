//! What `set_real_ip_from`, `real_ip_header` and `real_ip_recursive` leave in the model (read by
//! `config::build`, compiled into the snapshot's trusted table).

use std::net::IpAddr;

/// One `set_real_ip_from` network: its address (low bits cleared) and prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    pub addr: IpAddr,
    pub bits: u8,
}

/// Where the real address is taken from (`real_ip_header`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RealIpHeader {
    #[default]
    XRealIp,
    XForwardedFor,
    /// The connection's PROXY protocol header.
    ProxyProtocol,
    /// Another request header (stored lower-case).
    Named(String),
}

/// A level's effective realip settings: present only where some level has `set_real_ip_from`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RealIpConf {
    pub from: Vec<Cidr>,
    /// `set_real_ip_from unix:`: trust connections over a unix-domain socket (`listen unix:`).
    pub unix: bool,
    pub header: RealIpHeader,
    pub recursive: bool,
}

/// The trusted networks one level lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedList {
    pub from: Vec<Cidr>,
    pub unix: bool,
}
