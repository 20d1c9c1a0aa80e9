//! The bound pick: route selection, fallback, drain, backups, round robin's weights, learned sessions.

use super::*;
use crate::balance::testkit::{line, NOW};
use crate::balance::{Attempt, Outcome, ShardState, UpstreamPlan};
use crate::config::key::KeyTemplate;
use crate::config::model::{Method, ServerLine, UpstreamConf};
use crate::config::sticky::LearnConf;
use corelb_shared_state::PeerSlot;
use std::time::Duration;

const A: &str = "127.0.0.1:8081";
const B: &str = "127.0.0.1:8082";
const C: &str = "127.0.0.1:8083";

fn routed(text: &str, route: &str) -> ServerLine {
    ServerLine {
        route: Some(route.into()),
        ..line(text)
    }
}

fn route_conf() -> StickyConf {
    StickyConf {
        lookup: vec![KeyTemplate::compile("$arg_sticky").expect("template")],
        cookie: None,
        learn: None,
    }
}

fn plan_of(method: Method, servers: Vec<ServerLine>, sticky: StickyConf) -> UpstreamPlan {
    let mut conf = UpstreamConf::new("u", method, servers);
    conf.sticky = Some(Box::new(sticky));
    UpstreamPlan::build_with(&conf, || Arc::new(PeerSlot::new())).expect("plan")
}

/// One request bound to `sid` whose tries end with `script`: the peers picked.
fn run(plan: &UpstreamPlan, shard: &mut ShardState, sid: &[u8], script: &[Outcome]) -> Vec<String> {
    let mut attempt = Attempt::new(plan, 0, b"");
    attempt.bind(sid);
    let mut picks = Vec::new();
    for &outcome in script {
        let Some(peer) = attempt.pick(shard, b"", NOW) else {
            picks.push("502".to_string());
            break;
        };
        picks.push(peer.addr.to_string());
        attempt.report(outcome, shard, NOW);
        if attempt.tries_left() == 0 {
            break;
        }
    }
    picks
}

#[test]
fn server_ids_are_the_route_or_the_md5_of_the_address() {
    let addr = A.parse().expect("addr");
    assert_eq!(&*server_id(addr, None), b"df2b80dc43705d28db9be6f29fe58da3");
    assert_eq!(&*server_id(addr, Some("a")), b"a");
    let v6 = "[::1]:80".parse().expect("addr");
    assert_eq!(&*server_id(v6, None), &md5::hex(b"[::1]:80"));
}

#[test]
fn a_bound_request_goes_to_its_peer_and_an_unknown_id_to_the_balancer() {
    let plan = plan_of(
        Method::RoundRobin,
        vec![routed(A, "1"), routed(B, "2"), routed(C, "3")],
        route_conf(),
    );
    let mut shard = ShardState::seeded(&plan, 1);
    for _ in 0..5 {
        assert_eq!(run(&plan, &mut shard, b"2", &[Outcome::Success]), [B]);
    }
    // from fresh weights, an id no peer has is round robin's
    let mut shard = ShardState::seeded(&plan, 1);
    let unbound: Vec<String> = (0..3)
        .flat_map(|_| run(&plan, &mut shard, b"nope", &[Outcome::Success]))
        .collect();
    assert_eq!(unbound, [A, B, C]);
}

#[test]
fn a_failed_bound_peer_passes_to_the_balancer_and_is_not_tried_again() {
    let plan = plan_of(Method::LeastConn, vec![routed(A, "1"), routed(B, "2")], route_conf());
    let mut shard = ShardState::seeded(&plan, 1);
    assert_eq!(
        run(&plan, &mut shard, b"1", &[Outcome::Failed, Outcome::Success]),
        [A, B]
    );
    // A is failed (max_fails 1) for its fail_timeout: the bound request goes elsewhere
    assert_eq!(run(&plan, &mut shard, b"1", &[Outcome::Success]), [B]);
}

#[test]
fn a_draining_peer_takes_only_bound_requests_and_a_down_one_none() {
    let servers = vec![
        ServerLine {
            drain: true,
            ..routed(A, "1")
        },
        routed(B, "2"),
        ServerLine {
            down: true,
            ..routed(C, "3")
        },
    ];
    let plan = plan_of(Method::RoundRobin, servers, route_conf());
    let mut shard = ShardState::seeded(&plan, 1);
    for _ in 0..4 {
        assert_eq!(run(&plan, &mut shard, b"", &[Outcome::Success]), [B]);
        assert_eq!(run(&plan, &mut shard, b"1", &[Outcome::Success]), [A]);
        assert_eq!(run(&plan, &mut shard, b"3", &[Outcome::Success]), [B]);
    }
    // a lone draining server: bound requests only, others get a 502
    let single = plan_of(
        Method::RoundRobin,
        vec![ServerLine {
            drain: true,
            ..routed(A, "1")
        }],
        route_conf(),
    );
    let mut shard = ShardState::seeded(&single, 1);
    assert_eq!(run(&single, &mut shard, b"1", &[Outcome::Success]), [A]);
    assert_eq!(run(&single, &mut shard, b"", &[Outcome::Success]), ["502"]);
}

