//! The per-core scaling experiment: corelb (and nginx, when installed) with 1..N pinned workers in front of the same
//! backends, each driven by `corelb bench`; writes a CSV and an SVG chart of requests/s and p99 against workers.
//! Each front runs twice: as configured by default (its workers share one listening socket) and with
//! `listen ... reuseport` (a socket per worker, the kernel spreading connections by hash).
//!
//! ```sh
//! cargo build --release
//! cargo run --release -p corelb-benches --bin scaling -- --out target/scaling
//! ```

use plotters::prelude::*;
use std::fmt::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// What to run, from the command line.
struct Options {
    corelb: PathBuf,
    max_workers: usize,
    rounds: usize,
    duration: String,
    connections: usize,
    out: PathBuf,
    nginx: bool,
    /// Extra request headers for `corelb bench` (`Connection: close`: a new connection per request).
    headers: Vec<String>,
    /// The corelb fronts' `--runtime` (tokio, the default, or glommio).
    runtime: Option<String>,
}

const USAGE: &str = "usage: scaling [--corelb PATH] [--max-workers N] [--rounds N] [--duration D] \
                     [--connections N] [--out DIR] [--no-nginx] [--header 'NAME: VALUE']... \
                     [--runtime tokio|glommio]";

fn parse_args() -> Result<Options, String> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut o = Options {
        corelb: PathBuf::from("target/release/corelb"),
        max_workers: cpus,
        rounds: 3,
        duration: "4s".into(),
        connections: 64,
        out: PathBuf::from("target/scaling"),
        nginx: Path::new("/usr/sbin/nginx").exists(),
        headers: Vec::new(),
        runtime: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value\n{USAGE}"));
        match a.as_str() {
            "--corelb" => o.corelb = PathBuf::from(value()?),
            "--max-workers" => o.max_workers = number(&value()?)?,
            "--rounds" => o.rounds = number(&value()?)?,
            "--duration" => o.duration = value()?,
            "--connections" => o.connections = number(&value()?)?,
            "--out" => o.out = PathBuf::from(value()?),
            "--no-nginx" => o.nginx = false,
            "--header" => o.headers.push(value()?),
            "--runtime" => o.runtime = Some(value()?),
            "-h" | "--help" => return Err(USAGE.into()),
            _ => return Err(format!("unknown argument {a:?}\n{USAGE}")),
        }
    }
    if !o.corelb.exists() {
        return Err(format!(
            "{} not found: run `cargo build --release` first",
            o.corelb.display()
        ));
    }
    Ok(o)
}

fn number(s: &str) -> Result<usize, String> {
    s.parse::<usize>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("not a positive number: {s:?}"))
}

