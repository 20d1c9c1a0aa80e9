//! How many of 10,000 keys move to another peer when one peer of 10 is added or removed, for the consistent-hash
//! ring (`hash KEY consistent`), Maglev (`hash KEY maglev`) and plain `hash`, over the same plans and picks the
//! proxy runs (the simulator of `corelb pick`). Prints the table BENCHMARKS.md shows
//! (`cargo test -p corelb-engine --test key_movement -- --nocapture`) and checks its bounds: the ring and Maglev move
//! about the share the change must move (1/11 added, 1/10 removed), plain hash most keys.

use corelb_engine::balance::UpstreamPlan;
use corelb_engine::config::parse_str;
use corelb_engine::simulate::{self, Backends, Hop, RetryPolicy, Simulator};
use corelb_shared_state::Zone;
use std::net::SocketAddr;
use std::path::Path;

const KEYS: usize = 10_000;

/// The peer each of the keys goes to, with `method` over the ports `ports`.
fn picks(method: &str, ports: &[u16]) -> Vec<SocketAddr> {
    let servers: String = ports.iter().map(|p| format!("server 127.0.0.1:{p};")).collect();
    let text = format!(
        "events {{}}\nhttp {{ upstream u {{ {method}; {servers} }} server {{ listen 127.0.0.1:1; location / {{ proxy_pass http://u; }} }} }}"
    );
    let config = parse_str(&text, Path::new("t.conf")).unwrap_or_else(|e| panic!("{e}"));
    let located = simulate::locate(&config, "u", None).expect("upstream");
    let plan = UpstreamPlan::build(located.upstream, &Zone::new()).expect("plan");
    let mut sim = Simulator::new(
        &plan,
        RetryPolicy::default_for(simulate::Context::Http),
        Backends::new(),
    );
    (0..KEYS)
        .map(|k| {
            let r = sim.run_with_key(format!("key-{k}").as_bytes(), false, false, 0);
            match r.hops.first() {
                Some(Hop::Peer { addr, .. }) => *addr,
                other => panic!("no peer for key {k}: {other:?}"),
            }
        })
        .collect()
}

fn moved(a: &[SocketAddr], b: &[SocketAddr]) -> usize {
    a.iter().zip(b).filter(|(x, y)| x != y).count()
}

#[test]
fn keys_that_move_when_one_peer_of_ten_comes_or_goes() {
    let ten: Vec<u16> = (8001..=8010).collect();
    let eleven: Vec<u16> = (8001..=8011).collect();
    let nine: Vec<u16> = (8001..=8009).collect();
    println!("| method | one added (10 -> 11) | one removed (10 -> 9) |");
    println!("|---|---|---|");
    for (method, bounded) in [
        ("hash $arg_k consistent", true),
        ("hash $arg_k maglev", true),
        ("hash $arg_k", false),
    ] {
        let base = picks(method, &ten);
        let (added, removed) = (
            moved(&base, &picks(method, &eleven)),
            moved(&base, &picks(method, &nine)),
        );
        let pct = |n: usize| format!("{n} ({:.1}%)", n as f64 * 100.0 / KEYS as f64);
        println!("| `{method}` | {} | {} |", pct(added), pct(removed));
        // removing a peer moves at least its own keys (about a tenth)
        assert!(removed >= KEYS / 20, "{method}: {removed}");
        if bounded {
            // the ideal is 1/11 (909) and 1/10 (1000): at most twice that
            assert!(
                added <= 2 * KEYS / 11 && removed <= 2 * KEYS / 10,
                "{method}: {added} {removed}"
            );
        } else {
            assert!(added > KEYS / 2 && removed > KEYS / 2, "{method}: {added} {removed}");
        }
    }
}
