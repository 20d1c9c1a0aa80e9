//! Passes the rustls version the build locked (Cargo.lock) to `-V`'s `built with` line.

fn main() {
    println!("cargo:rerun-if-changed=../Cargo.lock");
    let lock = std::fs::read_to_string("../Cargo.lock").unwrap_or_default();
    let mut lines = lock.lines();
    let mut version = String::from("0.23");
    while let Some(line) = lines.next() {
        if line == "name = \"rustls\"" {
            if let Some(v) = lines.next().and_then(|l| l.strip_prefix("version = \"")) {
                version = v.trim_end_matches('"').to_string();
            }
            break;
        }
    }
    println!("cargo:rustc-env=CORELB_RUSTLS_VERSION={version}");
}
