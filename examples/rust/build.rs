// Links libphoton as pkg-config describes it (PKG_CONFIG_PATH picks the
// installed prefix). Runs the pkg-config program; no crates.
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let out = Command::new("pkg-config")
        .args(["--libs", "photon"])
        .output()
        .expect("running pkg-config");
    if !out.status.success() {
        panic!(
            "pkg-config --libs photon failed (set PKG_CONFIG_PATH to <prefix>/lib/pkgconfig): {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for flag in String::from_utf8(out.stdout).unwrap().split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={}", dir);
        } else if let Some(lib) = flag.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={}", lib);
        }
    }
}
