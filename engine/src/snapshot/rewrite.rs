//! A server's or location's rewrite script compiled at load (`return` answers pre-rendered) and run per request
//! as nginx's rewrite phase runs it: in order, `if` blocks when their condition holds, `rewrite`s replacing the
//! URI, until a `return` or a redirect answers or a `break` (or the end) lets the request go on.

use super::captures::WithCaptures;
use super::headers::HeadersPlan;
use super::route::FixedAnswer;
use super::user_vars::Names;
use crate::config::headers::ServerTokens;
use crate::config::key::{KeyTemplate, VarSource};
use crate::config::model::Return;
use crate::config::regex::{Captures, Regex};
use crate::config::rewrite::{Cond, FileTest, Piece, RewriteFlag, RewriteOp, SetTarget};
use crate::http::user_vars::UserVars;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;

/// A compiled script.
#[derive(Debug)]
pub struct Script {
    ops: Vec<Op>,
}

#[derive(Debug)]
enum Op {
    Return(FixedAnswer),
    Break,
    If {
        cond: Cond,
        then: Vec<Op>,
    },
    Rewrite {
        regex: Regex,
        replacement: Vec<Piece>,
        flag: RewriteFlag,
        drop_args: bool,
        /// The redirect's answer (its `Location` is written per request).
        redirect: Option<FixedAnswer>,
    },
    Set {
        target: SetTarget,
        value: Vec<Piece>,
    },
}

/// How a script ended.
#[derive(Debug, Clone, Copy)]
pub enum Outcome<'s> {
    /// Its end or a `break`: the request goes on (to the location search, or the location's handler).
    Next,
    /// A `return`.
    Answer(&'s FixedAnswer),
    /// A redirecting `rewrite`: the answer, with `Location:` the value left in [`RunCx::new_uri`].
    Redirect(&'s FixedAnswer),
    /// The URI was replaced (it is in [`RunCx::new_uri`]); `search`: a location is searched again for it (`last`,
    /// or no flag), else the request stays in its location (`break`).
    Rewritten { search: bool },
}

/// How a run of ops ended.
enum Flow<'s> {
    Go,
    Stop(Outcome<'s>),
}

/// What a run needs of the request: its variables, two reused buffers for values, the captures.
pub struct RunCx<'a> {
    pub vars: &'a dyn VarSource,
    /// The URI the script starts with, and the request's arguments (appended to a redirect).
    pub uri: &'a [u8],
    pub args: &'a [u8],
    /// The URI (or redirect target) a `rewrite` made.
    pub new_uri: &'a mut Vec<u8>,
    /// Whether `new_uri` holds the URI (replaced before this run or by it): the subject of `rewrite`s.
    pub changed: bool,
    /// Whether a `rewrite` of this run replaced the URI.
    pub rewrote: bool,
    pub scratch: &'a mut Vec<u8>,
    /// For the second value of a comparison.
    pub other: &'a mut Vec<u8>,
    pub caps: &'a mut Captures,
    /// Where `set` writes (the request's variables read them).
    pub users: &'a UserVars,
}

/// What compiling a level's script needs: the block's variable names, and the level's `server_tokens` and
/// `add_header` lines (its answers carry them).
#[derive(Clone, Copy)]
struct Level<'a> {
    names: Names<'a>,
    tokens: ServerTokens,
    headers: &'a HeadersPlan,
}

impl Script {
    /// The script of `ops`, or `None` when there is nothing to run; its answers are the level's (`tokens`,
    /// `headers`), their texts compiled with `names`.
    pub fn compile(ops: &[RewriteOp], names: Names<'_>, tokens: ServerTokens, headers: &HeadersPlan) -> Option<Script> {
        let level = Level { names, tokens, headers };
        (!ops.is_empty()).then(|| Script {
            ops: compile_ops(ops, level),
        })
    }

