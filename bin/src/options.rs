//! nginx's command line, read as `ngx_get_options` reads it, plus corelb's own long options.
//!
//! Single-dash letters may be grouped (`-tq`); a letter that takes a value takes the rest of its argument when there
//! is one (`-cFILE`, `-p/dir/`, `-sreload`), else the next argument. Anything not starting with `-` is nginx's
//! `invalid option`, except the `pick`, `bench` and `help` subcommands (read by clap). corelb adds `--runtime R`,
//! `--version` and `--help`.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// The subcommands clap reads (with `--help`, which prints clap's help).
const SUBCOMMANDS: [&str; 3] = ["pick", "bench", "help"];

/// The `-s` names nginx knows.
pub const SIGNALS: [&str; 4] = ["stop", "quit", "reopen", "reload"];

/// The shard runtimes `--runtime` takes.
const RUNTIMES: [&str; 2] = ["tokio", "glommio"];

/// What a command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// nginx's flags: run, test (`-t`, `-T`), signal (`-s`), or show the version (`-v`, `-V`, `-h`).
    Nginx(Options),
    /// A subcommand or `--help`: clap reads the whole command line.
    Clap,
}

/// nginx's options (and `--runtime`, `--version`), as given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// `-?` or `-h`: the version line and the usage.
    pub help: bool,
    /// `-v` (also set by `-V`, `-h`): the version line.
    pub version: bool,
    /// `-V`: the version line and `configure arguments:`.
    pub configure: bool,
    /// `-t` (also set by `-T`): test the config and exit.
    pub test: bool,
    /// `-T`: test, then print every config file read.
    pub dump: bool,
    /// `-q`: no `syntax is ok` / `test is successful` lines.
    pub quiet: bool,
    /// `-p PREFIX`.
    pub prefix: Option<PathBuf>,
    /// `-e FILE|stderr`.
    pub error_log: Option<ErrorLogArg>,
    /// `-c FILE`.
    pub conf_file: Option<PathBuf>,
    /// `-g DIRECTIVES`.
    pub params: Option<String>,
    /// `-s SIGNAL`, one of [`SIGNALS`].
    pub signal: Option<String>,
    /// `--runtime tokio|glommio`.
    pub runtime: Option<String>,
    /// `--version`: corelb's one line on stdout.
    pub long_version: bool,
}

/// `-e`'s value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorLogArg {
    Stderr,
    File(PathBuf),
}

/// A command line nginx (or corelb, for its long options) refuses; displayed in nginx's words after `corelb: `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionError {
    #[error("invalid option: \"{0}\"")]
    Invalid(String),
    #[error("option \"-{flag}\" requires {what}")]
    Requires { flag: char, what: &'static str },
    #[error("invalid option: \"-s {0}\"")]
    Signal(String),
    #[error("invalid value \"{0}\" for \"--runtime\" (expected tokio or glommio)")]
    Runtime(String),
    #[error("option \"--runtime\" requires tokio or glommio")]
    NoRuntime,
}

impl OptionError {
    /// nginx exits 1 on a bad option; a bad `--runtime` keeps clap's usage exit code, 2.
    pub fn exit_code(&self) -> u8 {
        match self {
            OptionError::Runtime(_) | OptionError::NoRuntime => 2,
            _ => 1,
        }
    }
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Reads `args` (without the program name).
pub fn parse(args: &[OsString]) -> Result<Command, OptionError> {
    if args
        .first()
        .is_some_and(|first| SUBCOMMANDS.iter().any(|s| first == *s))
    {
        return Ok(Command::Clap);
    }
    let mut o = Options::default();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_bytes();
        if arg == b"--help" {
            return Ok(Command::Clap);
        }
        if arg.len() > 2 && arg.starts_with(b"--") {
            long_option(&mut o, args, &mut i)?;
            i += 1;
            continue;
        }
        let Some(letters) = arg.strip_prefix(b"-") else {
            return Err(OptionError::Invalid(lossy(arg)));
        };
        let mut p = 0;
        while let Some(&letter) = letters.get(p) {
            p += 1;
            match letter {
                b'?' | b'h' => {
                    o.version = true;
                    o.help = true;
                }
                b'v' => o.version = true,
                b'V' => {
                    o.version = true;
                    o.configure = true;
                }
                b't' => o.test = true,
                b'T' => {
                    o.test = true;
                    o.dump = true;
                }
                b'q' => o.quiet = true,
                b'p' | b'e' | b'c' | b'g' | b's' => {
                    let value = if p < letters.len() {
                        OsStr::from_bytes(&letters[p..]).to_os_string()
                    } else {
                        i += 1;
                        args.get(i).cloned().ok_or(OptionError::Requires {
                            flag: char::from(letter),
                            what: requirement(letter),
                        })?
                    };
                    set_value(&mut o, letter, value)?;
                    break;
                }
                other => return Err(OptionError::Invalid(lossy(&[other]))),
            }
        }
        i += 1;
    }
    Ok(Command::Nginx(o))
}

/// nginx's words for the value a letter needs.
fn requirement(letter: u8) -> &'static str {
    match letter {
        b'p' => "directory name",
        b'e' | b'c' => "file name",
        _ => "parameter",
    }
}

