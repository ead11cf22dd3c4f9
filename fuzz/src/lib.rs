//! What each fuzz target does with one input. Shared by the libFuzzer targets
//! (`fuzz/fuzz_targets/*.rs`) and the main crate's `tests/fuzz_regressions.rs`, which includes
//! this file with `#[path]` and replays the saved crashing inputs in `fuzz/regressions/<target>/`.
//! Every function must return normally for any input: a panic is a finding.

use std::io::{Cursor, Read};

use kvaudit::events::frames::CaptureReader;
use kvaudit::events::{Engine, Pool, decode_batch_with};
use kvaudit::replay::{ReplayOptions, Replayer};
use kvaudit::routers::llm_d::IndexConfig;

/// What a target runs on one input.
pub type Target = fn(&[u8]);

/// Target names, in the order run.sh runs them, with the function each one calls.
pub const TARGETS: &[(&str, Target)] = &[
    ("decode_events", decode_events),
    ("frames_reader", frames_reader),
    ("replay_bytes", replay_bytes),
    ("conversation_json", conversation_json),
    ("template_render", template_render),
    ("prepared_tokenizer", prepared_tokenizer),
    ("zmtp_frames", zmtp_frames),
    ("template_methods", template_methods),
    ("parquet_rows", parquet_rows),
    ("gguf_metadata", gguf_metadata),
    ("corpus_partial", corpus_partial),
    ("server_request", server_request),
    ("http_follower", http_follower),
    ("router_config", router_config),
];

/// Equal, or both print the same (NaN timestamps and floats compare unequal to themselves).
fn same<T: PartialEq + std::fmt::Debug>(a: &T, b: &T) -> bool {
    a == b || format!("{a:?}") == format!("{b:?}")
}

/// One payload through the fast-path decoder and the general decoder, for each engine: both
/// must accept or both reject, and decode the same batch. The fast pool then gets its batch
/// back and decodes again: recycled bodies must not leak into the next batch.
pub fn decode_events(data: &[u8]) {
    for engine in [Engine::Vllm, Engine::Sglang] {
        let mut fast = Pool::default();
        let mut general = Pool::general_only();
        let a = decode_batch_with(data, 0, engine, &mut fast);
        let b = decode_batch_with(data, 0, engine, &mut general);
        match (a, b) {
            (Ok(a), Ok(b)) => {
                assert!(
                    same(&a, &b),
                    "{engine:?}: fast path and general decoder differ\nfast:    {a:?}\ngeneral: {b:?}"
                );
                fast.recycle(a);
                let again = decode_batch_with(data, 0, engine, &mut fast)
                    .expect("decoding the same payload with a recycled pool failed");
                assert!(
                    same(&again, &b),
                    "{engine:?}: recycled pool decodes differently\nrecycled: {again:?}\ngeneral:  {b:?}"
                );
            }
            (Err(_), Err(_)) => {}
            (a, b) => panic!(
                "{engine:?}: fast path and general decoder disagree on accepting\nfast:    {a:?}\ngeneral: {b:?}"
            ),
        }
    }
}

/// A reader that hands out at most a few bytes per `read` (sizes from the data itself), so
/// the capture reader's refills split frames and payloads at every possible point.
struct Trickle<'a> {
    data: &'a [u8],
    at: usize,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.data.len() - self.at;
        let step = 1 + (self.data.get(self.at).copied().unwrap_or(0) as usize % 7);
        let n = step.min(left).min(buf.len());
        buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

type Read1 = Result<(Option<String>, Option<u64>, Vec<u8>, u64, u64), (u64, String)>;

fn read_all(reader: impl Read, limit: usize) -> Vec<Read1> {
    let mut out = Vec::new();
    let Ok(mut r) = CaptureReader::new(reader) else {
        return out;
    };
    while let Some(m) = r.next_ref() {
        assert!(
            out.len() <= limit,
            "capture reader yields more messages than bytes"
        );
        match m {
            Ok(m) => out.push(Ok((
                m.topic.map(str::to_string),
                m.seq,
                m.payload.to_vec(),
                m.offset,
                m.payload_offset,
            ))),
            Err(e) => {
                out.push(Err((e.offset, e.reason)));
                break;
            }
        }
    }
    assert!(
        r.offset() <= limit as u64,
        "reader offset {} past the end",
        r.offset()
    );
    out
}