    /// Runs the script for one request.
    pub fn run(&self, cx: &mut RunCx<'_>) -> Outcome<'_> {
        match run_ops(&self.ops, cx) {
            Flow::Go if cx.rewrote => Outcome::Rewritten { search: true },
            Flow::Go => Outcome::Next,
            Flow::Stop(o) => o,
        }
    }
}

fn compile_ops(ops: &[RewriteOp], level: Level<'_>) -> Vec<Op> {
    ops.iter()
        .map(|op| match op {
            RewriteOp::Return(r) => {
                Op::Return(super::return_text::answer(r, level.names, level.tokens).with_headers(level.headers.clone()))
            }
            RewriteOp::Break => Op::Break,
            RewriteOp::Set { target, value } => Op::Set {
                target: *target,
                value: value.clone(),
            },
            RewriteOp::If { cond, then } => Op::If {
                cond: cond.clone(),
                then: compile_ops(then, level),
            },
            RewriteOp::Rewrite {
                regex,
                replacement,
                flag,
                drop_args,
            } => Op::Rewrite {
                regex: regex.clone(),
                replacement: replacement.clone(),
                flag: *flag,
                drop_args: *drop_args,
                redirect: match flag {
                    RewriteFlag::Redirect(code) => Some(
                        FixedAnswer::of_return(
                            &Return {
                                code: *code,
                                text: None,
                            },
                            level.tokens,
                        )
                        .with_headers(level.headers.clone()),
                    ),
                    _ => None,
                },
            },
        })
        .collect()
}

fn run_ops<'s>(ops: &'s [Op], cx: &mut RunCx<'_>) -> Flow<'s> {
    for op in ops {
        match op {
            Op::Return(answer) => return Flow::Stop(Outcome::Answer(answer)),
            Op::Break if cx.rewrote => return Flow::Stop(Outcome::Rewritten { search: false }),
            Op::Break => return Flow::Stop(Outcome::Next),
            Op::Rewrite {
                regex,
                replacement,
                flag,
                drop_args,
                redirect,
            } => {
                let subject: &[u8] = if cx.changed { cx.new_uri } else { cx.uri };
                if !regex.captures_into(subject, cx.caps) {
                    continue;
                }
                render(replacement, cx);
                std::mem::swap(cx.new_uri, cx.other);
                if !matches!(flag, RewriteFlag::Redirect(_)) {
                    cx.changed = true;
                    cx.rewrote = true;
                }
                match (flag, redirect) {
                    (RewriteFlag::Redirect(_), Some(answer)) => {
                        if !*drop_args && !cx.args.is_empty() {
                            cx.new_uri.push(if cx.new_uri.contains(&b'?') { b'&' } else { b'?' });
                            cx.new_uri.extend_from_slice(cx.args);
                        }
                        super::absolute_location::complete(answer.headers.redirect_style(), cx.vars, cx.new_uri);
                        return Flow::Stop(Outcome::Redirect(answer));
                    }
                    (RewriteFlag::Last, _) => return Flow::Stop(Outcome::Rewritten { search: true }),
                    (RewriteFlag::Break, _) => return Flow::Stop(Outcome::Rewritten { search: false }),
                    _ => {}
                }
            }
            Op::Set { target, value } => {
                render(value, cx);
                match target {
                    SetTarget::User(i) => cx.users.set(*i, cx.other),
                    SetTarget::LimitRate => {
                        cx.users.set_limit_rate(cx.other);
                    }
                }
            }
            Op::If { cond, then } => {
                if holds(cond, cx) {
                    if let Flow::Stop(o) = run_ops(then, cx) {
                        return Flow::Stop(o);
                    }
                }
            }
        }
    }
    Flow::Go
}

/// Writes `pieces` into [`RunCx::other`] (cleared first).
fn render(pieces: &[Piece], cx: &mut RunCx<'_>) {
    cx.other.clear();
    for piece in pieces {
        match piece {
            Piece::Text(t) => cx.other.extend_from_slice(t),
            Piece::Capture(i) => cx.other.extend_from_slice(cx.caps.group(*i)),
            Piece::Var(v) => WithCaptures {
                vars: cx.vars,
                caps: cx.caps,
            }
            .append(v, cx.other),
        }
    }
}

/// Evaluates `t` into the scratch buffer.
fn eval<'b>(t: &KeyTemplate, cx: &'b mut RunCx<'_>) -> &'b [u8] {
    t.eval_into(
        &WithCaptures {
            vars: cx.vars,
            caps: cx.caps,
        },
        cx.scratch,
    );
    cx.scratch
}

fn holds(cond: &Cond, cx: &mut RunCx<'_>) -> bool {
    match cond {
        Cond::Var(t) => {
            let v = eval(t, cx);
            !(v.is_empty() || v == b"0")
        }
        Cond::Equals { value, to, negate } => {
            let vars = WithCaptures {
                vars: cx.vars,
                caps: cx.caps,
            };
            value.eval_into(&vars, cx.scratch);
            to.eval_into(&vars, cx.other);
            (cx.scratch == cx.other) != *negate
        }
        Cond::Matches { value, regex, negate } => matches(regex, value, cx) != *negate,
        Cond::File { path, test, negate } => file_test(eval(path, cx), *test) != *negate,
    }
}

fn matches(regex: &Regex, value: &KeyTemplate, cx: &mut RunCx<'_>) -> bool {
    value.eval_into(
        &WithCaptures {
            vars: cx.vars,
            caps: cx.caps,
        },
        cx.scratch,
    );
    regex.captures_into(cx.scratch, cx.caps)
}

/// nginx's `ngx_http_script_file_code` tests, following symlinks; a path that cannot be stat'ed passes none.
fn file_test(path: &[u8], test: FileTest) -> bool {
    let Ok(meta) = std::fs::metadata(std::ffi::OsStr::from_bytes(path)) else {
        return false;
    };
    match test {
        FileTest::Plain => meta.is_file(),
        FileTest::Dir => meta.is_dir(),
        FileTest::Exists => true,
        FileTest::Exec => meta.permissions().mode() & 0o111 != 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::key::Var;
    use crate::config::model::Return;
    use crate::config::regex::compile;

    /// `$arg_c` is "foo", user variables are read from `users`, every other variable is empty.
    struct Args<'a> {
        users: &'a UserVars,
    }
    impl VarSource for Args<'_> {
        fn append(&self, var: &Var, out: &mut Vec<u8>) {
            match var {
                Var::Arg(a) if a == "c" => out.extend_from_slice(b"foo"),
                Var::User(i) => self.users.append(*i, out),
                _ => {}
            }
        }
    }

