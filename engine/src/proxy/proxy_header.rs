//! A connection's PROXY protocol header (`listen ... proxy_protocol`), read before anything else within a time
//! limit; a broken or missing one closes the connection with nginx's reason logged at `error`.

use crate::http::proxy_protocol::{self, ProxyAddrs, Read};
use crate::runtime::iobuf::IoBuf;
use crate::runtime::{timeout, Runtime};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The longest wait taken (a larger timeout is as good as forever, and a clock sum cannot overflow).
const LONGEST: Duration = Duration::from_secs(365 * 24 * 3600);

/// Where the header is read and what it is read for.
pub struct HeaderRead<'a, R: Runtime> {
    pub sock: &'a mut R::Conn,
    /// The connection's read buffer: what follows the header stays in it.
    pub buf: &'a mut IoBuf,
    /// The header's v2 TLVs are copied here.
    pub tlvs: &'a mut Vec<u8>,
    /// The connection's own addresses, for the log line.
    pub peer: SocketAddr,
    pub local: SocketAddr,
}

/// Why no header was read (the connection closes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoHeader {
    /// A broken header (nginx's stream session ends with 400).
    Broken,
    /// The client left, failed or took too long.
    Gone,
}

impl<R: Runtime> HeaderRead<'_, R> {
    /// Reads the header within `wait`: the addresses to go on with (`None` for a header without them, as
    /// `UNKNOWN`), or why the connection closes.
    pub async fn read(self, wait: Duration) -> Result<Option<ProxyAddrs>, NoHeader> {
        let deadline = Instant::now() + wait.min(LONGEST);
        loop {
            match proxy_protocol::read(self.buf.readable()) {
                Read::Done(h) => {
                    self.tlvs.clear();
                    self.tlvs
                        .extend_from_slice(self.buf.readable().get(h.tlvs.clone()).unwrap_or_default());
                    self.buf.consume(h.len);
                    return Ok(h.addrs);
                }
                Read::Broken(b) => {
                    crate::log_error!(
                        "{b} while reading PROXY protocol, client: {}, server: {}",
                        crate::config::unix_addr::Ip(&self.peer),
                        crate::config::unix_addr::Display(&self.local)
                    );
                    return Err(NoHeader::Broken);
                }
                Read::More => {}
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match timeout::<R, _>(left, self.buf.fill_untimed(self.sock)).await {
                Ok(Ok(n)) if n > 0 => {}
                Ok(Ok(_)) => {
                    crate::log_info!(
                        "client closed connection while reading PROXY protocol, client: {}, server: {}",
                        crate::config::unix_addr::Ip(&self.peer),
                        crate::config::unix_addr::Display(&self.local)
                    );
                    return Err(NoHeader::Gone);
                }
                Ok(Err(e)) => {
                    crate::log_info!(
                        "recv() failed ({e}) while reading PROXY protocol, client: {}",
                        crate::config::unix_addr::Ip(&self.peer)
                    );
                    return Err(NoHeader::Gone);
                }
                Err(_) => {
                    crate::log_info!(
                        "client timed out while reading PROXY protocol, client: {}, server: {}",
                        crate::config::unix_addr::Ip(&self.peer),
                        crate::config::unix_addr::Display(&self.local)
                    );
                    return Err(NoHeader::Gone);
                }
            }
        }
    }
}