/// A capture file read whole (a Cursor) and read a few bytes at a time: the same messages,
/// offsets and error.
pub fn frames_reader(data: &[u8]) {
    let whole = read_all(Cursor::new(data), data.len());
    let trickled = read_all(Trickle { data, at: 0 }, data.len());
    assert_eq!(whole, trickled, "messages differ with short reads");
    for m in whole.iter().flatten() {
        let (_, _, payload, offset, payload_offset) = m;
        assert!(offset <= payload_offset);
        assert!(*payload_offset as usize + payload.len() <= data.len());
        assert_eq!(
            &data[*payload_offset as usize..][..payload.len()],
            payload.as_slice()
        );
    }
}

fn replay_with(data: &[u8], keep_going: bool, configure: impl Fn(&mut IndexConfig)) {
    let views = [16, 64]
        .into_iter()
        .map(|b| {
            let mut c = IndexConfig::new(b);
            configure(&mut c);
            c
        })
        .collect();
    let opts = ReplayOptions {
        views,
        dynamo: vec![None, Some(16)],
        engine: Engine::Vllm,
        keep_going,
        default_pod: "pod".to_string(),
    };
    let Ok(mut reader) = CaptureReader::new(Cursor::new(data)) else {
        return;
    };
    let mut replayer = Replayer::new(opts);
    while let Some(read) = reader.next_ref() {
        let Ok(msg) = read else { break };
        if replayer.feed(msg).is_err() {
            assert!(!keep_going, "keep_going replay stopped on a message");
            break;
        }
    }
    let report = replayer.finish(&[]);
    let _ = report.has_findings();
}

/// A capture file through the whole replay pipeline (as `kvaudit replay`), stopping on bad
/// input and going on past it, with the default index and with xxh64 / the 2026-08 router.
pub fn replay_bytes(data: &[u8]) {
    replay_with(data, false, |_| {});
    replay_with(data, true, |c| {
        c.algo = kvaudit::routers::llm_d::HashAlgo::Xxh64;
        c.profile = kvaudit::routers::llm_d::Profile::Router202608;
        c.seed = "fuzz".into();
    });
}

/// A conversation file's text: parse, then ask its clock for a few prompts' times.
pub fn conversation_json(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(conv) = kvaudit::render::Conversation::from_json_text(&text, "fuzz.json")
        && let Some(clock) = &conv.clock
    {
        for i in [0, 1, conv.messages.len(), usize::MAX] {
            let _ = clock.at(i);
            let _ = clock.frozen();
        }
    }
}

/// Instructions per render: small, so a slow template ends in a fuel error quickly.
pub const TEMPLATE_FUEL: u64 = 100_000;

/// `template \0 conversation-json`: the template rendered with the conversation's messages,
/// tools, documents and kwargs as `kvaudit render` passes them (a default chat when the JSON
/// part is missing or invalid). Errors are fine; panics and hangs are not.
pub fn template_render(data: &[u8]) {
    use kvaudit::render::{ChatRenderer, Conversation, RenderInput};
    use serde_json::{Map, Value as Json, json};
    let (src, rest) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let Ok(src) = std::str::from_utf8(src) else {
        return;
    };
    let mut special = Map::new();
    special.insert("bos_token".into(), json!("<s>"));
    special.insert("eos_token".into(), json!("</s>"));
    let Ok(renderer) = ChatRenderer::new(src, special, TEMPLATE_FUEL) else {
        return;
    };
    let conv = Conversation::from_json_text(&String::from_utf8_lossy(rest), "fuzz.json").ok();
    let default_messages = [
        json!({"role": "system", "content": "Be brief."}),
        json!({"role": "user", "content": "Hi"}),
        json!({"role": "assistant", "content": "Hello!"}),
        json!({"role": "user", "content": "What is 2+2?"}),
    ];
    let no_kwargs = Map::new();
    let fixed = chrono::NaiveDate::from_ymd_opt(2026, 1, 15)
        .and_then(|d| d.and_hms_opt(10, 0, 0))
        .unwrap_or_default();
    let input = match &conv {
        Some(c) => RenderInput {
            messages: &c.messages,
            message_values: None,
            tools: c.tools.as_ref(),
            documents: c.documents.as_ref(),
            kwargs: &c.template_kwargs,
            add_generation_prompt: true,
            now: c.clock.as_ref().map_or(fixed, |k| k.at(0)),
        },
        None => RenderInput {
            messages: &default_messages,
            message_values: None,
            tools: None::<&Json>,
            documents: None,
            kwargs: &no_kwargs,
            add_generation_prompt: true,
            now: fixed,
        },
    };
    let _ = renderer.render(&input);
}

