use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value as Json;

use super::*;

fn rows_of(text: &[u8], format: RowFormat) -> Vec<Item> {
    let dir = tempdir();
    let path = dir.join("in");
    std::fs::write(&path, text).unwrap();
    Rows::new(vec![path], format, Selection::default()).collect()
}

fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "kvaudit-input-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
static NEXT: AtomicU64 = AtomicU64::new(0);

fn summary(items: &[Item]) -> Vec<String> {
    items
        .iter()
        .map(|i| match i {
            Item::Raw(r) => match r.conversation() {
                Ok(c) => format!(
                    "{} ok {} {}",
                    r.source_line(),
                    r.format.name(),
                    c.messages.len()
                ),
                Err(u) => format!("{} skip {}", r.source_line(), u.reason),
            },
            Item::Skipped { source, reason, .. } => {
                format!("{} skip {reason}", source.rsplit(':').next().unwrap())
            }
        })
        .collect()
}

impl Raw {
    fn source_line(&self) -> &str {
        self.source.rsplit(':').next().unwrap()
    }
}

const GOOD: &str = r#"{"id": "a", "meta": {}, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}, {"role": "user", "content": "bye"}]}"#;

#[test]
fn jsonl_rows_with_bad_lines_between() {
    let text = format!(
        "{GOOD}\n\nnot json\n[{{\"role\": \"user\", \"content\": \"x\"}}]\n{{\"messages\": [{{\"role\": \"assistant\", \"content\": \"x\"}}]}}\n{{\"messages\": [{{\"role\": \"system\", \"content\": \"s\"}}]}}\n{{\"messages\": [{{\"role\": \"wizard\", \"content\": \"x\"}}]}}\n{GOOD}"
    );
    let items = rows_of(text.as_bytes(), RowFormat::Auto);
    assert_eq!(
        summary(&items),
        [
            "1 ok openai 3",
            "3 skip not_json",
            "4 skip no_transition",
            "5 skip roles_out_of_order",
            "6 skip no_user_turn",
            "7 skip unknown_role",
            "8 ok openai 3"
        ]
    );
}

#[test]
fn leading_blank_lines_keep_line_numbers() {
    let text = format!("\u{feff}\n\n{GOOD}\n");
    assert_eq!(
        summary(&rows_of(text.as_bytes(), RowFormat::Auto)),
        ["3 ok openai 3"]
    );
}

#[test]
fn sharegpt_json_array_pretty_printed() {
    let text = r#"[
  {"id": "x", "conversations": [
     {"from": "human", "value": "a [tricky] \"value\" }"},
     {"from": "gpt", "value": "b"},
     {"from": "human", "value": "c"}]},
  {"conversations": [{"from": "function_call", "value": "{}"}]},
  {"system": "be brief", "tools": "[{\"name\": \"f\", \"parameters\": {}}]",
   "conversations": [{"from": "human", "value": "q"},
     {"from": "function_call", "value": "{\"name\": \"f\", \"arguments\": {\"a\": 1}}"},
     {"from": "observation", "value": "42"}, {"from": "gpt", "value": "done"},
     {"from": "human", "value": "thanks"}]}
]"#;
    let items = rows_of(text.as_bytes(), RowFormat::Auto);
    assert_eq!(
        summary(&items),
        // The first element starts on line 2, after the opening bracket's line.
        [
            "2 ok sharegpt 3",
            "6 skip not_a_conversation",
            "7 ok sharegpt 6"
        ]
    );
    let Item::Raw(r) = &items[2] else { panic!() };
    let c = r.conversation().unwrap();
    assert_eq!(c.messages[0]["role"], "system");
    assert_eq!(
        c.messages[2]["tool_calls"][0]["function"]["arguments"]["a"],
        1
    );
    assert_eq!(c.messages[2]["content"], Json::Null);
    assert_eq!(c.messages[3]["role"], "tool");
    assert_eq!(c.tools.as_ref().unwrap()[0]["type"], "function");
    assert_eq!(c.tools.as_ref().unwrap()[0]["function"]["name"], "f");
}

