fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // Linux (glibc) only: the unwinder linked statically, so the
    // executable needs no libgcc_s.so.1 (src/libm_shim.rs says why).
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if !linux_gnu || std::env::var("HOST") != std::env::var("TARGET") {
        return;
    }
    let out = std::process::Command::new("gcc")
        .arg("-print-file-name=libgcc_eh.a")
        .output();
    if let Ok(o) = out {
        let p = std::path::PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
        if p.is_absolute() && p.exists() {
            println!(
                "cargo:rustc-link-search=native={}",
                p.parent().unwrap().display()
            );
            println!("cargo:rustc-link-lib=static:+whole-archive=gcc_eh");
        }
    }
}
