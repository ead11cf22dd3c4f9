//! The Gateway API Inference Extension's prefix plugin (v1.5.0, its last release): the
//! request's messages as Go's `json.Marshal` writes them, cut into blocks of 4·B bytes, each
//! block's hash chained to the one before.

use serde_json::Value as Json;

use super::params::{Params, RouterSpecError};
use super::{Answer, Decision, Reason, Router, TransitionView, Units};

/// GAIE's maxPrefixBlocksToMatch at most: 2^20 blocks is 64 M tokens at its smallest block.
pub const MAX_BLOCKS: usize = 1 << 20;

/// `--router gaie`. A block size left out is the engine's (the plugin's auto-tune).
#[derive(Debug, Clone, PartialEq)]
pub struct Gaie {
    pub block_size: Option<usize>,
    pub max_blocks: usize,
}

impl Gaie {
    pub(crate) fn parse(params: &mut Params) -> Result<Self, RouterSpecError> {
        Ok(Gaie {
            block_size: params.block_size()?,
            max_blocks: params.bounded("max_blocks", 1..=MAX_BLOCKS)?.unwrap_or(256),
        })
    }
}

impl Router for Gaie {
    fn name(&self) -> &'static str {
        "gaie"
    }

    fn version(&self) -> &'static str {
        "gateway-api-inference-extension v1.5.0"
    }

    fn answer(&self, t: &TransitionView) -> Answer {
        let block = self.block_size.unwrap_or(t.engine_block_size);
        let m = matched_blocks(t.model, t.request, t.next_request, block, self.max_blocks);
        let visible = (m.matched * block).min(t.next.len());
        let decision = if m.matched > 0 {
            Decision::Decode
        } else {
            Decision::Other
        };
        let rule = format!(
            "prefix scorer {}/{} blocks of {} bytes: {} (a scorer, no P/D decider)",
            m.matched,
            m.total,
            block * BYTES_PER_TOKEN,
            if m.matched > 0 {
                "the pod of turn k scores highest"
            } else {
                "no pod matches"
            }
        );
        let why = match decision {
            Decision::Decode => Reason::HighestPrefixScore,
            Decision::Other => Reason::NoWholeBlock,
        };
        Answer {
            units: Some(Units {
                unit: "bytes",
                matched: m.matched * block * BYTES_PER_TOKEN,
                input: m.input_bytes,
            }),
            ..Answer::tokens(self, visible, decision, why, rule)
        }
    }
}

/// `averageCharactersPerToken`: a block of B "tokens" is 4·B bytes.
pub const BYTES_PER_TOKEN: usize = 4;

/// A request's messages as the plugin's types keep them, in the bytes Go's `json.Marshal`
/// writes: `role` (left out when empty) and `content` only; content that is not a string or
/// an array of parts (null, absent) is `""`; each part is re-written from its typed fields.
pub fn request_bytes(messages: &[Json]) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.push(b'[');
    for (i, m) in messages.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'{');
        match m.get("role").and_then(Json::as_str) {
            Some(role) if !role.is_empty() => {
                out.extend_from_slice(b"\"role\":");
                go_string(&mut out, role);
                out.push(b',');
            }
            _ => {}
        }
        out.extend_from_slice(b"\"content\":");
        match m.get("content") {
            Some(Json::String(s)) => go_string(&mut out, s),
            Some(Json::Array(parts)) => {
                out.push(b'[');
                for (j, part) in parts.iter().enumerate() {
                    if j > 0 {
                        out.push(b',');
                    }
                    content_block(&mut out, part);
                }
                out.push(b']');
            }
            _ => go_string(&mut out, ""),
        }
        out.push(b'}');
    }
    out.push(b']');
    out
}

