//! A stream server's `return VALUE` (nginx's `ngx_stream_return_module`): the value, put together with the
//! session's variables, is sent to the client and the session ends (status 200; nothing of the client is read).

use crate::access_log::stream::{StreamRecord, OK};
use crate::config::stream_format::StreamFormat;
use crate::runtime::{io_timeout, Runtime};
use crate::shard::Shard;
use crate::snapshot::Snapshot;
use futures_lite::AsyncWriteExt;
use std::time::Duration;

/// nginx's timer on a `return` write that cannot finish at once.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// Sends `value` to `client` and closes its write side; the bytes sent go into `rec`.
pub async fn answer<R: Runtime>(
    shard: &Shard<R>,
    snap: &Snapshot,
    client: &mut R::Conn,
    value: &StreamFormat,
    rec: &mut StreamRecord,
) {
    let mut text = std::mem::take(&mut rec.text);
    text.clear();
    match value.fixed() {
        Some(fixed) => text.extend_from_slice(fixed),
        None => shard.render_stream_value(snap, value, rec, &mut text),
    }
    // As nginx, `$status` in the value is `000`: the session has no status until it ends.
    rec.status = OK;
    let mut sent = 0;
    while sent < text.len() {
        let rest = text.get(sent..).unwrap_or_default();
        match io_timeout::<R, _>(SEND_TIMEOUT, client.write(rest)).await {
            Ok(0) | Err(_) => break,
            Ok(n) => sent += n,
        }
    }
    rec.bytes_sent = sent as u64;
    let _ = io_timeout::<R, _>(SEND_TIMEOUT, client.close()).await;
    rec.text = text;
}
