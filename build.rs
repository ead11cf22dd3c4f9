//! Whether the reference data (`../shared`, or `KVAUDIT_SHARED_DIR`) is beside the repository:
//! the tests that need it are compiled as ignored, with the reason, when it is not, so a run
//! without it counts them as ignored rather than as passed.

use std::path::PathBuf;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(kvaudit_shared)");
    println!("cargo::rerun-if-env-changed=KVAUDIT_SHARED_DIR");
    let dir = std::env::var_os("KVAUDIT_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default())
                .join("../shared")
        });
    let models = dir.join("models");
    if models.is_dir() {
        println!("cargo::rustc-cfg=kvaudit_shared");
        // Only while it exists: a missing path would make the script run on every build. When
        // it is absent, the script runs again whenever a file of the package changes.
        println!("cargo::rerun-if-changed={}", models.display());
        println!("cargo::rerun-if-changed=build.rs");
    }
}