    fn t(raw: &str) -> KeyTemplate {
        KeyTemplate::compile(raw).unwrap()
    }

    fn ret(code: u16) -> RewriteOp {
        RewriteOp::Return(Return { code, text: None })
    }

    fn run(ops: Vec<RewriteOp>) -> Option<u16> {
        run_with(ops, &UserVars::default())
    }

    fn run_with(ops: Vec<RewriteOp>, users: &UserVars) -> Option<u16> {
        let script = Script::compile(&ops, Names::default(), ServerTokens::On, &HeadersPlan::default()).unwrap();
        let (mut scratch, mut other, mut caps) = (Vec::new(), Vec::new(), Captures::default());
        let mut new_uri = Vec::new();
        let vars = Args { users };
        let mut cx = RunCx {
            vars: &vars,
            uri: b"/",
            args: b"",
            new_uri: &mut new_uri,
            changed: false,
            rewrote: false,
            scratch: &mut scratch,
            other: &mut other,
            caps: &mut caps,
            users,
        };
        match script.run(&mut cx) {
            Outcome::Next | Outcome::Rewritten { .. } => None,
            Outcome::Answer(a) | Outcome::Redirect(a) => Some(a.status),
        }
    }

    fn when(cond: Cond, then: Vec<RewriteOp>) -> RewriteOp {
        RewriteOp::If { cond, then }
    }

