// napi-build's `setup()`, less one line: it asks cargo to rebuild whenever the napi CLI's
// `NAPI_FORCE_BUILD_PYKERNEL` changes. The CLI sets that variable (to the time) only for
// a build whose type-definition folder is missing, so the build after it, without the
// variable, recompiled the whole crate again: the second line of the contributors' quick
// start paid a minute for nothing. `scripts/dts.js` covers the case the variable was for
// (a folder gone while the crate is fresh: the types come out empty, and it rebuilds).
use std::env;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(napi_wasi_threads)");
    println!("cargo::rustc-check-cfg=cfg(napi_wasi_no_heap_sync)");
    for name in [
        "DEBUG_GENERATED_CODE",
        "TYPE_DEF_TMP_PATH",
        "CARGO_CFG_NAPI_RS_CLI_VERSION",
        "NAPI_DEBUG_GENERATED_CODE",
        "NAPI_TYPE_DEF_TMP_FOLDER",
    ] {
        println!("cargo::rerun-if-env-changed={name}");
    }
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let target_env = env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "macos" {
        // Node's symbols are resolved when the addon is loaded.
        println!("cargo:rustc-cdylib-link-arg=-Wl");
        println!("cargo:rustc-cdylib-link-arg=-undefined");
        println!("cargo:rustc-cdylib-link-arg=dynamic_lookup");
    }
    if target_env == "gnu" {
        // glibc runs thread-local destructors after an unloaded library is gone (glibc
        // bugs 21031/21032): keep the addon mapped.
        println!("cargo:rustc-link-arg=-Wl,-z,nodelete");
    }
}
