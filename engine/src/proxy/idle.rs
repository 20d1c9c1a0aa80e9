//! A keepalive connection's wait for its next request holding no buffer: its buffers go back to the shard (the
//! connection's few facts parked beside the wait), and each read try reads into the shard's top spare set, taken
//! only when bytes came, so an idle connection keeps only its socket, its state and this wait; on glommio, once it
//! has waited a tick, its socket parks too (`Runtime::park_idle`: glommio's read source given up).

use super::client::ClientConn;
use crate::access_log::record::RequestRecord;
use crate::runtime::deadline::{Deadline, COARSE_FROM};
use crate::runtime::Runtime;
use crate::shard::Buffers;
use futures_lite::AsyncRead;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// How a keepalive wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Woken {
    /// The next request's first bytes are in the connection's client buffer.
    Bytes,
    /// The connection is to close (`keepalive_timeout`, the client closed, a graceful stop): its buffers are an
    /// empty husk with its facts.
    Close,
}

/// What is the connection's, not one request's, in its buffers: its `$connection` number, last access-log ticket
/// and routed count, and (rarer: a PROXY protocol header, TLS) its addresses, TLVs and handshake.
struct ConnFacts {
    connection: u64,
    named_ticket: u64,
    routed: u64,
    rare: Option<Box<RareFacts>>,
}

/// The facts a plain connection has none of (boxed apart: one allocation per wait, for such connections only).
struct RareFacts {
    proxy: Option<crate::http::proxy_protocol::ProxyAddrs>,
    tlvs: Vec<u8>,
    tls: Option<crate::tls::TlsFacts>,
}

impl ConnFacts {
    const NONE: ConnFacts = ConnFacts {
        connection: 0,
        named_ticket: 0,
        routed: 0,
        rare: None,
    };

    /// Moves the facts out of `from`, leaving it fit for any connection.
    fn take(from: &mut Buffers) -> Self {
        let rare = (from.proxy.is_some() || !from.tlvs.is_empty() || from.tls.is_some()).then(|| {
            Box::new(RareFacts {
                proxy: from.proxy.take(),
                tlvs: std::mem::take(&mut from.tlvs),
                tls: from.tls.take(),
            })
        });
        ConnFacts {
            connection: from.log.connection,
            named_ticket: from.log.named_ticket,
            routed: from.log.routed,
            rare,
        }
    }

    /// Puts the facts into `into` (another connection's buffers before), in place of whatever it had.
    fn put(&mut self, into: &mut Buffers) {
        let log: &mut RequestRecord = &mut into.log;
        log.connection = self.connection;
        log.named_ticket = self.named_ticket;
        log.routed = self.routed;
        log.set = 0;
        match self.rare.take() {
            Some(rare) => {
                let RareFacts { proxy, tlvs, tls } = *rare;
                into.proxy = proxy;
                into.tlvs = tlvs;
                into.tls = tls;
            }
            // (a plain connection has none of these: a compare each, not a write of the large options)
            None => {
                if into.proxy.is_some() {
                    into.proxy = None;
                }
                into.tlvs.clear();
                if into.tls.is_some() {
                    into.tls = None;
                }
            }
        }
        // a set an HTTP/2 stream gave back says `$http2`
        if into.http2.is_some() {
            into.http2 = None;
        }
    }
}

/// The wait's time limit, armed when a first read try finds nothing.
enum IdleTimer<R: Runtime> {
    Unarmed(Duration),
    /// A wait of [`COARSE_FROM`] or more, as every long I/O timeout: a slot in the thread's deadline table. On a
    /// runtime that parks idle connections ([`Runtime::PARKS`]) the deadline is first [`PARK_AFTER`], with the
    /// whole wait in milliseconds beside it: then the connection parks and the deadline moves to the wait's end
    /// (0 beside it: no park to come). One variant for both, so that the wait's drop stays what it was.
    Coarse(Deadline<R>, u32),
    /// A shorter one, on the runtime's timer (boxed: rare, and an idle connection keeps this wait).
    Fine(Pin<Box<dyn Future<Output = ()>>>),
}

/// How long a connection waits before it parks: a deadline of one tick completes at the tick after it, 1-2
/// ticks (50-100 ms) after the wait began; a connection whose next request comes sooner does not park.
const PARK_AFTER: Duration = crate::runtime::deadline::TICK;

/// What the wait's timer says.
enum Timer {
    /// The wait is over.
    Expired,
    /// The connection has waited past [`PARK_AFTER`]: park it (the timer goes on).
    Park,
}

