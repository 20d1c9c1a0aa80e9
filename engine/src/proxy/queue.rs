//! `queue N [timeout=T]` (nginx Plus): a request whose first pick finds no usable peer (every one at `max_conns`,
//! failed or down) waits for one instead of an immediate 502, up to N such requests per shard and upstream, for at
//! most T. nginx Plus answers 502 when the queue is full or the time is up, and so does corelb.
//!
//! A waiting request tries the pick again when a try of the same upstream on its shard ends (a connection slot
//! freed here), and every [`RECHECK`] (a slot freed by another shard, a peer back from its failure). While it
//! waits it reads its client, so a client that goes away leaves the queue at once. Nothing is allocated: the
//! waiters are the shard's count and its wake-up list.

use super::client::ClientConn;
use super::retry::RetryState;
use crate::balance::Peer;
use crate::runtime::Runtime;
use crate::shard::Shard;
use crate::snapshot::Snapshot;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// How often a waiting request looks at the peers without being woken.
pub const RECHECK: Duration = Duration::from_millis(20);

/// How a wait in the queue ended.
pub enum Waited<'a> {
    /// A peer was picked (its `conns` unit taken).
    Peer(&'a Peer),
    /// The queue was full, or the time ran out: nginx Plus's 502.
    Refused,
    /// The client closed its connection while waiting.
    ClientGone,
}

/// The shard's wake-up list: the tasks waiting in any upstream's queue, woken when a try ends on the shard.
#[derive(Debug, Default)]
pub struct QueueWakers {
    waiting: RefCell<Vec<Waker>>,
}

impl QueueWakers {
    /// Wakes every waiting task (each looks at its upstream again). A shard without queued requests has an empty
    /// list: one borrow and a length test.
    pub fn wake_all(&self) {
        let mut w = self.waiting.borrow_mut();
        if !w.is_empty() {
            w.drain(..).for_each(Waker::wake);
        }
    }

    fn register(&self, waker: &Waker) {
        let mut w = self.waiting.borrow_mut();
        if !w.iter().any(|x| x.will_wake(waker)) {
            w.push(waker.clone());
        }
    }
}

/// Ready once woken through [`QueueWakers::wake_all`] (the first poll registers).
struct Woken<'a> {
    wakers: &'a QueueWakers,
    registered: bool,
}

impl Future for Woken<'_> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.registered {
            return Poll::Ready(());
        }
        self.registered = true;
        self.wakers.register(cx.waker());
        Poll::Pending
    }
}

/// One place in an upstream's queue on a shard: counted in, and out when dropped (however the wait ends).
struct Place<'a, R: Runtime> {
    shard: &'a Shard<R>,
    snap: &'a Snapshot,
    upstream: usize,
}

impl<'a, R: Runtime> Place<'a, R> {
    /// Takes a place if fewer than `max` requests wait.
    fn take(shard: &'a Shard<R>, snap: &'a Snapshot, upstream: usize, max: u32) -> Option<Self> {
        let taken = shard.with_http_state(snap, upstream, |st| {
            let room = st.queued < max;
            if room {
                st.queued += 1;
            }
            room
        });
        taken.unwrap_or(false).then_some(Place { shard, snap, upstream })
    }
}

impl<R: Runtime> Drop for Place<'_, R> {
    fn drop(&mut self) {
        self.shard.with_http_state(self.snap, self.upstream, |st| {
            st.queued = st.queued.saturating_sub(1);
        });
    }
}

/// What the wait does between two looks at the peers.
enum Between {
    /// Woken, or the recheck time passed.
    Look,
    /// The client sent bytes (kept in its buffer for later).
    Read,
    /// The client closed, or its connection failed.
    Gone,
}

impl<R: Runtime> ClientConn<R> {
    /// Waits in the upstream's queue (the caller found no peer on the first pick) until a peer is picked, the
    /// queue refuses, the time runs out or the client goes away.
    pub(super) async fn wait_in_queue<'a>(&mut self, retry: &mut RetryState<'a, R>) -> Waited<'a> {
        let Some(q) = retry.attempt.plan().queue else {
            return Waited::Refused;
        };
        let shard = retry.shard;
        let Some(_place) = Place::take(shard, retry.snap, retry.plan.upstream, q.max) else {
            return Waited::Refused;
        };
        let deadline = Instant::now() + q.timeout;
        let mut watch_client = true;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Waited::Refused;
            }
            let step = left.min(RECHECK);
            let between = {
                let woken = Woken {
                    wakers: &shard.queue,
                    registered: false,
                };
                let client = async {
                    if !watch_client {
                        std::future::pending::<()>().await;
                    }
                    let spare = self.bufs.client.spare();
                    if spare.is_empty() {
                        // the buffer is full (pipelined requests, a body): no longer watched
                        return Between::Read;
                    }
                    match futures_lite::AsyncReadExt::read(&mut self.sock, spare).await {
                        Ok(0) | Err(_) => Between::Gone,
                        Ok(n) => {
                            self.bufs.client.commit(n);
                            Between::Read
                        }
                    }
                };
                let either = futures_lite::future::or(
                    async {
                        woken.await;
                        Between::Look
                    },
                    client,
                );
                crate::runtime::timeout::<R, _>(step, either)
                    .await
                    .unwrap_or(Between::Look)
            };
            match between {
                Between::Gone => return Waited::ClientGone,
                // bytes kept for later (a pipelined request, the body); a full buffer is no longer watched
                Between::Read => {
                    watch_client = self.bufs.client.readable().len() < self.bufs.client.capacity();
                }
                Between::Look => {}
            }
            if let Some(peer) = retry.pick(&self.bufs.key) {
                return Waited::Peer(peer);
            }
        }
    }
}
