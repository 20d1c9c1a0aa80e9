//! Request-head parse cost per request with the data plane's parser (`http::request::parse_request`): a minimal
//! GET, a browser-like GET with a dozen headers, and a POST with a body length.

use corelb_engine::http::request::{parse_request, MAX_HEADERS};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;

const HEADS: [(&str, &[u8]); 3] = [
    ("minimal_get", b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"),
    (
        "browser_get",
        b"GET /static/app.js?v=12 HTTP/1.1\r\nHost: www.example.com\r\nUser-Agent: Mozilla/5.0 (X11; Linux \
          x86_64; rv:120.0) Gecko/20100101 Firefox/120.0\r\nAccept: */*\r\nAccept-Language: en-US,en;q=0.5\r\n\
          Accept-Encoding: gzip, deflate, br\r\nReferer: https://www.example.com/\r\nConnection: keep-alive\r\n\
          Cookie: session=0123456789abcdef; theme=dark\r\nSec-Fetch-Dest: script\r\nSec-Fetch-Mode: no-cors\r\n\
          Sec-Fetch-Site: same-origin\r\nPragma: no-cache\r\nCache-Control: no-cache\r\n\r\n",
    ),
    (
        "post_with_length",
        b"POST /api/v1/items HTTP/1.1\r\nHost: api.example.com\r\nContent-Type: application/json\r\n\
          Content-Length: 27\r\nAuthorization: Bearer abcdef\r\n\r\n",
    ),
];

fn request_head(c: &mut Criterion) {
    let mut group = c.benchmark_group("request_head_parse");
    for (name, head) in HEADS {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        assert!(
            matches!(parse_request(head, &mut headers), Ok(Some(_))),
            "{name} parses"
        );
        group.throughput(Throughput::Bytes(head.len() as u64));
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
                let parsed = parse_request(black_box(head), &mut headers);
                black_box(parsed.map(|h| h.map(|h| (h.head_len, h.keepalive))))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, request_head);
criterion_main!(benches);