/// The calls `template_methods` makes: Python string methods (kvaudit's own and
/// minijinja-contrib's), filters, and the operators that make text, each as the template text
/// that applies it to `r`. The ones that can make far more output than input come first.
pub const CALLS: &[&str] = &[
    ".center",
    ".ljust",
    ".rjust",
    ".zfill",
    ".format",
    ".replace",
    ".join",
    "|format",
    "|replace",
    "|join",
    "|indent",
    "|tojson",
    "|string",
    "|pprint",
    "|trim",
    "|center",
    "|batch",
    "|slice",
    "|wordwrap",
    "|truncate",
    " ~ ",
    " * ",
    " + ",
    ".split",
    ".rsplit",
    ".splitlines",
    ".strip",
    ".lstrip",
    ".title",
    ".upper",
    ".capitalize",
    ".partition",
    ".expandtabs",
    ".count",
    ".startswith",
    ".removeprefix",
    ".swapcase",
    "|upper",
    "|title",
    "|list",
    "|unique",
    "|sort",
    "|e",
    "|safe",
    "|first",
    "|length",
    "|items",
    "|dictsort",
];

/// Output limit for the methods target: small, so inputs that ask for the most output (a
/// width of 10**9, a precision of 2**31) are refused quickly instead of filling 16 MB each.
pub const METHODS_OUTPUT_LIMIT: usize = 1 << 16;

/// One fuzzed value: a tag byte, then its text. `s` a string, `i` an integer, `f` a float,
/// `n` None, `t`/`F` a bool, `l` a list of the comma-separated parts, `d` a dict of
/// `key=value` parts; any other tag starts a string that includes it.
fn fuzzed_value(field: &[u8]) -> serde_json::Value {
    use serde_json::{Value as Json, json};
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let Some((&tag, rest)) = field.split_first() else {
        return json!("");
    };
    let body = text(rest);
    match tag {
        b'i' => body
            .trim()
            .parse::<i64>()
            .map(Json::from)
            .or_else(|_| body.trim().parse::<u64>().map(Json::from))
            .unwrap_or(json!(0)),
        b'f' => body
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or(json!(0.5), Json::Number),
        b's' => json!(body),
        b'n' => Json::Null,
        b't' => json!(true),
        b'F' => json!(false),
        b'l' => Json::Array(body.split(',').map(|p| json!(p)).collect()),
        b'd' => Json::Object(
            body.split(',')
                .map(|kv| match kv.split_once('=') {
                    Some((k, v)) => (k.to_string(), json!(v)),
                    None => (kv.to_string(), Json::Null),
                })
                .collect(),
        ),
        _ => json!(text(field)),
    }
}

/// `call, shape, receiver \0 arg \0 arg ...`: `CALLS[call]` applied to the receiver with up
/// to three arguments (`shape` says how many, and whether the last is passed by keyword),
/// rendered through kvaudit's real template environment with a small output limit. Errors are
/// fine; a panic, an output past the limit or a hang is not.
pub fn template_methods(data: &[u8]) {
    use kvaudit::render::{ChatRenderer, RenderInput};
    use serde_json::{Map, json};
    let [call, shape, rest @ ..] = data else {
        return;
    };
    let call = CALLS[*call as usize % CALLS.len()];
    let mut fields = rest.split(|&b| b == 0);
    let receiver = fuzzed_value(fields.next().unwrap_or_default());
    let count = (*shape % 4) as usize;
    let mut kwargs = Map::new();
    kwargs.insert("r".into(), receiver);
    let mut args = Vec::new();
    for i in 0..count {
        kwargs.insert(
            format!("a{i}"),
            fuzzed_value(fields.next().unwrap_or_default()),
        );
        args.push(format!("a{i}"));
    }
    // A keyword name for the last argument, from the ones the calls take.
    if count > 0 && shape & 4 != 0 {
        const KEYWORDS: &[&str] = &["width", "indent", "first", "blank", "count", "fill", "d"];
        let name = KEYWORDS[(*shape as usize >> 3) % KEYWORDS.len()];
        let last = args.pop().unwrap_or_default();
        args.push(format!("{name}={last}"));
    }
    let expr = match call {
        " ~ " | " * " | " + " => format!("r{call}{}", args.first().map_or("r", String::as_str)),
        _ => format!("r{call}({})", args.join(", ")),
    };
    // Twice in a row when the shape says so: a call on the first call's result.
    let template = if shape & 0x80 != 0 {
        format!("{{{{ ({expr}){call}({}) }}}}", args.join(", "))
    } else {
        format!("{{{{ {expr} }}}}")
    };
    kvaudit::render::set_output_limit(METHODS_OUTPUT_LIMIT);
    let Ok(renderer) = ChatRenderer::new(&template, Map::new(), TEMPLATE_FUEL) else {
        return;
    };
    let messages = [json!({"role": "user", "content": "Hi"})];
    let fixed = chrono::NaiveDate::from_ymd_opt(2026, 1, 15)
        .and_then(|d| d.and_hms_opt(10, 0, 0))
        .unwrap_or_default();
    let input = RenderInput {
        messages: &messages,
        message_values: None,
        tools: None,
        documents: None,
        kwargs: &kwargs,
        add_generation_prompt: true,
        now: fixed,
    };
    if let Ok(text) = renderer.render(&input) {
        assert!(
            text.len() <= METHODS_OUTPUT_LIMIT,
            "{template}: {} bytes past the output limit",
            text.len()
        );
    }
}