fn set_value(o: &mut Options, letter: u8, value: OsString) -> Result<(), OptionError> {
    match letter {
        b'p' => o.prefix = Some(PathBuf::from(value)),
        b'e' if value == "stderr" => o.error_log = Some(ErrorLogArg::Stderr),
        b'e' => o.error_log = Some(ErrorLogArg::File(PathBuf::from(value))),
        b'c' => o.conf_file = Some(PathBuf::from(value)),
        b'g' => o.params = Some(value.to_string_lossy().into_owned()),
        _ => {
            let name = value.to_string_lossy().into_owned();
            if !SIGNALS.contains(&name.as_str()) {
                return Err(OptionError::Signal(name));
            }
            o.signal = Some(name);
        }
    }
    Ok(())
}

/// `--runtime R`, `--runtime=R` or `--version` at `args[*i]` (`*i` moves past a separate value).
fn long_option(o: &mut Options, args: &[OsString], i: &mut usize) -> Result<(), OptionError> {
    let arg = args[*i].to_string_lossy().into_owned();
    if arg == "--version" {
        o.long_version = true;
        return Ok(());
    }
    let runtime = if let Some(v) = arg.strip_prefix("--runtime=") {
        v.to_string()
    } else if arg == "--runtime" {
        *i += 1;
        let v = args.get(*i).ok_or(OptionError::NoRuntime)?;
        v.to_string_lossy().into_owned()
    } else {
        return Err(OptionError::Invalid(arg));
    };
    if !RUNTIMES.contains(&runtime.as_str()) {
        return Err(OptionError::Runtime(runtime));
    }
    o.runtime = Some(runtime);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(args: &[&str]) -> Result<Command, OptionError> {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        parse(&args)
    }

    fn options(args: &[&str]) -> Options {
        match parse_str(args) {
            Ok(Command::Nginx(o)) => o,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn glued_and_separate_values_mean_the_same() {
        let glued = options(&["-p/t/", "-cnginx.conf", "-eerror.log", "-gpid x;", "-sreload"]);
        let apart = options(&[
            "-p",
            "/t/",
            "-c",
            "nginx.conf",
            "-e",
            "error.log",
            "-g",
            "pid x;",
            "-s",
            "reload",
        ]);
        assert_eq!(glued, apart);
        assert_eq!(glued.prefix, Some(PathBuf::from("/t/")));
        assert_eq!(glued.conf_file, Some(PathBuf::from("nginx.conf")));
        assert_eq!(glued.error_log, Some(ErrorLogArg::File(PathBuf::from("error.log"))));
        assert_eq!(glued.params.as_deref(), Some("pid x;"));
        assert_eq!(glued.signal.as_deref(), Some("reload"));
    }

    #[test]
    fn letters_group_and_a_value_ends_the_group() {
        let o = options(&["-tq", "-Tc", "a.conf"]);
        assert!(o.test && o.quiet && o.dump);
        assert_eq!(o.conf_file, Some(PathBuf::from("a.conf")));
        // `-ct` is the file `t`, as in nginx.
        assert_eq!(options(&["-ct"]).conf_file, Some(PathBuf::from("t")));
        let o = options(&["-?"]);
        assert!(o.help && o.version && !o.configure);
        let o = options(&["-V"]);
        assert!(o.version && o.configure);
        assert_eq!(options(&["-e", "stderr"]).error_log, Some(ErrorLogArg::Stderr));
        // A lone `-` is no option and no error (nginx's loop reads nothing from it).
        assert_eq!(options(&["-"]), Options::default());
    }

    #[test]
    fn nginx_refusals() {
        let cases: &[(&[&str], &str)] = &[
            (&["x"], "invalid option: \"x\""),
            (&["-x"], "invalid option: \"x\""),
            (&["-tx"], "invalid option: \"x\""),
            (&["--"], "invalid option: \"-\""),
            (&["-p"], "option \"-p\" requires directory name"),
            (&["-e"], "option \"-e\" requires file name"),
            (&["-c"], "option \"-c\" requires file name"),
            (&["-t", "-g"], "option \"-g\" requires parameter"),
            (&["-s"], "option \"-s\" requires parameter"),
            (&["-s", "restart"], "invalid option: \"-s restart\""),
            (&["--frobnicate"], "invalid option: \"--frobnicate\""),
        ];
        for (args, want) in cases {
            let e = parse_str(args).unwrap_err();
            assert_eq!(e.to_string(), *want, "{args:?}");
            assert_eq!(e.exit_code(), 1);
        }
    }

    #[test]
    fn corelb_long_options_and_subcommands() {
        let o = options(&["-c", "f", "--runtime", "glommio"]);
        assert_eq!(o.runtime.as_deref(), Some("glommio"));
        assert_eq!(options(&["--runtime=tokio"]).runtime.as_deref(), Some("tokio"));
        assert!(options(&["--version"]).long_version);
        // A value is taken before any long option is looked at, as nginx takes it.
        assert_eq!(options(&["-c", "--help"]).conf_file, Some(PathBuf::from("--help")));
        let e = parse_str(&["--runtime", "uv"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert_eq!(parse_str(&["--runtime"]).unwrap_err(), OptionError::NoRuntime);
        for args in [
            &["pick", "-c", "f"][..],
            &["bench", "http://x/"],
            &["--help"],
            &["-c", "f", "--help"],
        ] {
            assert_eq!(parse_str(args), Ok(Command::Clap), "{args:?}");
        }
    }
}