/// A free loopback port (the kernel's choice; released before use, as the shared bench tools do).
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn wait_port(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// A process group (a front or the backends, with any worker processes it forks) stopped when dropped: SIGTERM to
/// the whole group, then SIGKILL if it is still there after 5 s. Killing only the leader would orphan nginx's workers.
struct Running(Child);

impl Running {
    fn signal_group(&self, signal: &str) {
        let _ = Command::new("kill")
            .args([signal, "--", &format!("-{}", self.0.id())])
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.signal_group("-TERM");
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.signal_group("-KILL");
        let _ = self.0.wait();
    }
}

fn spawn(cpus: &str, program: &Path, args: &[&str], log: &Path) -> Result<Running, String> {
    let err = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    Command::new("taskset")
        .process_group(0)
        .arg("-c")
        .arg(cpus)
        .arg(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .map(Running)
        .map_err(|e| format!("taskset {}: {e}", program.display()))
}

fn cpu_list(cpus: &[usize]) -> String {
    cpus.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

/// One front's medians per worker count: (workers, requests/s, p99 in µs).
type Series = Vec<(usize, f64, f64)>;

/// One measured point.
struct Sample {
    front: &'static str,
    workers: usize,
    round: usize,
    rps: f64,
    p50_us: f64,
    p99_us: f64,
}

/// The fronts measured: the name in the results, whether it is nginx, and whether its `listen` has `reuseport`.
const FRONTS: [(&str, bool, bool); 4] = [
    ("corelb", false, false),
    ("corelb-reuseport", false, true),
    ("nginx", true, false),
    ("nginx-reuseport", true, true),
];

fn front_config(workers: usize, listen: u16, reuseport: bool, backends: &[u16]) -> String {
    let listen = if reuseport {
        format!("{listen} reuseport")
    } else {
        listen.to_string()
    };
    let servers: String = backends
        .iter()
        .map(|p| format!("        server 127.0.0.1:{p};\n"))
        .collect();
    format!(
        "worker_processes {workers};\nevents {{ worker_connections 4096; }}\nhttp {{\n    access_log off;\n    \
         upstream backend {{\n{servers}        keepalive 64;\n    }}\n    server {{\n        listen \
         127.0.0.1:{listen};\n        location / {{\n            proxy_pass http://backend;\n            \
         proxy_http_version 1.1;\n            proxy_set_header Connection \"\";\n        }}\n    }}\n}}\n"
    )
}

fn backend_config(ports: &[u16]) -> String {
    let servers: String = ports
        .iter()
        .map(|p| format!("    server {{ listen 127.0.0.1:{p}; location / {{ return 200 \"hello from {p}\\n\"; }} }}\n"))
        .collect();
    format!("worker_processes 1;\nevents {{ worker_connections 4096; }}\nhttp {{\n    access_log off;\n{servers}}}\n")
}

/// Runs `corelb bench` against `port` and reads requests/s, p50 and p99 from its JSON summary.
fn drive(o: &Options, port: u16, cores: &str, json: &Path) -> Result<(f64, f64, f64), String> {
    let status = Command::new(&o.corelb)
        .args([
            "bench",
            "-c",
            &o.connections.to_string(),
            "-d",
            &o.duration,
            "--warmup",
            "1s",
            "--cores",
            cores,
        ])
        .args(o.headers.iter().flat_map(|h| ["-H", h.as_str()]))
        .arg("--json")
        .arg(json)
        .arg(format!("http://127.0.0.1:{port}/"))
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("corelb bench: {e}"))?;
    if !status.success() {
        return Err(format!("corelb bench exited with {status}"));
    }
    let text = std::fs::read_to_string(json).map_err(|e| format!("{}: {e}", json.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", json.display()))?;
    let field = |path: &[&str]| -> Result<f64, String> {
        let mut cur = &v;
        for k in path {
            cur = cur.get(k).ok_or_else(|| format!("no {path:?} in {}", json.display()))?;
        }
        cur.as_f64().ok_or_else(|| format!("{path:?} is not a number"))
    };
    Ok((
        field(&["requests_per_sec"])?,
        field(&["latency_us", "p50"])?,
        field(&["latency_us", "p99"])?,
    ))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The median of one front at one worker count, over its rounds.
fn summary(samples: &[Sample], front: &str, workers: usize) -> Option<(f64, f64)> {
    let runs: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.front == front && s.workers == workers)
        .collect();
    (!runs.is_empty()).then(|| {
        (
            median(runs.iter().map(|s| s.rps).collect()),
            median(runs.iter().map(|s| s.p99_us).collect()),
        )
    })
}

fn write_csv(path: &Path, samples: &[Sample]) -> Result<(), String> {
    let mut out = String::from("front,workers,round,requests_per_sec,p50_us,p99_us\n");
    for s in samples {
        let _ = writeln!(
            out,
            "{},{},{},{:.0},{:.0},{:.0}",
            s.front, s.workers, s.round, s.rps, s.p50_us, s.p99_us
        );
    }
    std::fs::write(path, out).map_err(|e| format!("{}: {e}", path.display()))
}

fn write_svg(path: &Path, samples: &[Sample], fronts: &[&'static str], max_workers: usize) -> Result<(), String> {
    let root = SVGBackend::new(path, (960, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (left, right) = root.split_horizontally(480);
    let series: Vec<(&str, Series)> = fronts
        .iter()
        .map(|f| {
            (
                *f,
                (1..=max_workers)
                    .filter_map(|w| summary(samples, f, w).map(|(r, p)| (w, r, p)))
                    .collect(),
            )
        })
        .collect();
    let top_rps = series
        .iter()
        .flat_map(|(_, v)| v.iter().map(|x| x.1))
        .fold(1.0, f64::max)
        * 1.15;
    let top_p99 = series
        .iter()
        .flat_map(|(_, v)| v.iter().map(|x| x.2 / 1000.0))
        .fold(0.1, f64::max)
        * 1.15;
    let panels: [(&DrawingArea<_, _>, &str, &str, f64, bool); 2] = [
        (&left, "requests/s against workers", "requests/s", top_rps, true),
        (&right, "p99 latency against workers", "p99 (ms)", top_p99, false),
    ];
    for (area, title, label, top, is_rps) in panels {
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d(0.5f64..(max_workers as f64 + 0.5), 0f64..top)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("workers (pinned shards)")
            .y_desc(label)
            .x_labels(max_workers.min(16))
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| if is_rps { format!("{y:.0}") } else { format!("{y:.1}") })
            .draw()
            .map_err(|e| e.to_string())?;
        for (i, (front, points)) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let xy: Vec<(f64, f64)> = points
                .iter()
                .map(|&(w, r, p)| (w as f64, if is_rps { r } else { p / 1000.0 }))
                .collect();
            chart
                .draw_series(LineSeries::new(xy.clone(), color.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(*front)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2)));
            chart
                .draw_series(xy.iter().map(|&(x, y)| Circle::new((x, y), 3, color.filled())))
                .map_err(|e| e.to_string())?;
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE)
            .draw()
            .map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())
}

fn run(o: &Options) -> Result<(), String> {
    std::fs::create_dir_all(&o.out).map_err(|e| format!("{}: {e}", o.out.display()))?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let backends = [
        free_port().map_err(|e| e.to_string())?,
        free_port().map_err(|e| e.to_string())?,
    ];
    let bconf = o.out.join("backend.conf");
    std::fs::write(&bconf, backend_config(&backends)).map_err(|e| e.to_string())?;
    // Backends and the load generator share CPU 0; the front's workers take the highest CPUs (all of them at N=cpus).
    let _backend = spawn(
        "0",
        &o.corelb,
        &["-c", &bconf.to_string_lossy()],
        &o.out.join("backend.log"),
    )?;
    if !backends.iter().all(|p| wait_port(*p)) {
        return Err("the backends did not start (see backend.log)".into());
    }
    let fronts: Vec<&'static str> = FRONTS
        .iter()
        .filter(|(_, nginx, _)| o.nginx || !nginx)
        .map(|(name, _, _)| *name)
        .collect();
    let mut samples = Vec::new();
    for workers in 1..=o.max_workers {
        let front_cpus: Vec<usize> = (0..workers).map(|i| (cpus + cpus - 1 - i) % cpus).collect();
        let listen = free_port().map_err(|e| e.to_string())?;
        let mut confs = Vec::new();
        for reuseport in [false, true] {
            let conf = o.out.join(format!(
                "front-{workers}{}.conf",
                ["", "-reuseport"][usize::from(reuseport)]
            ));
            std::fs::write(&conf, front_config(workers, listen, reuseport, &backends)).map_err(|e| e.to_string())?;
            confs.push(conf.to_string_lossy().into_owned());
        }
        for round in 0..o.rounds {
            let mut order = fronts.clone();
            if round % 2 == 1 {
                order.reverse(); // alternate, so no front always runs first
            }
            for front in order {
                let log = o.out.join(format!("{front}-{workers}.log"));
                let dir = o.out.to_string_lossy();
                let globals = format!("daemon off; pid {dir}/nginx.pid; error_log {dir}/nginx.err;");
                let (nginx, reuseport) = FRONTS
                    .iter()
                    .find(|(name, _, _)| *name == front)
                    .map_or((false, false), |&(_, n, r)| (n, r));
                let conf = &confs[usize::from(reuseport)];
                let p = match nginx {
                    true => spawn(
                        &cpu_list(&front_cpus),
                        Path::new("/usr/sbin/nginx"),
                        &["-c", conf, "-g", &globals],
                        &log,
                    )?,
                    false => {
                        let mut args = vec!["-c", conf.as_str()];
                        if let Some(r) = &o.runtime {
                            args.extend(["--runtime", r.as_str()]);
                        }
                        spawn(&cpu_list(&front_cpus), &o.corelb, &args, &log)?
                    }
                };
                if !wait_port(listen) {
                    return Err(format!(
                        "{front} with {workers} worker(s) did not start (see {})",
                        log.display()
                    ));
                }
                let json = o.out.join(format!("{front}-{workers}-{round}.json"));
                let (rps, p50_us, p99_us) = drive(o, listen, "0", &json)?;
                eprintln!("{front:16} workers={workers} round={round}: {rps:.0} req/s, p99 {p99_us:.0} us");
                samples.push(Sample {
                    front,
                    workers,
                    round,
                    rps,
                    p50_us,
                    p99_us,
                });
                drop(p);
                std::thread::sleep(Duration::from_millis(300));
            }
        }
    }
    write_csv(&o.out.join("scaling.csv"), &samples)?;
    write_svg(&o.out.join("scaling.svg"), &samples, &fronts, o.max_workers)?;
    println!("{:16} {:>8} {:>12} {:>10}", "front", "workers", "req/s (med)", "p99 ms");
    for f in &fronts {
        for w in 1..=o.max_workers {
            if let Some((r, p)) = summary(&samples, f, w) {
                println!("{f:16} {w:>8} {r:>12.0} {:>10.3}", p / 1000.0);
            }
        }
    }
    println!(
        "wrote {} and {}",
        o.out.join("scaling.csv").display(),
        o.out.join("scaling.svg").display()
    );
    Ok(())
}

fn main() -> ExitCode {
    match parse_args().and_then(|o| run(&o)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("scaling: {e}");
            ExitCode::FAILURE
        }
    }
}
