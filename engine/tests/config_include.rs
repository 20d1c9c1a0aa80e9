//! `include`: relative paths against the main file's directory, globs expanded in sorted order (hidden files
//! skipped, no match is fine), errors placed in the file that has them, and the main file's own open error.

use corelb_engine::config::{self, model::Method};
use std::fs;
use std::path::{Path, PathBuf};

/// A fresh directory tree for one test.
fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("corelb-include-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn write(path: &Path, text: &str) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).expect("mkdir");
    }
    fs::write(path, text).expect("write");
}

#[test]
fn config_glob_includes_in_sorted_order() {
    let dir = scratch("glob");
    write(&dir.join("conf.d/b.conf"), "upstream b { server 127.0.0.1:2; }\n");
    write(&dir.join("conf.d/a.conf"), "upstream a { server 127.0.0.1:1; }\n");
    write(&dir.join("conf.d/B.conf"), "upstream cap { server 127.0.0.1:3; }\n");
    write(&dir.join("conf.d/.hidden.conf"), "this is not nginx syntax\n");
    write(&dir.join("conf.d/notes.txt"), "neither is this\n");
    write(&dir.join("events.conf"), "worker_connections 64;\n");
    let main = dir.join("corelb.conf");
    write(
        &main,
        "events { include events.conf; }\nhttp {\n include conf.d/*.conf;\n include none/*.conf;\n}\n",
    );
    let c = config::load(&main).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.main.worker_connections, 64);
    let names: Vec<&str> = c
        .http
        .as_ref()
        .unwrap()
        .upstreams
        .iter()
        .map(|u| u.name.as_str())
        .collect();
    // Byte order, as glob(3) sorts in the C locale: upper case first.
    assert_eq!(names, ["cap", "a", "b"]);
    let a = &c.http.as_ref().unwrap().upstreams[1];
    assert_eq!(a.span.file, dir.join("conf.d/a.conf"));
    assert_eq!(a.span.line, 1);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn config_relative_paths_resolve_against_the_main_file_not_the_cwd() {
    let dir = scratch("relative");
    write(&dir.join("etc/ups/pool.conf"), "server 127.0.0.1:1;\nleast_conn;\n");
    let main = dir.join("etc/corelb.conf");
    write(&main, "events {}\nhttp { upstream pool { include ups/pool.conf; } }\n");
    let c = config::load(&main).unwrap_or_else(|e| panic!("{e}"));
    let u = c.http.as_ref().unwrap().upstream("pool").unwrap();
    assert_eq!(u.method, Method::LeastConn);
    // parse_str reads includes relative to the path it is given, too.
    let text = fs::read_to_string(&main).unwrap();
    let c2 = config::parse_str(&text, &main).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c2.http.unwrap().upstreams, c.http.unwrap().upstreams);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn config_a_missing_include_is_nginx_open_error_at_the_include_line() {
    let dir = scratch("missing");
    let main = dir.join("corelb.conf");
    write(&main, "events {}\n\ninclude sites/missing.conf;\n");
    let e = config::load(&main).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "[emerg] open() \"{}\" failed (2: No such file or directory) in {}:3",
            dir.join("sites/missing.conf").display(),
            main.display()
        )
    );
    assert_eq!((e.line(), e.file()), (Some(3), Some(main.as_path())));
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn config_the_main_file_missing_has_no_line() {
    let path = std::env::temp_dir().join(format!("corelb-no-such-{}.conf", std::process::id()));
    let e = config::load(&path).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "[emerg] open() \"{}\" failed (2: No such file or directory)",
            path.display()
        )
    );
    assert_eq!((e.line(), e.file()), (None, Some(path.as_path())));
}

#[test]
fn config_errors_inside_an_included_file_name_that_file() {
    let dir = scratch("inner");
    write(
        &dir.join("bad.conf"),
        "\n\nupstream u { server 127.0.0.1:1 weight=0; }\n",
    );
    write(&dir.join("brace.conf"), "server { }\n}\n");
    let main = dir.join("corelb.conf");
    write(&main, "events {}\nhttp { include bad.conf; }\n");
    let e = config::load(&main).unwrap_err();
    let bad = dir.join("bad.conf");
    assert_eq!(
        e.to_string(),
        format!("[emerg] invalid parameter \"weight=0\" in {}:3", bad.display())
    );
    assert_eq!(e.file(), Some(bad.as_path()));
    // An included file is a whole file: a `}` it does not open is unexpected there.
    write(&main, "events {}\nhttp { include brace.conf; }\n");
    let e = config::load(&main).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("[emerg] unexpected \"}}\" in {}:2", dir.join("brace.conf").display())
    );
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn config_include_loops_are_refused() {
    let dir = scratch("loop");
    let main = dir.join("corelb.conf");
    write(&dir.join("self.conf"), "include self.conf;\n");
    write(&main, "events {}\ninclude self.conf;\n");
    let e = config::load(&main).unwrap_err();
    assert!(e.to_string().contains("includes nested deeper than"), "{e}");
    assert_eq!(e.file(), Some(dir.join("self.conf").as_path()));
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn config_include_checks_its_own_arguments() {
    let dir = scratch("args");
    let main = dir.join("corelb.conf");
    write(&main, "events {}\ninclude a.conf b.conf;\n");
    let e = config::load(&main).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "[emerg] invalid number of arguments in \"include\" directive in {}:2",
            main.display()
        )
    );
    let _ = fs::remove_dir_all(&dir);
}