/// The tokenizer.json the prepared files are keyed to. Its vocabulary and merges are empty, so
/// a body whose offsets point at them (18 and 30) passes the spot check and reaches the tables;
/// its normalizer is not one, so a body that does not load makes `Tokenizer::load` fail at once
/// instead of building a tokenizer from it.
pub const SOURCE_JSON: &[u8] = br#"{"model":{"vocab":{},"merges":[]},"normalizer":7}"#;

/// A prepared-tokenizer file whose header (magic, source key, body checksum) is valid for
/// `body`, made by kvaudit itself so that it follows the format's version.
pub fn prepared_file(body: &[u8]) -> Vec<u8> {
    kvaudit::tokenize::prepared_file(body, SOURCE_JSON)
}

/// `body` sealed as the prepared form of `SOURCE_JSON` in `dir`, then loaded through the cache
/// the way `Tokenizer::load` finds it.
pub fn load_body(
    dir: &std::path::Path,
    body: &[u8],
) -> Result<kvaudit::tokenize::Tokenizer, kvaudit::tokenize::TokenizeError> {
    std::fs::write(dir.join("tokenizer.json"), SOURCE_JSON).expect("write tokenizer.json");
    let key = xxhash_rust::xxh3::xxh3_128(SOURCE_JSON);
    let cached = dir.join(format!("{key:032x}.kvtok"));
    std::fs::write(&cached, prepared_file(body)).expect("write prepared file");
    kvaudit::tokenize::Tokenizer::load(&dir.join("tokenizer.json"), Some(dir))
}

/// The input is the body of a prepared-tokenizer file (after magic, key and checksum); a file
/// that loads must then encode, decode and look up tokens without panicking.
pub fn prepared_tokenizer(body: &[u8]) {
    use std::sync::OnceLock;
    static DIR: OnceLock<std::path::PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("kvaudit-fuzz-tok-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("temp dir");
        d
    });
    let Ok(tok) = load_body(dir, body) else {
        return;
    };
    assert!(tok.is_prepared());
    let _ = tok.sha256();
    let n = tok.vocab_size();
    for text in [
        "Hello world! 12345 ünïcödé 日本語 🙂\n\n  x",
        "",
        " ",
        "<s>a</s>",
    ] {
        if let Ok(ids) = tok.encode(text) {
            let _ = tok.decode(&ids);
        }
    }
    let probe: Vec<u32> = (0..(n.min(64) as u32))
        .chain([u32::MAX, n as u32])
        .collect();
    let _ = tok.decode(&probe);
    let _ = tok.token_id("a");
    let _ = tok.token_id("<s>");
}

/// What a ZMTP decoder made of a byte stream: its events, and the error that ended it.
type Decoded = (
    Vec<kvaudit::capture::zmtp::Event>,
    Option<kvaudit::capture::zmtp::ZmtpError>,
);

