//! The hostile-input campaign as a table: each input a careless user or an attacker could
//! hand kvaudit, the exit code and message it must give, and a bound on the memory it may
//! take on the way (an address-space cap: going past it aborts the run, which fails the case).
//! Before the fixes, these panicked (exit 101), aborted on allocation (134), hung, or took
//! gigabytes.

use crate::common;

use std::path::Path;
use std::time::Duration;

const TINY: &str = "fixtures/models/tiny-think";

struct Case {
    name: &'static str,
    args: Vec<String>,
    code: i32,
    /// Must appear in stderr (or stdout for exit 0/1).
    fragment: &'static str,
    /// Address-space cap (virtual memory: the binary, thread stacks and the allocator's
    /// arenas count too, so this is above the resident peak).
    max_mb: u64,
}

fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> String {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p.display().to_string()
}

fn conversation(messages: &[(&str, String)]) -> String {
    let msgs: Vec<serde_json::Value> = messages
        .iter()
        .map(|(r, c)| serde_json::json!({"role": r, "content": c}))
        .collect();
    serde_json::json!({ "messages": msgs }).to_string()
}

fn diff_turns(extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "diff-turns",
        "--model",
        TINY,
        "--now",
        "2026-01-15T10:00:00",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn cases(dir: &Path) -> Vec<Case> {
    let template = |name: &str, text: &str| write(dir, name, text);
    let mut alternating = Vec::new();
    for i in 0..50_000 {
        alternating.push(("user", format!("q{i}")));
        alternating.push(("assistant", format!("a{i}")));
    }
    let many = write(dir, "many.json", conversation(&alternating));
    let huge_message = write(
        dir,
        "huge.json",
        conversation(&[
            ("user", "x".repeat(20 << 20)),
            ("assistant", "ok".into()),
            ("user", "more".into()),
        ]),
    );
    let surrogate = write(
        dir,
        "surrogate.json",
        r#"{"messages": [{"role": "user", "content": "\ud800"}, {"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}]}"#,
    );
    let bom = write(
        dir,
        "bom.json",
        format!(
            "\u{feff}{}",
            conversation(&[
                ("user", "hi".into()),
                ("assistant", "hello".into()),
                ("user", "thanks".into())
            ])
        ),
    );
    let topic = b"kv@p@m";
    let mut claim = (topic.len() as u32).to_be_bytes().to_vec();
    claim.extend_from_slice(topic);
    claim.extend_from_slice(&0u64.to_be_bytes());
    claim.extend_from_slice(&(1u32 << 30).to_be_bytes());
    claim.extend_from_slice(&[0; 100]);
    let claim = write(dir, "claim.frames", claim);
    let mut raw = vec![0xdd, 0xff, 0xff, 0xff, 0xff];
    raw.resize(16 << 20, 0);
    let raw = write(dir, "header.msgpack", raw);
    let zeros = write(dir, "zeros.frames", vec![0u8; 16 << 20]);
    let bigid = dir.join("bigid");
    std::fs::create_dir_all(&bigid).unwrap();
    let tiny = common::fixtures().join("models/tiny-think");
    let mut tj: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tiny.join("tokenizer.json")).unwrap()).unwrap();
    let vocab = tj["model"]["vocab"].as_object_mut().unwrap();
    let first = vocab.keys().next().unwrap().clone();
    vocab.insert(first, serde_json::json!(4294967295u64));
    write(&bigid, "tokenizer.json", tj.to_string());
    std::fs::copy(
        tiny.join("tokenizer_config.json"),
        bigid.join("tokenizer_config.json"),
    )
    .unwrap();
    // One BlockStored event per batch, as vLLM lays it out ([ts, [event], rank]); each
    // field's msgpack given whole, so a field can be made as large as a case needs.
    let one_event = |name: &str, fields: &[&[u8]]| {
        let mut b = vec![0x93, 0xcb];
        b.extend_from_slice(&1.0f64.to_be_bytes());
        b.push(0x91);
        b.push(0x90 | (fields.len() as u8 + 1));
        b.extend_from_slice(b"\xabBlockStored");
        for f in fields {
            b.extend_from_slice(f);
        }
        b.push(0x00);
        write(dir, name, b)
    };
    let array32 = |n: usize, item: &[u8]| {
        let mut b = vec![0xdd];
        b.extend_from_slice(&(n as u32).to_be_bytes());
        for _ in 0..n {
            b.extend_from_slice(item);
        }
        b
    };
    let uint64s = |n: usize| {
        let mut b = vec![0xdd];
        b.extend_from_slice(&(n as u32).to_be_bytes());
        for i in 0..n as u64 {
            b.push(0xcf);
            b.extend_from_slice(&(i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1).to_be_bytes());
        }
        b
    };
    const EVENT_BLOCKS: usize = 1 << 20;
    let many_hashes = one_event(
        "hashes.msgpack",
        &[
            &array32(EVENT_BLOCKS + 1, &[0x07]),
            &[0xc0],
            &[0x90],
            &[0x01],
        ],
    );
    let many_tokens = one_event(
        "tokens.msgpack",
        &[
            &[0x91, 0x07],
            &[0xc0],
            &array32((1 << 24) + 1, &[0x07]),
            &[0x01],
        ],
    );
    // Fields 5 to 8 (lora_id, medium, lora_name, extra_keys): the nils cost a byte each.
    let many_extra_keys = one_event(
        "extra.msgpack",
        &[
            &[0x91, 0x07],
            &[0xc0],
            &[0x91, 0x07],
            &[0x01],
            &[0xc0],
            &[0xc0],
            &[0xc0],
            &array32(EVENT_BLOCKS + 1, &[0xc0]),
        ],
    );
    // An extra-keys entry is a generic value tree: a million nils inside one entry.
    let mut nested = vec![0x91];
    nested.extend_from_slice(&array32(EVENT_BLOCKS + 1, &[0xc0]));
    let nested_tree = one_event(
        "nested.msgpack",
        &[
            &[0x91, 0x07],
            &[0xc0],
            &[0x91, 0x07],
            &[0x01],
            &[0xc0],
            &[0xc0],
            &[0xc0],
            &nested,
        ],
    );
    // A map event whose "type" comes last: every other key is remembered until then, and a
    // million repeats of one key must not be a million entries.
    let mut repeated = vec![0x93, 0xcb];
    repeated.extend_from_slice(&1.0f64.to_be_bytes());
    repeated.push(0x91);
    repeated.push(0xdf);
    repeated.extend_from_slice(&((EVENT_BLOCKS as u32) * 2 + 1).to_be_bytes());
    for _ in 0..EVENT_BLOCKS {
        repeated.extend_from_slice(b"\xacblock_hashes\x90");
        repeated.extend_from_slice(b"\xa1x\xc0");
    }
    repeated.extend_from_slice(b"\xa4type\xabBlockStored\x00");
    let repeated = write(dir, "repeated.msgpack", repeated);
    // The largest event read: a million blocks of one token, all of them indexed.
    let at_cap = one_event(
        "at-cap.msgpack",
        &[
            &uint64s(EVENT_BLOCKS),
            &[0xc0],
            &array32(EVENT_BLOCKS, &[0x07]),
            &[0x01],
        ],
    );
    // A capture whose topic carries terminal control sequences (retitle, clear screen, bell)
    // and a newline (which would start a false row of the pod table).
    let mut hostile_topic = Vec::new();
    let topic = b"kv@\x1b]0;owned\x07\x1b[2J\nrow@m";
    hostile_topic.extend_from_slice(&(topic.len() as u32).to_be_bytes());
    hostile_topic.extend_from_slice(topic);
    hostile_topic.extend_from_slice(&0u64.to_be_bytes());
    // One BlockStored of 16 tokens, so that the pod (named by the topic) is listed.
    let mut batch = vec![0x93, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x91, 0x95, 0xab];
    batch.extend_from_slice(b"BlockStored");
    batch.extend_from_slice(&[0x91, 0x07, 0xc0, 0xdc, 0, 16]);
    batch.extend(1..=16u8);
    batch.extend_from_slice(&[16, 0x00]);
    hostile_topic.extend_from_slice(&(batch.len() as u32).to_be_bytes());
    hostile_topic.extend_from_slice(&batch);
    let hostile_topic = write(dir, "topic.frames", hostile_topic);
    let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        Case {
            name: "a raised message with control sequences",
            args: diff_turns(&[
                "--template",
                &template(
                    "raise-ctl.jinja",
                    "{{ raise_exception('bad \\x1b]0;owned\\x07 \\x1b[2J\\nline two') }}",
                ),
            ]),
            code: 2,
            fragment: "bad \\u001b]0;owned\\u0007 \\u001b[2J line two",
            max_mb: 256,
        },
        Case {
            name: "a raised message of 10 MB",
            args: diff_turns(&[
                "--template",
                &template("raise-big.jinja", "{{ raise_exception('x' * 10000000) }}"),
            ]),
            code: 2,
            fragment: "characters left out]",
            max_mb: 384,
        },
        Case {
            name: "a capture topic with control sequences",
            args: owned(&["replay", &hostile_topic]),
            code: 1,
            fragment: "\\u001b]0;owned\\u0007\\u001b[2J\\nrow",
            max_mb: 256,
        },
        Case {
            name: "an event of 1,048,577 block hashes",
            args: owned(&["replay", &many_hashes]),
            code: 2,
            fragment: "block_hashes: 1048577 entries in one event, more than the 1048576",
            max_mb: 256,
        },
        Case {
            name: "--keep-going counts it as too_large",
            args: owned(&["replay", "--keep-going", "--format", "json", &many_hashes]),
            code: 1,
            fragment: "\"too_large\"",
            max_mb: 256,
        },
        Case {
            name: "an event of 16,777,217 token ids",
            args: owned(&["replay", &many_tokens]),
            code: 2,
            fragment: "token_ids: 16777217 entries in one event",
            max_mb: 256,
        },
        Case {
            name: "an event of 1,048,577 extra-key entries",
            args: owned(&["replay", &many_extra_keys]),
            code: 2,
            fragment: "extra_keys: 1048577 entries in one event",
            max_mb: 256,
        },
        Case {
            name: "a million nils in one extra-key entry",
            args: owned(&["replay", &nested_tree]),
            code: 2,
            fragment: "entries kvaudit decodes in nested fields",
            max_mb: 256,
        },
        Case {
            name: "a map event repeating one key a million times",
            args: owned(&["replay", &repeated]),
            code: 2,
            fragment: "BlockStored lacks block_hashes, token_ids or block_size",
            max_mb: 256,
        },
        Case {
            name: "--jobs 100000",
            args: owned(&[
                "corpus",
                "--model",
                TINY,
                "fixtures/corpus/chats.jsonl",
                "--jobs",
                "100000",
            ]),
            code: 2,
            fragment: "--jobs 100000 is more than the 1024 worker threads allowed",
            max_mb: 256,
        },
        Case {
            name: "--jobs 2^64-1",
            args: owned(&["check", "--model", TINY, "--jobs", "18446744073709551615"]),
            code: 2,
            fragment: "more than the 1024 worker threads allowed",
            max_mb: 256,
        },
        Case {
            name: "an event of exactly 1,048,576 blocks is replayed",
            args: owned(&["replay", &at_cap]),
            code: 0,
            fragment: "",
            max_mb: 640,
        },
        Case {
            name: "frame claiming a 1 GiB payload in 122 bytes",
            args: owned(&["replay", &claim]),
            code: 2,
            fragment: "claims 1073741824 payload bytes but the file ends at byte 122",
            max_mb: 256,
        },
        Case {
            name: "msgpack header claiming 4 G elements",
            args: owned(&["replay", &raw]),
            code: 2,
            fragment: "more than the 1 GiB limit",
            max_mb: 256,
        },
        Case {
            name: "--keep-going on 16 MB of zeros",
            args: owned(&["replay", "--keep-going", &zeros]),
            code: 1,
            fragment: "1048576 malformed",
            max_mb: 256,
        },
        Case {
            name: "vocab id 4294967295",
            args: owned(&["diff-turns", "--model", &bigid.display().to_string()]),
            code: 2,
            fragment: "token id 4294967295 is out of range",
            max_mb: 256,
        },
        Case {
            name: "a connect timeout past a year",
            args: owned(&[
                "capture",
                "--endpoint",
                "tcp://127.0.0.1:1",
                "--out",
                &dir.join("x.frames").display().to_string(),
                "--connect-timeout",
                "99999999999999999999s",
            ]),
            code: 2,
            fragment: "longer than a year",
            max_mb: 256,
        },
        Case {
            name: "indent bomb",
            args: diff_turns(&[
                "--template",
                &template("indent.jinja", "{{ 'a\\nb'|indent(10**10) }}"),
            ]),
            code: 2,
            fragment: "indent would produce more than",
            max_mb: 256,
        },
        Case {
            name: "tojson indent bomb",
            args: diff_turns(&[
                "--template",
                &template("tojson.jinja", "{{ messages|tojson(indent=10**9) }}"),
            ]),
            code: 2,
            fragment: "tojson would produce more than",
            max_mb: 256,
        },
        Case {
            name: "join of a repeated 10 MB string",
            args: diff_turns(&[
                "--template",
                &template("join.jinja", "{{ ([('x'*10**7)]*100)|join }}"),
            ]),
            code: 2,
            fragment: "join would produce more than",
            max_mb: 640,
        },
        Case {
            name: "string doubling",
            args: diff_turns(&[
                "--template",
                &template(
                    "double.jinja",
                    "{% set s = namespace(v='x') %}{% for i in range(40) %}{% set s.v = s.v ~ s.v %}{% endfor %}{{ s.v }}",
                ),
            ]),
            code: 2,
            fragment: "out of fuel",
            max_mb: 640,
        },
        Case {
            name: "output over the limit",
            args: diff_turns(&[
                "--template",
                &template(
                    "output.jinja",
                    "{% for i in range(40) %}{{ 'x' * 10**6 }}{% endfor %}",
                ),
            ]),
            code: 2,
            fragment: "output exceeds",
            max_mb: 384,
        },
        Case {
            name: "debug() is not a Jinja2 global",
            args: diff_turns(&["--template", &template("debug.jinja", "{{ debug() }}")]),
            code: 2,
            fragment: "debug is unknown",
            max_mb: 256,
        },
        Case {
            name: "50,000 flat tags",
            args: diff_turns(&[
                "--template",
                &template(
                    "flat.jinja",
                    &("{% if true %}{% endif %}".repeat(50_000)
                        + "{% for m in messages %}{{ m.content }}{% endfor %}"),
                ),
            ]),
            code: 0,
            fragment: "",
            max_mb: 384,
        },
        Case {
            name: "template over 4 MiB",
            args: diff_turns(&["--template", &template("big.jinja", &"x".repeat(5 << 20))]),
            code: 2,
            fragment: "more than the 4194304 allowed",
            max_mb: 256,
        },
        Case {
            name: "template is a device",
            args: diff_turns(&["--template", "/dev/zero"]),
            code: 2,
            fragment: "not a regular file",
            max_mb: 256,
        },
        Case {
            name: "100,000 messages",
            args: diff_turns(&["--conversation", &many]),
            code: 2,
            fragment: "more than the 10000",
            max_mb: 512,
        },
        Case {
            name: "20 MB message",
            args: diff_turns(&["--conversation", &huge_message]),
            code: 2,
            fragment: "larger than the 8 MiB limit",
            max_mb: 256,
        },
        Case {
            name: "lone surrogate",
            args: diff_turns(&["--conversation", &surrogate]),
            code: 2,
            fragment: "surrogate",
            max_mb: 256,
        },
        Case {
            name: "UTF-8 BOM is accepted",
            args: diff_turns(&["--conversation", &bom]),
            code: 1,
            fragment: "turn 1 -> 2",
            max_mb: 256,
        },
        Case {
            name: "a date past Python's datetime",
            args: [
                "diff-turns",
                "--model",
                TINY,
                "--now",
                "+262142-12-31T23:00:00",
                "--date-rollover",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            code: 2,
            fragment: "--now",
            max_mb: 256,
        },
        Case {
            name: "a date-rollover clock at the end of the range",
            args: [
                "diff-turns",
                "--model",
                TINY,
                "--now",
                "9999-12-31T23:00:00",
                "--date-rollover",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            code: 1,
            fragment: "",
            max_mb: 256,
        },
    ]
}

