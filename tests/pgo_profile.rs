//! The build's profile-guided part (pgo/, docs/building.md): `cargo build --release` is a
//! plain build (no wrapper in `.cargo/config.toml`); pgo/build-dist.sh builds the dist profile
//! through the wrapper with the committed profile's digest in the rustflags (so cargo
//! recompiles when the profile changes), and the wrapper hands the profile only to the rustc
//! that recorded it, which it names by commit hash.

use std::path::Path;

fn read(path: &str) -> Vec<u8> {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

#[test]
fn the_plain_build_has_no_wrapper_and_the_dist_build_names_the_committed_profile() {
    let profile = read("pgo/kvaudit.profdata");
    // An indexed LLVM profile starts with its magic number, 0x8169666f72706cff little-endian.
    assert_eq!(
        profile.get(..8),
        Some(&b"\xfflprofi\x81"[..]),
        "not an indexed LLVM profile"
    );
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cargo/config.toml");
    if let Ok(text) = std::fs::read_to_string(&config) {
        assert!(
            !text.contains("rustc-wrapper") && !text.contains("kvaudit_pgo"),
            "the plain build must not go through pgo/rustc-wrapper"
        );
    }
    let script = String::from_utf8(read("pgo/build-dist.sh")).unwrap();
    assert!(script.contains("RUSTC_WRAPPER=\"$PWD/pgo/rustc-wrapper\""));
    assert!(script.contains("sha256sum \"$profile\" | cut -c1-16"));
    assert!(script.contains("kvaudit_pgo=\\\"$digest\\\""));
    assert!(script.contains("--profile dist"));
    let manifest = String::from_utf8(read("Cargo.toml")).unwrap();
    let dist = manifest
        .split("[profile.dist]")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .expect("Cargo.toml has no dist profile");
    // The settings the profile was recorded with (symbol names hash them).
    assert!(
        dist.contains("lto = \"fat\"") && dist.contains("codegen-units = 1"),
        "{dist}"
    );
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

/// The wheel (pyproject.toml) is the dist build: maturin builds the dist profile through the
/// wrapper with the same cfg as pgo/build-dist.sh, the committed profile's digest, so the two
/// build the same artifacts and a new profile rebuilds the wheel's crates too.
#[test]
fn the_wheel_builds_the_dist_profile_with_the_committed_profiles_digest() {
    use sha2::{Digest, Sha256};
    let digest: String = Sha256::digest(read("pgo/kvaudit.profdata"))
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let pyproject: toml::Table = String::from_utf8(read("pyproject.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let maturin = &pyproject["tool"]["maturin"];
    assert_eq!(maturin["bindings"].as_str(), Some("bin"));
    assert_eq!(maturin["profile"].as_str(), Some("dist"));
    assert_eq!(maturin["locked"].as_bool(), Some(true));
    let config: Vec<&str> = maturin["config"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        config,
        [
            "build.rustc-wrapper='pgo/rustc-wrapper'".to_string(),
            format!(
                "build.rustflags=['--cfg', 'kvaudit_pgo=\"{}\"']",
                &digest[..16]
            ),
        ]
    );
    assert_eq!(pyproject["project"]["name"].as_str(), Some("kvaudit"));
}
