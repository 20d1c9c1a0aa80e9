//! `endpoint_load_metrics`: the ORCA load report in a proxied response's head, kept in its peer's zone slot for the
//! upstream's agent checker to turn into a weight (read only in upstreams that enable it).

use crate::health::agent_reply::LoadMetrics;
use corelb_shared_state::PeerSlot;

/// Stores the last `endpoint-load-metrics` report of the response head `head` in `slot` (a head without one, or
/// with one in another form than `TEXT`, leaves the slot as it was).
pub fn record(slot: &PeerSlot, head: &[u8]) {
    let mut headers = [httparse::EMPTY_HEADER; crate::http::response::MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    if !matches!(resp.parse(head), Ok(httparse::Status::Complete(_))) {
        return;
    }
    let reports = resp
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("endpoint-load-metrics"))
        .filter_map(|h| LoadMetrics::parse(h.value));
    for r in reports {
        slot.agent().report(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corelb_shared_state::LoadReport;

    #[test]
    fn the_header_s_report_goes_to_the_slot() {
        let slot = PeerSlot::new();
        record(&slot, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(slot.agent().last_report(), LoadReport::default());
        let head = b"HTTP/1.1 200 OK\r\nEndpoint-Load-Metrics: TEXT cpu_utilization=0.3, mem_utilization=0.5\r\n\r\n";
        record(&slot, head);
        let want = LoadReport {
            cpu: Some(0.3),
            mem: Some(0.5),
        };
        assert_eq!(slot.agent().last_report(), want);
        record(&slot, b"HTTP/1.1 200 OK\r\nendpoint-load-metrics: BIN AAAA\r\n\r\n");
        assert_eq!(slot.agent().last_report(), want, "another form changes nothing");
    }
}