/// Feed `chunks` to a decoder in order, checking on every call that it consumes no more than
/// it was given, stops early only at an event, and never holds more than the limits allow.
fn zmtp_decode<'a>(
    limits: kvaudit::capture::zmtp::Limits,
    chunks: impl Iterator<Item = &'a [u8]>,
) -> Decoded {
    use kvaudit::capture::zmtp::{Decoder, Event};
    let mut d = Decoder::new(limits);
    let mut events = Vec::new();
    let bound = limits.max_message.max(limits.max_command);
    for chunk in chunks {
        let mut rest = chunk;
        loop {
            match d.decode(rest) {
                Ok((n, event)) => {
                    assert!(n <= rest.len(), "consumed {n} of {}", rest.len());
                    rest = &rest[n..];
                    assert!(
                        d.held() <= bound,
                        "holds {} bytes, limits {limits:?}",
                        d.held()
                    );
                    match event {
                        Some(e) => {
                            match &e {
                                Event::Message(frames) => {
                                    assert!(
                                        !frames.is_empty() && frames.len() <= limits.max_frames
                                    );
                                    let total: usize = frames.iter().map(|f| f.len()).sum();
                                    assert!(total <= limits.max_message, "{total} > {limits:?}");
                                }
                                Event::Command(body) => {
                                    assert!(body.len() <= limits.max_command);
                                    // Whatever a command holds, reading it must not panic.
                                    if let Ok(c) = kvaudit::capture::zmtp::Command::parse(body) {
                                        let _ = kvaudit::capture::zmtp::properties(c.data);
                                    }
                                }
                                Event::Greeting(_) => assert!(events.is_empty()),
                            }
                            events.push(e);
                        }
                        None => {
                            assert!(rest.is_empty(), "stopped with input left and no event");
                            break;
                        }
                    }
                    if rest.is_empty() {
                        break;
                    }
                }
                Err(e) => return (events, Some(e)),
            }
        }
    }
    (events, None)
}

/// Bytes from a ZMTP peer through the capture's frame decoder, in one piece and in pieces of
/// 1 to 8 bytes (sizes from the data): the same events and the same error, within the bounds.
/// The first byte picks the limits (small ones, so that every bound is reached) and whether
/// a valid greeting comes first (most inputs would fail at the greeting otherwise).
pub fn zmtp_frames(data: &[u8]) {
    use kvaudit::capture::zmtp::{Limits, greeting};
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let limits = Limits {
        max_message: [0, 1, 16, 300, 1 << 16][usize::from(mode >> 1) % 5],
        max_frames: [1, 3, 64][usize::from(mode >> 4) % 3],
        max_command: [0, 8, 300, 1 << 16][usize::from(mode >> 6)],
    };
    let mut input = Vec::with_capacity(64 + rest.len());
    if mode & 1 == 0 {
        input.extend_from_slice(&greeting());
    }
    input.extend_from_slice(rest);
    let whole = zmtp_decode(limits, std::iter::once(&input[..]));
    let mut pieces = Vec::new();
    let mut at = 0;
    while at < input.len() {
        let step = 1 + usize::from(input[at] % 8);
        let end = (at + step).min(input.len());
        pieces.push(&input[at..end]);
        at = end;
    }
    let split = zmtp_decode(limits, pieces.into_iter());
    assert_eq!(
        whole, split,
        "events differ when the bytes arrive in pieces"
    );
}

/// The input is a whole file offered to `corpus` as Parquet: the footer and page checks and
/// then the rows must return normally, whatever the bytes (a damaged file is an error, and
/// no page may make the reader allocate past kvaudit's limits).
pub fn parquet_rows(data: &[u8]) {
    let Some(path) = scratch_file("input.parquet", data) else {
        return;
    };
    let Ok(file) = std::fs::File::open(&path) else {
        return;
    };
    let Ok(mut rows) = kvaudit::corpus::parquet_file::ParquetRows::open(
        file,
        &kvaudit::corpus::parquet_file::Limits::default(),
    ) else {
        return;
    };
    for _ in 0..10_000 {
        match rows.next_json(8 << 20) {
            Some(Ok(_)) => {}
            None | Some(Err(_)) => break,
        }
    }
}

/// The input is a whole file offered as `--model FILE.gguf`: reading its metadata and making
/// the tokenizer files from it must return normally, whatever the bytes, within the limits.
pub fn gguf_metadata(data: &[u8]) {
    let Some(path) = scratch_file("input.gguf", data) else {
        return;
    };
    if let Ok(meta) = kvaudit::model::gguf::read_metadata(&path) {
        let _ = meta.hf_files("input.gguf");
    }
}

