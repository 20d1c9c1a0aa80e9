//! Location regexes with corelb's engine (`config::regex`): the compile cost at load and the per-request match
//! (`is_match` and `captures_into`) of typical patterns over a matching and a non-matching path.

use corelb_engine::config::regex::{compile, Captures};
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;

const PATTERNS: [(&str, &str, bool); 4] = [
    ("php", r"\.php$", false),
    ("api_version", r"^/api/v[0-9]+/", false),
    ("static_ext", r"\.(jpg|png|css|js)$", false),
    ("static_ext_caseless", r"\.(jpg|png|css|js)$", true),
];

const PATHS: [(&str, &[u8]); 2] = [
    ("hit", b"/api/v12/static/img/logo.png"),
    ("miss", b"/some/long/path/that/does/not/match/anything/at/all.html"),
];

fn regexes(c: &mut Criterion) {
    let mut group = c.benchmark_group("location_regex");
    for (name, pattern, caseless) in PATTERNS {
        group.bench_function(format!("{name}/compile"), |b| {
            b.iter(|| compile(black_box(pattern), caseless).map(|r| r.captures_len()))
        });
        let re = compile(pattern, caseless).expect("the pattern compiles");
        let mut caps = Captures::default();
        for (path_name, path) in PATHS {
            group.bench_function(format!("{name}/is_match/{path_name}"), |b| {
                b.iter(|| re.is_match(black_box(path)))
            });
            group.bench_function(format!("{name}/captures/{path_name}"), |b| {
                b.iter(|| re.captures_into(black_box(path), &mut caps))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, regexes);
criterion_main!(benches);
