//! TLS termination: each TLS listen address's rustls `ServerConfig`, built at load into the snapshot
//! ([`server_config`]: SNI picks the server's certificates, RSA or ECDSA by what the client offers), the accept
//! step of a connection on such an address ([`accept`]: TLS, or plain HTTP sent to it), and what `$ssl_*`
//! variables read ([`facts`]); towards `https` upstreams, each location's rustls `ClientConfig`
//! ([`client_config`]), certificate checks as OpenSSL makes them ([`verify`]), and stream `ssl_preread`'s look
//! at a hello it does not answer ([`preread`]).

pub mod accept;
pub mod client_auth;
pub mod client_config;
pub mod client_vars;
pub mod context;
pub mod dynamic;
pub mod facts;
pub mod preread;
pub mod resolve;
pub mod server_config;
pub mod session_timeout;
pub mod verify;

pub use accept::{accept, Accepted};
pub use facts::TlsFacts;
pub use server_config::{server_config, PortServers, PortTls};