#[test]
fn wildchat_rows_drop_message_metadata() {
    let text = r#"{"conversation_hash": "h", "conversation": [{"role": "user", "content": "hi", "language": "English", "timestamp": null}, {"role": "assistant", "content": "yo", "toxic": false}, {"role": "user", "content": "ok"}], "model": "gpt-4"}"#;
    let items = rows_of(text.as_bytes(), RowFormat::Auto);
    let Item::Raw(r) = &items[0] else { panic!() };
    assert_eq!(r.format, RowFormat::Wildchat);
    let c = r.conversation().unwrap();
    assert_eq!(
        c.messages[0],
        serde_json::json!({"role": "user", "content": "hi"})
    );
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

fn zstd(bytes: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(bytes, ruzstd::encoding::CompressionLevel::Fastest)
}

#[test]
fn gzip_and_zstd_are_read_by_their_magic() {
    let text = format!("{GOOD}\n{GOOD}\n");
    for bytes in [gzip(text.as_bytes()), zstd(text.as_bytes())] {
        let items = rows_of(&bytes, RowFormat::Auto);
        assert_eq!(summary(&items), ["1 ok openai 3", "2 ok openai 3"]);
    }
    // Two frames back to back (`cat a.zst b.zst`) are one stream of both.
    let mut two = zstd(format!("{GOOD}\n").as_bytes());
    two.extend(zstd(format!("{GOOD}\n").as_bytes()));
    let items = rows_of(&two, RowFormat::Auto);
    assert_eq!(summary(&items), ["1 ok openai 3", "2 ok openai 3"]);
}

/// A damaged compressed file: the rows before the damage are read and the damage is one
/// `unreadable` row, whether it is met while opening (a small file decoded in the first
/// buffer) or further on; a bad checksum in the trailer counts too.
#[test]
fn a_damaged_compressed_file_is_one_unreadable_row_wherever_the_damage_is() {
    for rows in [2usize, 20_000] {
        let text = format!("{GOOD}\n").repeat(rows);
        let (gz, zst) = (gzip(text.as_bytes()), zstd(text.as_bytes()));
        let mut bad_crc = gz.clone();
        let n = bad_crc.len();
        bad_crc[n - 8..].fill(0);
        let cases = [
            ("gzip cut", gz[..gz.len() / 2].to_vec()),
            ("gzip trailer cut", gz[..gz.len() - 3].to_vec()),
            ("gzip bad crc", bad_crc),
            ("zstd cut", zst[..zst.len() / 2].to_vec()),
            ("zstd checksum cut", zst[..zst.len() - 2].to_vec()),
            ("gzip header only", gz[..10].to_vec()),
        ];
        for (name, bytes) in cases {
            let items = rows_of(&bytes, RowFormat::Auto);
            let summary = summary(&items);
            let (last, before) = summary.split_last().unwrap();
            assert!(
                last.ends_with("skip unreadable"),
                "{rows} {name}: {summary:?}"
            );
            assert!(before.len() <= rows, "{rows} {name}: {}", before.len());
            assert!(
                before.iter().all(|s| s.ends_with("ok openai 3")),
                "{rows} {name}: {before:?}"
            );
        }
    }
}

/// One conversation written over several lines (a `diff-turns -c` file) is a corpus of
/// one; text after it is one skipped row.
#[test]
fn a_file_of_one_pretty_printed_conversation_is_one_row() {
    let value: Json = serde_json::from_str(GOOD).unwrap();
    let pretty = serde_json::to_string_pretty(&value).unwrap();
    assert!(pretty.lines().count() > 3);
    let items = rows_of(pretty.as_bytes(), RowFormat::Auto);
    assert_eq!(summary(&items), ["1 ok openai 3"]);
    let items = rows_of(format!("{pretty}\n{pretty}").as_bytes(), RowFormat::Auto);
    let got = summary(&items);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0], "1 ok openai 3");
    assert!(got[1].ends_with("skip not_json"), "{got:?}");
    // A JSON Lines file is still one row per line.
    let items = rows_of(format!("{GOOD}\n{GOOD}\n").as_bytes(), RowFormat::Auto);
    assert_eq!(summary(&items), ["1 ok openai 3", "2 ok openai 3"]);
}

#[test]
fn a_line_over_the_limit_is_skipped_without_being_kept() {
    let mut text = Vec::new();
    text.extend_from_slice(b"{\"messages\": \"");
    text.resize(MAX_ROW_BYTES as usize + 10, b'x');
    text.extend_from_slice(b"\"}\n");
    text.extend_from_slice(GOOD.as_bytes());
    let items = rows_of(&text, RowFormat::Openai);
    assert_eq!(summary(&items), ["1 skip too_large", "2 ok openai 3"]);
}

#[test]
fn a_truncated_array_ends_its_file_with_one_skip() {
    let text = r#"[{"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}, {"from": "human", "value": "c"}]}, {"conversations": [{"from": "hu"#;
    let items = rows_of(text.as_bytes(), RowFormat::Auto);
    assert_eq!(summary(&items), ["1 ok sharegpt 3", "1 skip not_json"]);
}

#[test]
fn limit_and_sample_are_deterministic() {
    let dir = tempdir();
    let path = dir.join("many.jsonl");
    let lines: Vec<String> = (0..100)
        .map(|i| {
            format!(
                r#"{{"messages": [{{"role": "user", "content": "{i}"}}, {{"role": "assistant", "content": "a"}}, {{"role": "user", "content": "b"}}]}}"#
            )
        })
        .collect();
    std::fs::write(&path, lines.join("\n")).unwrap();
    let contents = |sel: Selection| -> Vec<String> {
        Rows::new(vec![path.clone()], RowFormat::Auto, sel)
            .map(|i| match i {
                Item::Raw(r) => r.conversation().unwrap().messages[0]["content"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                Item::Skipped { .. } => panic!(),
            })
            .collect()
    };
    let limited = contents(Selection {
        limit: Some(3),
        ..Selection::default()
    });
    assert_eq!(limited, ["0", "1", "2"]);
    let sample = |seed| {
        contents(Selection {
            sample: Some((10, seed)),
            ..Selection::default()
        })
    };
    let a = sample(7);
    assert_eq!(a.len(), 10);
    assert_eq!(a, sample(7));
    assert_ne!(a, sample(8));
    // In input order.
    let n: Vec<u32> = a.iter().map(|s| s.parse().unwrap()).collect();
    assert!(n.windows(2).all(|w| w[0] < w[1]));
    let mut rows = Rows::new(
        vec![path.clone()],
        RowFormat::Auto,
        Selection {
            sample: Some((10, 7)),
            ..Selection::default()
        },
    );
    assert_eq!(rows.summary().sampled, Some((10, 100)));
    assert_eq!(rows.by_ref().count(), 10);
}

#[test]
fn a_missing_file_is_an_open_error() {
    let mut rows = Rows::new(
        vec![PathBuf::from("/nonexistent/x.jsonl")],
        RowFormat::Auto,
        Selection::default(),
    );
    assert!(rows.next().is_none());
    assert!(rows.open_error.is_some());
}
