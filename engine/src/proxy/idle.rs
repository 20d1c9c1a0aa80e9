//! A keepalive connection's wait for its next request holding no buffer: its buffers go back to the shard for an
//! empty husk that carries the connection's facts, and each read try reads into the shard's top spare set, taken
//! only when bytes came, so an idle connection keeps only its socket, its state and the husk.

use super::client::ClientConn;
use crate::runtime::{timeout, Runtime};
use crate::shard::{Buffers, Shard};
use futures_lite::AsyncRead;
use std::pin::Pin;
use std::time::Duration;

impl<R: Runtime> ClientConn<R> {
    /// Waits up to `keepalive` (`keepalive_timeout`) for the next request's first bytes, or until a graceful stop,
    /// with the buffers given back meanwhile (the client buffer is empty); they come back, from the shard's spare
    /// sets, with a client buffer of `client_size` holding the bytes. False when the connection is to close (the
    /// buffers are then an empty husk with the connection's facts).
    pub(super) async fn wait_idle(&mut self, client_size: usize, keepalive: Duration) -> bool {
        let husk = self.shard.take_husk();
        self.swap_buffers(husk);
        self.phase.between_reads(false);
        let shard = &*self.shard;
        let sock = &mut self.sock;
        let read = futures_lite::future::or(
            async {
                timeout::<R, _>(keepalive, next_bytes(shard, sock, client_size))
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
            Some(full) => {
                self.swap_buffers(full);
                true
            }
            None => false,
        }
    }

    /// Puts `next` in place of the connection's buffers, with the connection's facts moved over, and gives the
    /// old ones back to the shard.
    fn swap_buffers(&mut self, mut next: Box<Buffers>) {
        next.take_facts_of(&mut self.bufs);
        let old = std::mem::replace(&mut self.bufs, next);
        self.shard.give_buffers(old);
    }
}

/// Reads the first bytes that come into the client buffer of the shard's top spare set, taken only then (the
/// read registers the wake-up, as any read does); none at the end of the stream or on an error.
async fn next_bytes<R: Runtime>(shard: &Shard<R>, sock: &mut R::Conn, client_size: usize) -> Option<Box<Buffers>> {
    std::future::poll_fn(|cx| shard.read_into_spare(client_size, |buf| Pin::new(&mut *sock).poll_read(cx, buf))).await
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
    fn an_idle_connection_keeps_its_state_and_a_husk_not_its_buffers() {
        let conn = (
            std::mem::size_of::<ClientConn<Tokio>>(),
            std::mem::size_of::<ClientConn<Glommio>>(),
        );
        // the husk is the struct alone; the heap of a full set (the client buffer, 32 KiB upstream, 16 KiB answer,
        // 4 KiB request, the smaller ones) goes back to the shard
        let husk = std::mem::size_of::<Buffers>();
        let serve = (
            output_size(&crate::proxy::http::serve::<Tokio>),
            output_size(&crate::proxy::http::serve::<Glommio>),
        );
        println!("idle: connection {conn:?} B (tokio, glommio), husk {husk} B; serve future {serve:?} B");
        assert!(conn.0 <= 512 && conn.1 <= 512, "{conn:?}");
        // 2,096 B since the lingering close and $request_body of a chunked body (body merge)
        assert!(husk <= 2112, "{husk}");
        // the connection task's future, which an idle connection still holds whole (bound: it must not grow)
        assert!(serve.0 <= 16 * 1024 && serve.1 <= 16 * 1024, "{serve:?}");
    }
}
