//! The committed `.frames` fixtures (fixtures/events/) are exactly what their generator
//! (tests/common/event_fixtures.rs, kvaudit's own encoder) writes today.

use crate::common;

use common::event_fixtures::{self, DIR};

const REWRITE: &str =
    "cargo test --release --test integration -- --ignored fixtures::write_event_fixtures";

#[test]
fn committed_event_fixtures_are_what_the_generator_writes() {
    let dir = common::repo_root().join(DIR);
    let generated = event_fixtures::all();
    for (name, bytes) in &generated {
        let path = dir.join(name);
        let committed = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (write it with: {REWRITE})", path.display()));
        assert!(
            &committed == bytes,
            "{name} is not what the generator writes now ({} bytes committed, {} generated): \
             commit the regenerated file ({REWRITE}) if the change is meant",
            committed.len(),
            bytes.len()
        );
    }
    // No stale fixture the generator no longer writes.
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".frames"))
        .collect();
    on_disk.sort();
    let mut names: Vec<String> = generated.iter().map(|(n, _)| n.to_string()).collect();
    names.sort();
    assert_eq!(on_disk, names);
}

#[test]
#[ignore = "writes fixtures/events/*.frames; run after changing the generator"]
fn write_event_fixtures() {
    let dir = common::repo_root().join(DIR);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, bytes) in event_fixtures::all() {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}
