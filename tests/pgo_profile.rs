//! The committed build profile (pgo/, README "Profile-guided builds") is the one the build
//! configuration names: cargo only recompiles with a new profile when the digest in
//! `.cargo/config.toml` changes with it, and the wrapper hands the profile only to the rustc
//! that recorded it, which it names by commit hash.

use std::path::Path;

use sha2::{Digest, Sha256};

fn read(path: &str) -> Vec<u8> {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

#[test]
fn the_build_configuration_names_the_committed_profile() {
    let profile = read("pgo/kvaudit.profdata");
    // An indexed LLVM profile starts with its magic number, 0x8169666f72706cff little-endian.
    assert_eq!(
        profile.get(..8),
        Some(&b"\xfflprofi\x81"[..]),
        "not an indexed LLVM profile"
    );
    let digest: String = Sha256::digest(&profile)
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    let config = String::from_utf8(read(".cargo/config.toml")).unwrap();
    let named = config
        .split("kvaudit_pgo=\\\"")
        .nth(1)
        .and_then(|rest| rest.split("\\\"").next())
        .expect("`.cargo/config.toml` passes no kvaudit_pgo digest");
    assert_eq!(
        named, digest,
        "pgo/kvaudit.profdata changed without its digest in .cargo/config.toml: \
         run python3 pgo/train.py (it writes both)"
    );
    assert!(config.contains("rustc-wrapper = \"pgo/rustc-wrapper\""));
}

#[test]
fn the_wrapper_names_the_rustc_that_recorded_the_profile() {
    let wrapper = String::from_utf8(read("pgo/rustc-wrapper")).unwrap();
    let recorded = wrapper
        .lines()
        .find_map(|l| l.strip_prefix("recorded_rustc="))
        .expect("pgo/rustc-wrapper names no rustc");
    assert!(
        recorded.len() == 40 && recorded.bytes().all(|b| b.is_ascii_hexdigit()),
        "recorded_rustc={recorded} is not a commit hash"
    );
}