/// A content part as the plugin's `ContentBlock` re-writes it: `type`, `text` when not empty,
/// and its three media blocks always (`{}` when empty); other keys are dropped.
fn content_block(out: &mut Vec<u8>, part: &Json) {
    fn text(v: Option<&Json>) -> &str {
        v.and_then(Json::as_str).unwrap_or("")
    }
    fn object(out: &mut Vec<u8>, key: &str, fields: &[&str], v: Option<&Json>) {
        out.extend_from_slice(format!(",\"{key}\":{{").as_bytes());
        let mut first = true;
        for f in fields {
            let value = text(v.and_then(|o| o.get(*f)));
            if !value.is_empty() {
                if !first {
                    out.push(b',');
                }
                first = false;
                go_string(out, f);
                out.push(b':');
                go_string(out, value);
            }
        }
        out.push(b'}');
    }
    out.extend_from_slice(b"{\"type\":");
    go_string(out, text(part.get("type")));
    let t = text(part.get("text"));
    if !t.is_empty() {
        out.extend_from_slice(b",\"text\":");
        go_string(out, t);
    }
    object(out, "image_url", &["url"], part.get("image_url"));
    object(
        out,
        "input_audio",
        &["data", "format"],
        part.get("input_audio"),
    );
    object(out, "video_url", &["url"], part.get("video_url"));
    out.push(b'}');
}

/// A string as Go's encoder escapes it: `<`, `>` and `&` as `\u003c`…, U+2028 and U+2029,
/// control characters as `\n`, `\r`, `\t`, `\b`, `\f` or `\u00XX`.
pub fn go_string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes())
            }
            c if (c as u32) < 0x20 => {
                out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes())
            }
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}

/// The chain of block hashes of `bytes`: full blocks only, at most `max_blocks`; the chain
/// starts from the hash of the model's name (a request's `cache_salt` would follow it).
pub fn block_hashes(model: &str, bytes: &[u8], block: usize, max_blocks: usize) -> Vec<u64> {
    // Hashed in place (block, then the hash before it), never copied: a block is as large as
    // its setting says, and the setting is the user's.
    let Some(size) = block.checked_mul(BYTES_PER_TOKEN).filter(|&s| s > 0) else {
        return Vec::new();
    };
    let mut prev = xxhash_rust::xxh64::xxh64(model.as_bytes(), 0);
    bytes
        .chunks_exact(size)
        .take(max_blocks)
        .map(|chunk| {
            let mut h = xxhash_rust::xxh64::Xxh64::new(0);
            h.update(chunk);
            h.update(&prev.to_le_bytes());
            prev = h.digest();
            prev
        })
        .collect()
}

pub struct Match {
    /// Leading blocks of request k+1 the pod that served request k holds.
    pub matched: usize,
    /// Request k+1's blocks.
    pub total: usize,
    pub input_bytes: usize,
}

