//! A keepalive connection's wait for its next request holding no buffer: each read borrows a set of the shard's
//! spare buffers and gives it back when nothing came, so an idle connection keeps only its socket and facts.

use super::client::ClientConn;
use super::phase::ConnPhase;
use crate::http::chunked::ChunkedDecoder;
use crate::http::vars::ConnVars;
use crate::runtime::{timeout, Runtime};
use crate::shard::{Buffers, ConnFacts, Shard};
use futures_lite::AsyncRead;
use std::pin::Pin;
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

/// A client connection between two requests, without buffers: what stays of it while it waits.
pub(super) struct IdleConn<R: Runtime> {
    pub(super) shard: Rc<Shard<R>>,
    pub(super) sock: R::Conn,
    pub(super) facts: ConnFacts,
    decoder: ChunkedDecoder,
    vars: ConnVars,
    phase: ConnPhase,
    /// The size of the client buffer to read into (the snapshot's `client_buffer`).
    client_size: usize,
}

/// How an idle wait ended.
pub(super) enum Woken<R: Runtime> {
    /// Bytes came: the connection again, with buffers holding them.
    Bytes(ClientConn<R>),
    /// The client closed or failed, the keepalive timeout passed, or the shard is stopping.
    Closed(IdleConn<R>),
}

impl<R: Runtime> ClientConn<R> {
    /// Gives the connection's buffers back to its shard (its client buffer is empty) for an idle wait.
    pub(super) fn park(self, client_size: usize) -> IdleConn<R> {
        let ClientConn {
            shard,
            sock,
            mut bufs,
            decoder,
            vars,
            mut phase,
        } = self;
        let facts = bufs.take_facts();
        shard.give_buffers(bufs);
        phase.between_reads(false);
        IdleConn {
            shard,
            sock,
            facts,
            decoder,
            vars,
            phase,
            client_size,
        }
    }
}

impl<R: Runtime> IdleConn<R> {
    /// Waits up to `keepalive` (`keepalive_timeout`) for the next request's first bytes, or until a graceful stop.
    pub(super) async fn wait(mut self, keepalive: Duration) -> Woken<R> {
        let shard = &*self.shard;
        let read = futures_lite::future::or(
            async {
                timeout::<R, _>(keepalive, next_bytes(shard, &mut self.sock, self.client_size))
                    .await
                    .ok()
            },
            async {
                shard.stopped().await;
                None
            },
        )
        .await;
        match read.flatten() {
            Some(mut bufs) => {
                bufs.put_facts(self.facts);
                Woken::Bytes(ClientConn {
                    shard: self.shard,
                    sock: self.sock,
                    bufs,
                    decoder: self.decoder,
                    vars: self.vars,
                    phase: self.phase,
                })
            }
            None => Woken::Closed(self),
        }
    }
}

/// Reads the first bytes that come into a client buffer of the shard's spare buffers, taken for each try and given
/// back when the socket has nothing (the read registers the wake-up, as any read does); none at the end of the
/// stream or on an error.
async fn next_bytes<R: Runtime>(shard: &Shard<R>, sock: &mut R::Conn, client_size: usize) -> Option<Box<Buffers>> {
    std::future::poll_fn(|cx| {
        let mut bufs = shard.take_buffers(client_size);
        match Pin::new(&mut *sock).poll_read(cx, bufs.client.spare()) {
            Poll::Ready(Ok(n)) if n > 0 => {
                bufs.client.commit(n);
                Poll::Ready(Some(bufs))
            }
            Poll::Ready(_) => {
                shard.give_buffers(bufs);
                Poll::Ready(None)
            }
            Poll::Pending => {
                shard.give_buffers(bufs);
                Poll::Pending
            }
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::IdleConn;
    use crate::runtime::glommio_rt::Glommio;
    use crate::runtime::tokio_rt::Tokio;
    use crate::shard::Buffers;

    /// The size of what a function's call returns (here: an async fn's future, never built).
    fn output_size<F: Fn(A, B, C, D) -> O, A, B, C, D, O>(_: &F) -> usize {
        std::mem::size_of::<O>()
    }

    #[test]
    fn an_idle_connection_keeps_its_socket_and_facts_not_its_buffers() {
        let idle = (
            std::mem::size_of::<IdleConn<Tokio>>(),
            std::mem::size_of::<IdleConn<Glommio>>(),
        );
        // the struct alone; its heap (the client buffer, 32 KiB upstream, 16 KiB answer, 4 KiB request) goes back too
        let buffers = std::mem::size_of::<Buffers>();
        let serve = (
            output_size(&crate::proxy::http::serve::<Tokio>),
            output_size(&crate::proxy::http::serve::<Glommio>),
        );
        println!("idle state: {idle:?} B (tokio, glommio); serve future {serve:?} B; buffers given back: {buffers} B and their heap");
        assert!(idle.0 <= 512 && idle.1 <= 512, "{idle:?}");
        // the connection task's future, which an idle connection still holds whole (bound: it must not grow)
        assert!(serve.0 <= 16 * 1024 && serve.1 <= 16 * 1024, "{serve:?}");
    }
}