#[test]
fn backups_are_reached_by_id_once_the_primaries_are_out() {
    let backup = |t: &str, r: &str| ServerLine {
        backup: true,
        ..routed(t, r)
    };
    let plan = plan_of(
        Method::RoundRobin,
        vec![routed(A, "1"), backup(B, "2"), backup(C, "3")],
        route_conf(),
    );
    let mut shard = ShardState::seeded(&plan, 1);
    // the primary is alive: a backup's id does not reach it
    assert_eq!(run(&plan, &mut shard, b"3", &[Outcome::Success]), [A]);
    // the primary fails: the switch to the backups takes the bound one
    assert_eq!(
        run(&plan, &mut shard, b"3", &[Outcome::Failed, Outcome::Success]),
        [A, C]
    );
    assert_eq!(run(&plan, &mut shard, b"3", &[Outcome::Success]), [C]);
}

#[test]
fn round_robin_weights_move_as_nginx_s_for_bound_picks() {
    let plan = plan_of(
        Method::RoundRobin,
        vec![routed(A, "1"), routed(B, "2"), routed(C, "3")],
        route_conf(),
    );
    let mut shard = ShardState::seeded(&plan, 1);
    // low limit: -(3 - 1) = -2. The first bound pick runs a pass (every current +1) and A gives back 3.
    run(&plan, &mut shard, b"1", &[Outcome::Success]);
    assert_eq!(shard.primary.current, [-2, 1, 1]);
    // at the limit: no change
    run(&plan, &mut shard, b"1", &[Outcome::Success]);
    assert_eq!(shard.primary.current, [-2, 1, 1]);
    // an unbound pick: B wins the pass (B first of the tied)
    run(&plan, &mut shard, b"", &[Outcome::Success]);
    assert_eq!(shard.primary.current, [-1, -1, 2]);
}

#[test]
fn learned_sessions_bind_later_requests_and_expire() {
    let learn = StickyConf {
        lookup: vec![KeyTemplate::compile("$cookie_sid").expect("template")],
        cookie: None,
        learn: Some(LearnConf {
            create: vec![KeyTemplate::compile("$upstream_cookie_sid").expect("template")],
            zone: "z".into(),
            size: 1 << 20,
            timeout: Duration::from_secs(2),
            header: false,
        }),
    };
    let plan = plan_of(Method::RoundRobin, vec![line(A), line(B)], learn);
    let sticky = plan.sticky.as_deref().expect("sticky plan");
    let mut b = StickyBufs::default();
    b.id.extend_from_slice(b"value1");
    assert_eq!(sticky.bound_sid(&b, 1000), None);
    // B answered with `Set-Cookie: sid=value1`
    struct Answer;
    impl VarSource for Answer {
        fn append(&self, var: &Var, out: &mut Vec<u8>) {
            if matches!(var, Var::UpstreamCookie(n) if n == "sid") {
                out.extend_from_slice(b"value1");
            }
        }
    }
    b.create_ends.push(0);
    sticky.on_try(
        Choice {
            list: ListKind::Primary,
            index: 1,
        },
        &mut b,
    );
    let mut head = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
    sticky.answer(&mut head, &Answer, &mut b);
    assert_eq!(head, b"HTTP/1.1 200 OK\r\n\r\n", "no cookie in learn mode");
    sticky.learn(&b, 1000);
    let sid = sticky.bound_sid(&b, 2999).expect("a live session");
    assert_eq!(sid.as_bytes(), &server_id(B.parse().expect("addr"), None)[..]);
    assert_eq!(sticky.resolve(sid.as_bytes()), [Some(1), None]);
    assert_eq!(sticky.bound_sid(&b, 3000), None, "expired 2 s after its last use");
}

#[test]
fn the_cookie_names_the_peer_that_answered() {
    let conf = StickyConf {
        lookup: vec![KeyTemplate::compile("$cookie_s").expect("template")],
        cookie: Some(crate::config::sticky::CookieConf {
            name: "s".into(),
            expires: None,
            domain: None,
            path: Some("/".into()),
            samesite: None,
            httponly: true,
            secure: false,
        }),
        learn: None,
    };
    let plan = plan_of(Method::RoundRobin, vec![line(A), line(B)], conf);
    let sticky = plan.sticky.as_deref().expect("sticky plan");
    let mut b = StickyBufs::default();
    struct NoVars;
    impl VarSource for NoVars {
        fn append(&self, _: &Var, _: &mut Vec<u8>) {}
    }
    sticky.prepare(&NoVars, NOW, &mut b);
    sticky.on_try(
        Choice {
            list: ListKind::Primary,
            index: 0,
        },
        &mut b,
    );
    let mut head = b"HTTP/1.1 200 OK\r\nX: 1\r\n\r\n".to_vec();
    sticky.answer(&mut head, &NoVars, &mut b);
    assert_eq!(
        String::from_utf8(head).expect("text"),
        "HTTP/1.1 200 OK\r\nX: 1\r\nSet-Cookie: s=df2b80dc43705d28db9be6f29fe58da3; httponly; path=/\r\n\r\n"
    );
}
