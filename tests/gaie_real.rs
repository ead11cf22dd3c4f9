//! kvaudit's GAIE view against GAIE's own Go code (v1.5.0, the last release with the prefix
//! plugin), run by the project's harness (harness/gaie, built by .ci/go-harness.sh from the Go
//! module proxy): its OpenAI request parser and approximate prefix plugin, on the turns of
//! real conversations.

use serde_json::{Value as Json, json};

use crate::common;

/// Each request a conversation makes: its messages up to each assistant reply, and all of
/// them when it does not end with one.
fn requests(messages: &[Json]) -> Vec<Vec<Json>> {
    let mut out: Vec<Vec<Json>> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m["role"] == "assistant")
        .map(|(i, _)| messages[..i].to_vec())
        .collect();
    if messages.last().is_some_and(|m| m["role"] != "assistant") {
        out.push(messages.to_vec());
    }
    out
}

/// Every transition of real conversations of every kind in ../shared/corpus (chat, tool calls,
/// agent runs, Japanese, reasoning) at GAIE block sizes 1, 4, 16 and 64: the blocks GAIE's
/// plugin matches on the pod that served turn k, its total blocks and the bytes it hashes
/// equal `diff-turns --router gaie`'s `matched_units`, the rule's total and `input_units`.
#[test]
fn gaie_view_equals_gaies_own_prefix_plugin() {
    let test = "gaie_view_equals_gaies_own_prefix_plugin";
    let Some(shared) = common::shared_dir(test) else {
        return;
    };
    let Some(bin) = common::live::go_harness(test, "gaie", "KVAUDIT_GAIE_HARNESS") else {
        return;
    };
    // The first that renders the conversation (GAIE reads the messages, not the prompt; the
    // render only has to succeed for diff-turns to report the turn).
    let models = [
        "qwen3-8b",
        "qwen2.5-7b-instruct",
        "llama-3.1-8b-instruct",
        "gpt-oss-120b",
    ];
    let blocks = [1usize, 4, 16, 64];
    let dir = tempfile::tempdir().unwrap();
    let mut cases: Vec<Json> = Vec::new();
    let mut ours: Vec<(String, Json)> = Vec::new();
    let mut files = 0;
    let mut unrendered = Vec::new();
    for entry in std::fs::read_dir(shared.join("corpus")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        files += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        for (row, line) in text.lines().take(5).enumerate() {
            let row_json: Json = serde_json::from_str(line).unwrap();
            let mut conv = json!({"messages": row_json["messages"]});
            if let Some(t) = row_json.get("tools").filter(|t| !t.is_null()) {
                conv["tools"] = t.clone();
            }
            let file = dir.path().join(format!("{files}-{row}.json"));
            std::fs::write(&file, conv.to_string()).unwrap();
            let name = format!("{}:{row}", path.file_name().unwrap().to_string_lossy());
            let rendered = models.iter().find_map(|m| {
                let mut cmd = common::kvaudit();
                cmd.arg("diff-turns")
                    .arg("-m")
                    .arg(shared.join("models").join(m))
                    .arg("-c")
                    .arg(&file)
                    .args(["--format", "json"]);
                for b in blocks {
                    cmd.args(["--router", &format!("gaie:block_size={b}")]);
                }
                let out = cmd.output().unwrap();
                (out.status.code() != Some(2)).then_some(out)
            });
            let Some(out) = rendered else {
                unrendered.push(name);
                continue;
            };
            let report: Json = serde_json::from_slice(&out.stdout).unwrap();
            let transitions = report["conversations"][0]["transitions"]
                .as_array()
                .unwrap();
            let reqs = requests(row_json["messages"].as_array().unwrap());
            assert_eq!(transitions.len() + 1, reqs.len(), "{name}: its requests");
            for (k, t) in transitions.iter().enumerate() {
                for (i, b) in blocks.iter().enumerate() {
                    cases.push(json!({
                        "block_size": b,
                        "model": report["model"]["name"].as_str().unwrap_or(""),
                        "request": {"model": "m", "messages": reqs[k]},
                        "next": {"model": "m", "messages": reqs[k + 1]},
                    }));
                    ours.push((
                        format!("{name} transition {k} block {b}"),
                        t["routers"][i].clone(),
                    ));
                }
            }
        }
    }
    assert!(files >= 8, "corpus files: {files}");
    let theirs = common::live::json_lines(&bin.join("prefix"), &cases);
    let mut matched = 0;
    for ((what, ours), (theirs, case)) in ours.iter().zip(theirs.iter().zip(&cases)) {
        assert_eq!(theirs["error"], Json::Null, "{what}: {theirs}");
        let bytes = case["block_size"].as_u64().unwrap() * 4;
        assert_eq!(
            (ours["matched_units"].as_u64(), ours["input_units"].as_u64()),
            (
                Some(theirs["matched"].as_u64().unwrap() * bytes),
                theirs["input_bytes"].as_u64()
            ),
            "{what}: kvaudit {ours} against GAIE {theirs}"
        );
        let total = format!("/{} blocks of {bytes} bytes", theirs["total"]);
        assert!(
            ours["rule"].as_str().unwrap().contains(&total),
            "{what}: {ours} {theirs}"
        );
        matched += usize::from(theirs["matched"].as_u64() > Some(0));
    }
    eprintln!(
        "{test}: {} transitions × block sizes equal ({matched} with a match) over {files} corpus \
         files; rendered by none of the models: {unrendered:?}",
        cases.len()
    );
    assert!(
        cases.len() >= 200 && matched > 50,
        "{} {matched}",
        cases.len()
    );
}