/// What the plugin matches of request k+1 on the pod that served request k: it recorded
/// request k's block hashes there.
pub fn matched_blocks(
    model: &str,
    request: &[Json],
    next_request: &[Json],
    block: usize,
    max_blocks: usize,
) -> Match {
    let before = block_hashes(model, &request_bytes(request), block, max_blocks);
    let next = request_bytes(next_request);
    let after = block_hashes(model, &next, block, max_blocks);
    Match {
        matched: before
            .iter()
            .zip(&after)
            .take_while(|(a, b)| a == b)
            .count(),
        total: after.len(),
        input_bytes: next.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_marshals_role_and_content_only_and_escapes_html() {
        let m = vec![
            json!({"role": "user", "content": "a<b> & \"c\"\n\u{2028}\u{1}", "name": "x"}),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "1"}]}),
            json!({"content": [{"type": "text", "text": "hi", "cache_control": {}}, {"type": "image_url", "image_url": {"url": "u", "detail": "low"}}]}),
        ];
        assert_eq!(
            String::from_utf8(request_bytes(&m)).unwrap(),
            concat!(
                r#"[{"role":"user","content":"a\u003cb\u003e \u0026 \"c\"\n\u2028\u0001"},"#,
                r#"{"role":"assistant","content":""},"#,
                r#"{"content":[{"type":"text","text":"hi","image_url":{},"input_audio":{},"video_url":{}},"#,
                r#"{"type":"image_url","image_url":{"url":"u"},"input_audio":{},"video_url":{}}]}]"#
            )
        );
    }

    #[test]
    fn the_chain_is_xxh64_of_each_block_and_the_hash_before() {
        // Each step by hand: root = xxh64("m"), h1 = xxh64(block 1 ‖ LE64(root)),
        // h2 = xxh64(block 2 ‖ LE64(h1)); the partial third block is not hashed.
        use xxhash_rust::xxh64::xxh64;
        let bytes: Vec<u8> = (0..150u8).collect();
        let root = xxh64(b"m", 0);
        let h1 = xxh64(&[&bytes[..64], &root.to_le_bytes()[..]].concat(), 0);
        let h2 = xxh64(&[&bytes[64..128], &h1.to_le_bytes()[..]].concat(), 0);
        assert_eq!(block_hashes("m", &bytes, 16, 256), vec![h1, h2]);
        assert_eq!(block_hashes("m", &bytes, 16, 1), vec![h1]);
    }

    #[test]
    fn turn_k_plus_one_matches_the_whole_blocks_before_turn_ks_closing_bracket() {
        let turn1 = vec![json!({"role": "user", "content": "x".repeat(300)})];
        let mut turn2 = turn1.clone();
        turn2.push(json!({"role": "assistant", "content": "ok"}));
        turn2.push(json!({"role": "user", "content": "more"}));
        let len1 = request_bytes(&turn1).len();
        let m = matched_blocks("m", &turn1, &turn2, 16, 256);
        assert_eq!(m.matched, (len1 - 1) / 64);
        assert_eq!(m.input_bytes, request_bytes(&turn2).len());
        assert_eq!(m.total, m.input_bytes / 64);
    }

    /// The plugin's own tests at v1.5.0 (`approximateprefix/plugin_test.go`): they assert
    /// counts, not hash values.
    #[test]
    fn the_plugins_own_test_cases() {
        // TestPrefixPluginCompletion: 6 bytes at 1 token (4 bytes) a block: one hash.
        assert_eq!(block_hashes("m", b"aaaaaa", 1, 256).len(), 1);
        // …and "aaaabbbb" after "aaaaaa" was recorded: 1 of 2 blocks match.
        let before = block_hashes("m", b"aaaaaa", 1, 256);
        let after = block_hashes("m", b"aaaabbbb", 1, 256);
        assert_eq!(
            (after.len(), before[0] == after[0], before.get(1)),
            (2, true, None)
        );
        // TestPrefixPluginAutoTune: 128 bytes at the engine's block 16: two hashes.
        assert_eq!(block_hashes("m", &[b'a'; 128], 16, 256).len(), 2);
        // TestMaxPrefixTokensToMatch: at most 2, then 3, of "aaaabbbbccccdddd"'s 4 blocks.
        assert_eq!(block_hashes("m", b"aaaabbbbccccdddd", 1, 2).len(), 2);
        assert_eq!(block_hashes("m", b"aaaabbbbccccdddd", 1, 3).len(), 3);
        // TestPrefixPluginChatCompletionsGrowth: block 2 (8 bytes); turn 2 has more blocks,
        // some match, and the total is turn 2's count.
        let turn1 = vec![
            json!({"role": "system", "content": "You are a helpful assistant"}),
            json!({"role": "user", "content": "Hello, how are you?"}),
        ];
        let mut turn2 = turn1.clone();
        turn2.push(json!({"role": "assistant", "content": "I'm doing well, thank you! How can I help you today?"}));
        turn2.push(json!({"role": "user", "content": "Can you explain how prefix caching works?"}));
        let m = matched_blocks("m", &turn1, &turn2, 2, 256);
        let (len1, len2) = (request_bytes(&turn1).len(), request_bytes(&turn2).len());
        assert_eq!(len1, 107);
        assert!(m.total > len1 / 8 && m.matched > 0);
        assert_eq!((m.matched, m.total), ((len1 - 1) / 8, len2 / 8));
    }
}
