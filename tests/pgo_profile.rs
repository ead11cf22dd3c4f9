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

/// The wrapper's choices, with a stand-in compiler that prints the arguments it gets.
#[cfg(unix)]
#[test]
fn the_wrapper_adds_the_profile_only_to_configured_optimised_compiles_by_the_recorded_rustc() {
    use std::os::unix::fs::PermissionsExt;
    let wrapper = Path::new(env!("CARGO_MANIFEST_DIR")).join("pgo/rustc-wrapper");
    let text = String::from_utf8(read("pgo/rustc-wrapper")).unwrap();
    let recorded = text
        .lines()
        .find_map(|l| l.strip_prefix("recorded_rustc="))
        .unwrap();
    let dir = std::env::temp_dir().join(format!("kvaudit-pgo-wrapper-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fake = dir.join("rustc");
    std::fs::write(
        &fake,
        "#!/bin/sh\n[ \"$1\" = -vV ] && { echo \"commit-hash: $FAKE_COMMIT\"; exit 0; }\necho \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = |commit: &str, pgo: &str, args: &[&str]| {
        let out = std::process::Command::new(&wrapper)
            .arg(&fake)
            .args(args)
            .env("FAKE_COMMIT", commit)
            .env("KVAUDIT_PGO", pgo)
            .output()
            .unwrap();
        String::from_utf8(out.stdout)
            .unwrap()
            .contains("-Cprofile-use=")
    };
    let config = ["--cfg", "kvaudit_pgo=\"x\""];
    let with = |extra: &[&'static str]| -> Vec<&str> {
        ["--crate-name", "k", "-C", "opt-level=3"]
            .iter()
            .chain(&config)
            .chain(extra)
            .copied()
            .collect()
    };
    assert!(run(recorded, "1", &with(&[])));
    assert!(run(
        recorded,
        "1",
        &["-Copt-level=3", "--cfg=kvaudit_pgo=x"]
    ));
    // A crate's name is not an option value.
    assert!(run(
        recorded,
        "1",
        &with(&["--crate-name", "html_sanitizer"])
    ));
    assert!(!run(
        "0000000000000000000000000000000000000000",
        "1",
        &with(&[])
    ));
    assert!(!run(recorded, "0", &with(&[])));
    assert!(!run(
        recorded,
        "1",
        &["--crate-name", "k", "-C", "opt-level=3"]
    ));
    assert!(!run(
        recorded,
        "1",
        &["--crate-name", "k", "--cfg", "kvaudit_pgo=\"x\""]
    ));
    for extra in [
        &["--cfg", "fuzzing"][..],
        &["--cfg=fuzzing"],
        &["-Cpasses=sancov-module"],
        &["-C", "instrument-coverage"],
        &["-Zsanitizer=address"],
        &["-Cprofile-generate=/tmp/x"],
    ] {
        assert!(!run(recorded, "1", &with(extra)), "{extra:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