impl<R: Runtime> IdleTimer<R> {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Timer> {
        if let IdleTimer::Unarmed(d) = *self {
            // (`PARKS` is a constant: tokio's wait arms as it did)
            let park_ms = match R::PARKS && d >= COARSE_FROM {
                true => u32::try_from(d.as_millis()).unwrap_or(0),
                false => 0,
            };
            let armed = match (park_ms, d >= COARSE_FROM) {
                (0, true) => IdleTimer::Coarse(Deadline::after(d), 0),
                (_, true) => IdleTimer::Coarse(Deadline::after(PARK_AFTER), park_ms),
                (_, false) => IdleTimer::Fine(Box::pin(R::sleep(d))),
            };
            // (an unarmed timer holds nothing to drop: no drop glue for it)
            std::mem::forget(std::mem::replace(self, armed));
        }
        match self {
            IdleTimer::Unarmed(_) => Poll::Ready(Timer::Expired),
            IdleTimer::Coarse(d, park_ms) => {
                if Pin::new(&mut *d).poll(cx).is_pending() {
                    return Poll::Pending;
                }
                if !R::PARKS || *park_ms == 0 {
                    return Poll::Ready(Timer::Expired);
                }
                // (the deadline was the wait's start and a tick)
                let rest = Duration::from_millis(u64::from(*park_ms)).saturating_sub(PARK_AFTER);
                *d = Deadline::until(d.at() + rest);
                *park_ms = 0;
                // (a deadline is never ready on its first poll: this registers it)
                let _ = Pin::new(&mut *d).poll(cx);
                Poll::Ready(Timer::Park)
            }
            IdleTimer::Fine(s) => s.as_mut().poll(cx).map(|()| Timer::Expired),
        }
    }
}

/// A keepalive connection's wait for its next request, its buffers lent to the shard meanwhile.
pub(super) struct IdleWait<'a, R: Runtime> {
    conn: &'a mut ClientConn<R>,
    facts: ConnFacts,
    /// The snapshot's `client_buffer`: the client buffer the bytes are read into (u32: this wait stays small).
    client_size: u32,
    timer: IdleTimer<R>,
    /// `conn.bufs` was given to the shard and is not the connection's until [`IdleWait::end`] puts a set back.
    lent: bool,
    /// A keepalive wait, which a graceful stop ends; a new connection's wait for its first request is not ended by
    /// it (nginx closes only its idle keepalive connections then).
    keepalive: bool,
}

impl<R: Runtime> ClientConn<R> {
    /// Waits up to `wait` for the next request's first bytes (`keepalive_timeout` after a request, or until a
    /// graceful stop; before the first one, what is left of `client_header_timeout`), with the buffers given back
    /// meanwhile (the client buffer is empty); they come back, from the shard's spare sets, with a client buffer of
    /// `client_size` holding the bytes. `keepalive`: after a request (a graceful stop ends the wait).
    ///
    /// # Safety
    /// Until the wait is dropped, `self.bufs` is not the connection's (it went back to the shard; the wait puts a
    /// set back when it ends or is dropped): the wait must not be leaked. The caller awaits it inside the future
    /// that owns the connection, so that the connection can only be leaked with it.
    pub(super) unsafe fn wait_idle(&mut self, client_size: usize, wait: Duration, keepalive: bool) -> IdleWait<'_, R> {
        self.phase.between_reads(false);
        let mut wait = IdleWait {
            conn: self,
            facts: ConnFacts::NONE,
            client_size: u32::try_from(client_size).unwrap_or(u32::MAX),
            timer: IdleTimer::Unarmed(wait),
            lent: false,
            keepalive,
        };
        // SAFETY: the box is read out here, and from now on the wait writes a live one back (`end`) before it is
        // dropped, unwinding included; nothing reads `conn.bufs` meanwhile (the wait holds the connection's only
        // borrow) nor drops it (the caller's contract: the wait is not leaked).
        let mut bufs = unsafe { std::ptr::read(&wait.conn.bufs) };
        wait.lent = true;
        wait.facts = ConnFacts::take(&mut bufs);
        wait.conn.shard.give_buffers(bufs);
        wait
    }
}

impl<R: Runtime> IdleWait<'_, R> {
    /// Puts `bufs` (the spare set the bytes came into), else a husk, back as the connection's buffers, with its
    /// facts.
    fn end(&mut self, bufs: Option<Box<Buffers>>) -> Woken {
        let (mut bufs, woken) = match bufs {
            Some(b) => (b, Woken::Bytes),
            None => (self.conn.shard.take_husk(), Woken::Close),
        };
        self.facts.put(&mut bufs);
        if self.lent {
            // SAFETY: the box there was given to the shard (`wait_idle`): it is overwritten without a drop.
            unsafe { std::ptr::write(&mut self.conn.bufs, bufs) };
            self.lent = false;
        }
        woken
    }
}