#[test]
fn hostile_inputs_end_cleanly_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for case in cases(dir.path()) {
        let args: Vec<&str> = case.args.iter().map(String::as_str).collect();
        let m = common::run_measured(&args, &[], Duration::from_secs(60), case.max_mb);
        let stdout = String::from_utf8_lossy(&m.stdout);
        let text = if m.code == 2 {
            m.stderr.clone()
        } else {
            format!("{stdout}{}", m.stderr)
        };
        let one_line = m.code != 2 || m.stderr.trim_end().lines().count() == 1;
        // Whatever the input held, the terminal gets no control character but line breaks
        // and tabs, and no line longer than a person reads (1,000 characters and the note of
        // what was cut).
        let raw_control = |t: &str| t.chars().any(|c| c.is_control() && c != '\n' && c != '\t');
        let short = m.stderr.lines().all(|l| l.chars().count() <= 1100);
        let ok = !m.killed
            && m.code == case.code
            && text.contains(case.fragment)
            && one_line
            && short
            && !raw_control(&m.stderr)
            && !raw_control(&stdout)
            && !m.stderr.contains("panicked");
        eprintln!(
            "{:<45} exit {:>3}  cap {:>4} MiB  {}",
            case.name,
            m.code,
            case.max_mb,
            m.stderr.lines().next().unwrap_or("")
        );
        if !ok {
            failures.push(format!(
                "{}: exit {} (want {}), killed {}, cap {} MiB, stderr {:?}",
                case.name, m.code, case.code, m.killed, case.max_mb, m.stderr
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Output that cannot be written is an error, output nobody reads (a closed pipe) is not.
#[test]
fn a_full_disk_under_stdout_is_an_error_and_a_closed_pipe_is_not() {
    use std::process::Stdio;
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    for args in [
        vec!["--help"],
        vec!["--version"],
        vec![
            "diff-turns",
            "--model",
            TINY,
            "--now",
            "2026-01-15T10:00:00",
        ],
    ] {
        let out = common::kvaudit_process()
            .args(&args)
            .stdout(full())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("error: cannot write") && stderr.contains("No space left"),
            "{args:?}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        // The same into a pipe closed before anything is read: success, nothing on stderr.
        let mut child = common::kvaudit_process()
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {:?}", out.stderr);
        assert!(
            out.stderr.is_empty(),
            "{:?}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Conversations just under the 8 MiB limit, tokenized as a user's runs do (with the prepared
/// tokenizer, built by the first run and read by the second): one word of 8 MB (a run of
/// letters no split breaks, merged as one BPE word) and 8 MB of short words. Each stays
/// within a fixed multiple of its size: 768 MiB of address space for 8 MB of text.
#[test]
fn conversations_at_the_size_limit_stay_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let near_limit = |name: &str, text: String| {
        write(
            dir.path(),
            name,
            conversation(&[
                ("user", text),
                ("assistant", "ok".into()),
                ("user", "more".into()),
            ]),
        )
    };
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let words: String = (0..8_000_000)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            b"abcdefghijklmnopqrstuvwxyz    \n"[(state % 31) as usize] as char
        })
        .collect();
    let inputs = [
        (
            "one word of 8 MB",
            near_limit("one_word.json", "x".repeat(8_000_000)),
        ),
        ("8 MB of short words", near_limit("many_words.json", words)),
    ];
    let cache = dir.path().join("cache");
    let env = [("KVAUDIT_TOKENIZER_CACHE", cache.to_str().unwrap())];
    let mut failures = Vec::new();
    for (name, path) in &inputs {
        for run in ["preparing", "prepared"] {
            let args = diff_turns(&["--conversation", path, "--format", "json"]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let m = common::run_measured(&args, &env, Duration::from_secs(120), 768);
            // The tiny model's template drops the think block: one rewrite point, exit 1.
            let report: Option<serde_json::Value> = serde_json::from_slice(&m.stdout).ok();
            let held = report
                .as_ref()
                .and_then(|r| r["conversations"][0]["transitions"][0]["held_tokens"].as_u64());
            if m.code != 1 || held.is_none_or(|h| h < 1_000_000) {
                failures.push(format!(
                    "{name} ({run}): exit {}, held {held:?}, stderr {:?}",
                    m.code,
                    &m.stderr[..m.stderr.len().min(300)]
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