/// A corpus partial (`kvaudit merge`), from a file (the reader streams files): read, checked,
/// and taken again as a second shard would be.
pub fn corpus_partial(data: &[u8]) {
    let Some(path) = scratch_file("input.json", data) else {
        return;
    };
    // Read, then read again as the next shard: checked against the first, refused as the
    // same rows when it has any, merged when it has none.
    let _ = kvaudit::corpus::partial::merge_files(&[path.clone(), path]);
}

/// `data` written to `name` in a directory of this fuzzing process's own (the targets whose
/// readers take files: Parquet, GGUF, partials).
fn scratch_file(name: &str, data: &[u8]) -> Option<std::path::PathBuf> {
    use std::sync::OnceLock;
    static DIR: OnceLock<std::path::PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("kvaudit-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("temp dir");
        d
    });
    let path = dir.join(name);
    std::fs::write(&path, data).ok().map(|()| path)
}

/// `{"messages": […], "tools": …, "kwargs": {…}, "server_kwargs": {…}}`: the request as every
/// `--server` profile prepares it for a template that takes content as a string and for one
/// that loops over content parts, as a prompt and as a reply. Refusals are fine; panics are not.
pub fn server_request(data: &[u8]) {
    use kvaudit::render::ServerProfile;
    use kvaudit::render::server::{ContentFormats, Request};
    use serde_json::{Map, Value as Json};
    let Ok(v) = serde_json::from_slice::<Json>(data) else {
        return;
    };
    let messages = v
        .get("messages")
        .and_then(Json::as_array)
        .cloned()
        .unwrap_or_default();
    let map = |key: &str| {
        v.get(key)
            .and_then(Json::as_object)
            .cloned()
            .unwrap_or_else(Map::new)
    };
    let (kwargs, server_kwargs) = (map("kwargs"), map("server_kwargs"));
    let templates = [
        "{% for m in messages %}{{ m.content }}{% endfor %}",
        "{% for m in messages %}{% for c in m.content %}{{ c.text }}{% endfor %}{% endfor %}",
    ];
    for template in templates {
        let formats = ContentFormats::detect(template);
        for (_, profile, _) in ServerProfile::VALUES {
            for reply in [false, true] {
                let request = Request {
                    messages: &messages,
                    tools: v.get("tools"),
                    documents: v.get("documents"),
                    kwargs: &kwargs,
                    server_kwargs: &server_kwargs,
                    add_generation_prompt: !reply,
                    reply,
                };
                let _ = profile.prepare(template, &formats, &request);
            }
        }
    }
}

/// One direction of a connection as watch's proxy follows a copy of it: the first byte picks
/// the side (bit 0), whether the requests answered were HEAD (bit 1) and the size of the
/// pieces the rest arrives in (bits 2-7: 1 to 64 bytes). A request body kept is never past
/// the follower's bound; panics are not fine.
pub fn http_follower(data: &[u8]) {
    use kvaudit::watch::http::{Follower, Side};
    const MAX_BODY: usize = 4096;
    let Some((&first, bytes)) = data.split_first() else {
        return;
    };
    let side = if first & 1 == 0 {
        Side::Request
    } else {
        Side::Response
    };
    let mut follower = Follower::new(side, MAX_BODY);
    if side == Side::Response {
        for i in 0..64 {
            follower.request_sent(first & 2 != 0 && i % 3 == 0);
        }
    }
    let piece = usize::from(first >> 2) + 1;
    let mut done = Vec::new();
    for part in bytes.chunks(piece) {
        follower.feed(part, Some("x-pod"), &mut done);
        for m in done.drain(..) {
            if side == Side::Request {
                assert!(m.body.as_ref().is_none_or(|b| b.len() <= MAX_BODY));
            }
        }
    }
}

/// A router configuration and an engine's serving flags, split at the first NUL: parsed,
/// linted against each other at two engine block sizes, and emulated. Refusals are fine;
/// panics are not.
pub fn router_config(data: &[u8]) {
    use kvaudit::routers::config::{engine_args, lint, parse};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (config, flags) = text.split_once('\0').unwrap_or((text, ""));
    let engine = engine_args(flags).ok();
    if let Ok(loaded) = parse(config) {
        for block in [16, 64] {
            let _ = lint(&loaded, block, engine.as_ref());
        }
        let base = kvaudit::routers::llm_d::view::RouterSettings {
            engine_block_size: 16,
            index: kvaudit::routers::llm_d::IndexConfig::new(64),
            decider: Default::default(),
        };
        let _ = loaded.spec(&base);
    }
}