impl<R: Runtime> Future for IdleWait<'_, R> {
    type Output = Woken;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Woken> {
        let this = self.get_mut();
        if !this.lent {
            return Poll::Ready(Woken::Close);
        }
        if this.keepalive && this.conn.shard.draining() {
            return Poll::Ready(this.end(None));
        }
        // the read registers the wake-up, as any read does; the spare set is taken only when bytes came
        let conn = &mut *this.conn;
        let sock = &mut conn.sock;
        let read = conn
            .shard
            .read_into_spare(this.client_size as usize, |buf| Pin::new(&mut *sock).poll_read(cx, buf));
        match read {
            // bytes, or none at the end of the stream or on an error
            Poll::Ready(bufs) => Poll::Ready(this.end(bufs)),
            Poll::Pending => match this.timer.poll(cx) {
                Poll::Ready(Timer::Expired) => Poll::Ready(this.end(None)),
                Poll::Ready(Timer::Park) => {
                    // the read found nothing and registered its wake-up: the park registers another, the same
                    R::park_idle(&mut this.conn.sock, cx);
                    Poll::Pending
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl<R: Runtime> Drop for IdleWait<'_, R> {
    /// A wait dropped before it ended (its task was): the connection gets a husk back, so that it drops whole.
    fn drop(&mut self) {
        if self.lent {
            self.end(None);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::proxy::client::ClientConn;
    use crate::runtime::glommio_rt::Glommio;
    use crate::runtime::tokio_rt::Tokio;
    use crate::shard::Buffers;

    /// The size of what a function's call returns (here: an async fn's future, never built).
    fn output_size<F: Fn(A, B, C, D) -> O, A, B, C, D, O>(_: &F) -> usize {
        std::mem::size_of::<O>()
    }

    #[test]
    fn a_connections_facts_park_beside_its_wait_and_stale_ones_are_not_inherited() {
        use super::ConnFacts;
        use crate::tls::TlsFacts;
        let mut full = Buffers::new(1024);
        full.log.new_connection(7);
        full.log.named_ticket = 3;
        full.log.routed = 2;
        full.tlvs.extend_from_slice(b"tlv");
        full.tls = Some(TlsFacts {
            server_name: "a.example".into(),
            ..TlsFacts::default()
        });
        let mut facts = ConnFacts::take(&mut full);
        assert!(full.tlvs.is_empty() && full.tls.is_none() && full.proxy.is_none());
        // the set the next bytes came into was another connection's: an HTTP/2 stream's, with TLS facts
        let mut next = Buffers::new(1024);
        next.tls = Some(TlsFacts::default());
        next.http2 = Some("h2");
        next.log.set = 5;
        facts.put(&mut next);
        assert_eq!((next.log.connection, next.log.named_ticket, next.log.routed), (7, 3, 2));
        assert_eq!(next.tlvs, b"tlv");
        assert_eq!(next.tls.as_ref().map(|t| t.server_name.as_str()), Some("a.example"));
        assert_eq!((next.http2, next.log.set), (None, 0));
        // a plain connection's facts put into a set a TLS connection left
        let mut plain = Buffers::new(1024);
        plain.log.new_connection(8);
        let mut facts = ConnFacts::take(&mut plain);
        facts.put(&mut next);
        assert_eq!(next.log.connection, 8);
        assert!(next.tls.is_none() && next.tlvs.is_empty() && next.proxy.is_none());
    }

    #[test]
    fn an_idle_connection_keeps_its_state_and_its_wait_not_its_buffers_nor_a_burst() {
        let conn = (
            std::mem::size_of::<ClientConn<Tokio>>(),
            std::mem::size_of::<ClientConn<Glommio>>(),
        );
        let wait = (
            std::mem::size_of::<super::IdleWait<'_, Tokio>>(),
            std::mem::size_of::<super::IdleWait<'_, Glommio>>(),
        );
        // the connection task's future: all an idle connection's task holds (its state and its wait)
        let serve = (
            output_size(&crate::proxy::http::serve::<Tokio>),
            output_size(&crate::proxy::http::serve::<Glommio>),
        );
        // held only while requests are served, in a block of the thread's free list; so is a full buffer set (the
        // client buffer, 32 KiB upstream, 16 KiB answer, 4 KiB request, the smaller ones, and this struct)
        let burst = (
            crate::proxy::http::burst_size::<Tokio>(),
            crate::proxy::http::burst_size::<Glommio>(),
        );
        let set = std::mem::size_of::<Buffers>();
        // glommio's socket (in the connection), which an idle connection's wait parks after a tick: its glommio
        // stream, and with it the stream's `POLL_ADD` source (~500 B on the heap), given up for a descriptor and a
        // waker's slot in the shard's epoll set
        let socket = std::mem::size_of::<crate::runtime::glommio_rt::GlommioConn>();
        let slot = std::mem::size_of::<Option<std::task::Waker>>();
        println!(
            "idle: connection {conn:?} B (tokio, glommio), its wait {wait:?} B, the task's future {serve:?} B; \
             glommio's socket {socket} B in it, parked with a {slot}-byte waker slot and no glommio source; \
             while served: a burst {burst:?} B and a buffer set of {set} B and its heap"
        );
        assert!(conn.0 <= 256 && conn.1 <= 320, "{conn:?}");
        assert!(wait.0 <= 96 && wait.1 <= 96, "{wait:?}");
        // tokio's task is a 104-byte cell around the future (with the 8-byte counting wrapper), aligned to 128:
        // up to 400 bytes it is 512; glommio's is 48 bytes around it and the wrapper: up to 456 bytes it takes
        // jemalloc's 512-byte class, past it the 640-byte one
        assert!(serve.0 <= 400 && serve.1 <= 456, "{serve:?}");
        // a burst's future is not an idle connection's (bound: it must not grow)
        assert!(burst.0 <= 16 * 1024 && burst.1 <= 16 * 1024, "{burst:?}");
    }
}
