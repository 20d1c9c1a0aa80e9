//! Builds `bpf/corelb_xdp.c` with `clang -target bpf`. Without clang (or when it fails) the crate still builds: the
//! program is then absent, and `corelb_xdp::missing()` says why, so that a config using XDP is refused by name.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let src = "bpf/corelb_xdp.c";
    println!("cargo:rerun-if-changed={src}");
    println!("cargo:rerun-if-env-changed=CORELB_CLANG");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default()).join("corelb_xdp.o");
    let clang = std::env::var("CORELB_CLANG").unwrap_or_else(|_| "clang".into());
    let arch = match std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("aarch64") => "aarch64-linux-gnu",
        _ => "x86_64-linux-gnu",
    };
    let result = Command::new(&clang)
        .args(["-O2", "-g", "-Wall", "-target", "bpf"])
        .arg(format!("-I/usr/include/{arch}"))
        .args(["-c", src, "-o"])
        .arg(&out)
        .output();
    let missing = match result {
        Ok(o) if o.status.success() => String::new(),
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            let first = err.lines().find(|l| l.contains("error")).unwrap_or("failed");
            println!("cargo:warning=the XDP program was not built: {first}");
            format!("\"{clang} -target bpf\" failed at build time ({first}; Debian's clang and libbpf-dev build it)")
        }
        Err(e) => {
            println!("cargo:warning=the XDP program was not built: {clang}: {e}");
            format!("\"{clang}\" was not found at build time (Debian's clang and libbpf-dev build the XDP program)")
        }
    };
    if !missing.is_empty() {
        let _ = std::fs::write(&out, b"");
    }
    println!("cargo:rustc-env=CORELB_XDP_MISSING={missing}");
}