    #[test]
    fn conditions_hold_as_nginx_tests_them() {
        let cases = [
            (Cond::Var(t("$arg_c")), true),
            (Cond::Var(t("$arg_d")), false),
            (Cond::Var(t("0")), false),
            (
                Cond::Equals {
                    value: t("$arg_c"),
                    to: t("foo"),
                    negate: false,
                },
                true,
            ),
            (
                Cond::Equals {
                    value: t("$arg_c"),
                    to: t("fo"),
                    negate: false,
                },
                false,
            ),
            (
                Cond::Equals {
                    value: t("$arg_c"),
                    to: t("2"),
                    negate: true,
                },
                true,
            ),
            (
                Cond::Matches {
                    value: t("$arg_c"),
                    regex: compile("^F", true).unwrap(),
                    negate: false,
                },
                true,
            ),
            (
                Cond::Matches {
                    value: t("$arg_c"),
                    regex: compile("^F", false).unwrap(),
                    negate: false,
                },
                false,
            ),
            (
                Cond::Matches {
                    value: t("$arg_c"),
                    regex: compile("^F", false).unwrap(),
                    negate: true,
                },
                true,
            ),
            (
                Cond::File {
                    path: t("/"),
                    test: FileTest::Dir,
                    negate: false,
                },
                true,
            ),
            (
                Cond::File {
                    path: t("/"),
                    test: FileTest::Plain,
                    negate: false,
                },
                false,
            ),
            (
                Cond::File {
                    path: t("/nonexistent/$arg_c"),
                    test: FileTest::Exists,
                    negate: true,
                },
                true,
            ),
            (
                Cond::File {
                    path: t("/bin/sh"),
                    test: FileTest::Exec,
                    negate: false,
                },
                true,
            ),
        ];
        for (cond, want) in cases {
            let got = run(vec![when(cond.clone(), vec![ret(204)])]);
            assert_eq!(got, want.then_some(204), "{cond:?}");
        }
    }

    #[test]
    fn order_break_and_fall_through() {
        let yes = || Cond::Var(t("$arg_c"));
        let no = || Cond::Var(t("$arg_d"));
        // a true `if` without a return goes on after its block
        assert_eq!(run(vec![when(yes(), vec![]), ret(201)]), Some(201));
        assert_eq!(run(vec![when(no(), vec![ret(204)]), ret(201)]), Some(201));
        assert_eq!(run(vec![when(yes(), vec![ret(204)]), ret(201)]), Some(204));
        // `break` ends the whole script, inside an `if` too
        assert_eq!(run(vec![when(yes(), vec![RewriteOp::Break, ret(204)]), ret(201)]), None);
        assert_eq!(run(vec![RewriteOp::Break, ret(201)]), None);
        assert_eq!(run(vec![when(no(), vec![ret(204)])]), None);
    }

    fn set(slot: usize, value: Vec<Piece>) -> RewriteOp {
        RewriteOp::Set {
            target: SetTarget::User(slot),
            value,
        }
    }

    #[test]
    fn set_runs_in_order_with_if() {
        let users = UserVars::default();
        users.begin();
        let text = |t: &str| Piece::Text(t.as_bytes().to_vec());
        let var = |i| Piece::Var(Var::User(i));
        let is = |i, v: &str| Cond::Equals {
            value: KeyTemplate::compile_with(&format!("$u{i}"), &|n| {
                n.strip_prefix('u').and_then(|d| d.parse().ok()).map(Var::User)
            })
            .unwrap(),
            to: t(v),
            negate: false,
        };
        // set $u0 a; set $u0 "${u0}b$arg_c"; if ($u0 = abfoo) { set $u1 yes; } if ($u1 = yes) { return 204; }
        let ops = vec![
            set(0, vec![text("a")]),
            set(0, vec![var(0), text("b"), Piece::Var(Var::Arg("c".into()))]),
            when(is(0, "abfoo"), vec![set(1, vec![text("yes")])]),
            when(is(1, "yes"), vec![ret(204)]),
            ret(201),
        ];
        assert_eq!(run_with(ops.clone(), &users), Some(204));
        let mut out = Vec::new();
        users.append(0, &mut out);
        assert_eq!(out, b"abfoo");
        // a set after the return never runs; an unset variable compares as empty
        users.begin();
        let ops = vec![when(is(1, ""), vec![ret(200)]), set(1, vec![text("late")])];
        assert_eq!(run_with(ops, &users), Some(200));
        out.clear();
        users.append(1, &mut out);
        assert_eq!(out, b"");
        // $limit_rate takes a size; a bad one changes nothing
        users.begin();
        let rate = |v: &str| RewriteOp::Set {
            target: SetTarget::LimitRate,
            value: vec![text(v)],
        };
        assert_eq!(run_with(vec![rate("40k"), rate("bad")], &users), None);
        assert_eq!(users.limit_rate(), Some(40960));
    }
}
