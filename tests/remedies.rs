//! Per-request variation (kwargs and tools that change between turns) and `diff-turns
//! --remedies` (issue 15): on the project's fixtures, on real templates from ../shared, and the
//! numbers under a remedy against transformers (tests/remedies_reference.py).

use crate::common::{self, kvaudit};

use serde_json::{Value as Json, json};

const NOW: &str = "2026-01-15T10:00:00";
const REMEDIES: &str = "fixtures/conversations/remedies";

/// kvaudit with `args` in the repository, expecting `code`: its standard output.
fn stdout_of(args: &[&str], code: i32) -> String {
    let out = kvaudit().args(args).assert().code(code);
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

fn conv(name: &str) -> String {
    format!("{REMEDIES}/{name}")
}

/// diff-turns --remedies as JSON: the first conversation.
fn audit(model: &str, conversation: &str, extra: &[&str], code: i32) -> Json {
    let out = kvaudit()
        .args(["diff-turns", "-m", model, "-c", conversation, "--remedies"])
        .args(extra)
        .args(["--format", "json", "--now", NOW])
        .assert()
        .code(code);
    let report: Json = serde_json::from_slice(&out.get_output().stdout).unwrap();
    report["conversations"][0].clone()
}

fn remedy<'a>(t: &'a Json, kind: &str, name: &str) -> &'a Json {
    t["remedies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == kind && r["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} remedy in {t:#}"))
}

fn uncached(v: &Json) -> Vec<u64> {
    v["uncached"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["tokens"].as_u64().unwrap())
        .collect()
}

#[test]
fn changed_tools_are_a_per_request_rewrite_that_keeping_them_removes() {
    let c = audit(
        "fixtures/models/tiny-tools",
        &conv("tools-change.json"),
        &[],
        1,
    );
    let t = &c["transitions"][0];
    // The tools header is the first line: the divergence is where the second tool is added.
    assert_eq!(t["rewrite"]["class"], "request_changed");
    assert_eq!(t["rewrite"]["position"], 14);
    assert_eq!(t["rewrite"]["next"][0]["text"], ",");
    assert_eq!(uncached(t), [78, 78]);
    let keep = remedy(t, "keep_request", "tools");
    assert_eq!(keep["removes_rewrite"], true);
    assert_eq!(keep["value"], json!({}));
    assert_eq!(uncached(keep), [24, 72]);
    // Best first: the one remedy that removes the rewrite leads.
    assert_eq!(t["remedies"][0]["kind"], "keep_request");
    // Every resend mode is reported, here without effect.
    for mode in ["content", "raw", "reasoning_field"] {
        let r = remedy(t, "resend", mode);
        assert_eq!(r["rewrite_position"], 14, "{mode}");
        assert_eq!(uncached(r), [78, 78], "{mode}");
    }
    assert_eq!(c["remedy_sources"]["history_switches"], json!([]));
}

#[test]
fn human_view_prints_one_line_per_remedy() {
    // The snapshot is at 80 columns (what kvaudit gives a pipe when COLUMNS is unset).
    let out = kvaudit()
        .env("COLUMNS", "80")
        .args(["diff-turns", "-m", "fixtures/models/tiny-tools", "-c"])
        .arg(conv("tools-change.json"))
        .args(["--remedies", "--now", NOW])
        .assert()
        .code(1);
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    insta::assert_snapshot!("tools_change_remedies", text);
}

#[test]
fn without_remedies_the_json_has_no_remedy_fields() {
    let out = kvaudit()
        .args(["diff-turns", "-m", "fixtures/models/tiny-tools", "-c"])
        .arg(conv("tools-change.json"))
        .args(["--format", "json", "--now", NOW])
        .assert()
        .code(1);
    let report: Json = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let c = &report["conversations"][0];
    assert!(c.get("remedy_sources").is_none());
    assert!(c["transitions"][0].get("remedies").is_none());
    // The class does not need --remedies.
    assert_eq!(c["transitions"][0]["rewrite"]["class"], "request_changed");
}

#[test]
fn kwargs_turn_flag_equals_the_per_prompt_list() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain.json");
    let mut file: Json = serde_json::from_str(
        &std::fs::read_to_string(common::repo_root().join(conv("thinking-toggled.json"))).unwrap(),
    )
    .unwrap();
    let per_prompt = file
        .as_object_mut()
        .unwrap()
        .remove("template_kwargs_per_prompt")
        .unwrap();
    assert_eq!(
        per_prompt,
        json!([{}, {"enable_thinking": false}, {}]),
        "the fixture this test mirrors"
    );
    std::fs::write(&plain, file.to_string()).unwrap();
    let run = |c: &str, extra: &[&str]| {
        let out = kvaudit()
            .args(["diff-turns", "-m", "fixtures/models/tiny-think", "-c", c])
            .args(extra)
            .args(["--format", "json", "--now", NOW])
            .assert()
            .code(1);
        let mut v: Json = serde_json::from_slice(&out.get_output().stdout).unwrap();
        v["conversations"][0]["transitions"].take()
    };
    let from_file = run(&conv("thinking-toggled.json"), &[]);
    let from_flags = run(
        plain.to_str().unwrap(),
        &[
            "--kwargs-turn",
            "2:enable_thinking=false",
            "--kwargs-turn",
            "3:enable_thinking=true",
        ],
    );
    // Prompt 3 differs (absent vs true) only where the template tests `is defined and not`:
    // the same text, so the same transitions.
    assert_eq!(from_file, from_flags);
    // tiny-think prints the switch only in the generation prompt, past what the server holds:
    // the toggle moves nothing.
    let without = run(plain.to_str().unwrap(), &[]);
    assert_eq!(
        from_file[0]["common_prefix_tokens"],
        without[0]["common_prefix_tokens"]
    );
}

#[test]
fn bad_per_request_input_is_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], Option<Json>, &str); 6] = [
        (&["--kwargs-turn", "0:a=1"], None, "prompts count from 1"),
        (&["--kwargs-turn", "a=1"], None, "expected N:KEY=VALUE"),
        (&["--kwargs-turn", "x:a=1"], None, "is not a prompt number"),
        (
            &[],
            Some(json!({"messages": [], "tools": [], "tools_per_prompt": [[]]})),
            "either `tools` or `tools_per_prompt`",
        ),
        (
            &[],
            Some(json!({"messages": [], "tools_per_prompt": [{"type": "function"}]})),
            "`tools_per_prompt` entry 0 must be a list",
        ),
        (
            &[],
            Some(json!({"messages": [], "template_kwargs_per_prompt": []})),
            "`template_kwargs_per_prompt` is empty",
        ),
    ];
    for (i, (flags, file, expected)) in cases.into_iter().enumerate() {
        let path = match file {
            Some(v) => {
                let p = dir.path().join(format!("c{i}.json"));
                std::fs::write(&p, v.to_string()).unwrap();
                p.display().to_string()
            }
            None => conv("tools-change.json"),
        };
        let out = kvaudit()
            .args([
                "diff-turns",
                "-m",
                "fixtures/models/tiny-tools",
                "-c",
                &path,
            ])
            .args(flags)
            .args(["--now", NOW])
            .assert()
            .code(2);
        let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        assert!(
            err.starts_with("error: ") && err.contains(expected),
            "{flags:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn tools_on_some_prompts_only_with_a_separate_tool_template_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.json");
    let mut v: Json = serde_json::from_str(
        &std::fs::read_to_string(common::repo_root().join(conv("tools-change.json"))).unwrap(),
    )
    .unwrap();
    v["tools_per_prompt"][0] = Json::Null;
    std::fs::write(&p, v.to_string()).unwrap();
    let out = kvaudit()
        .args(["diff-turns", "-m", "fixtures/models/tiny-tools", "-c"])
        .arg(&p)
        .args(["--now", NOW])
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(err.contains("different templates"), "{err}");
}

// ---- real templates from ../shared ----

fn shared_model(test: &str, name: &str) -> Option<String> {
    let shared = common::shared_dir(test)?;
    Some(shared.join("models").join(name).display().to_string())
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn gpt_oss_effort_change_diverges_in_the_system_header_and_keeping_it_helps() {
    let Some(model) = shared_model("gpt_oss_effort", "gpt-oss-120b") else {
        return;
    };
    let c = audit(&model, &conv("effort-changes.json"), &[], 1);
    let t = &c["transitions"][0];
    let r = &t["rewrite"];
    assert_eq!(r["class"], "request_changed");
    // `Reasoning: medium` (the default) in the held prompt's system message, `high` next.
    assert_eq!(r["position"], 40);
    assert_eq!(r["held"][0]["text"], " medium");
    assert_eq!(r["next"][0]["text"], " high");
    assert_eq!(uncached(t), [60, 92]);
    let keep = remedy(t, "keep_request", "kwargs");
    assert_eq!(keep["value"], json!({"reasoning_effort": null}));
    // Keeping the effort moves the divergence past the system header to the dropped analysis
    // message, which no request setting keeps.
    assert_eq!(keep["rewrite_position"], 75);
    assert_eq!(keep["class"], "reasoning_dropped");
    assert_eq!(uncached(keep), [28, 28]);
    assert_eq!(keep["removes_rewrite"], false);
    assert_eq!(t["remedies"][0]["kind"], "keep_request");
    // reasoning_effort is a setting the template prints, not a switch it tests.
    assert_eq!(c["remedy_sources"]["history_switches"], json!([]));
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn glm_clear_thinking_is_found_from_the_source_and_matches_transformers() {
    let Some(model) = shared_model("glm_clear_thinking", "glm-4.7-flash") else {
        return;
    };
    let conversation = conv("reasoning.json");
    let c = audit(&model, &conversation, &[], 1);
    assert_eq!(
        c["remedy_sources"]["history_switches"],
        json!(["clear_thinking", "enable_thinking"])
    );
    let reference = std::process::Command::new("python3")
        .arg(common::repo_root().join("tests/remedies_reference.py"))
        .arg(&model)
        .arg(common::repo_root().join(&conversation))
        .arg("16,64")
        .arg(r#"{"clear_thinking": false}"#)
        .output();
    let reference: Json = match reference {
        Ok(out) if out.status.success() => serde_json::from_slice(&out.stdout).unwrap(),
        other => {
            if std::env::var("KVAUDIT_REQUIRE_REFERENCE").is_ok_and(|v| v == "1") {
                panic!("the transformers reference did not run: {other:?}");
            }
            eprintln!(
                "SKIPPED glm_clear_thinking reference: transformers did not run ({other:?}); \
                 pip install transformers==4.57.6 jinja2"
            );
            return;
        }
    };
    let transitions = c["transitions"].as_array().unwrap();
    assert_eq!(transitions.len(), 2);
    for (t, want) in transitions
        .iter()
        .zip(reference["transitions"].as_array().unwrap())
    {
        assert_eq!(t["rewrite"]["class"], "reasoning_dropped");
        let r = remedy(t, "kwarg", "clear_thinking");
        assert_eq!(r["value"], false);
        assert_eq!(r["common_prefix_tokens"], want["common_prefix_tokens"]);
        assert_eq!(r["uncached"], want["uncached"]);
        let held = want["held_tokens"].as_u64().unwrap();
        let removes = want["common_prefix_tokens"].as_u64().unwrap() >= held;
        assert_eq!(r["removes_rewrite"], removes);
        assert!(
            removes,
            "clear_thinking=false keeps GLM's reasoning in history"
        );
        // clear_thinking=true is the template's default: it changes nothing, so it is not listed.
        assert!(
            t["remedies"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| !(r["name"] == "clear_thinking" && r["value"] == true))
        );
    }
    assert_eq!(uncached(&transitions[0]["remedies"][0]), [11, 27]);
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn qwen3_enable_thinking_toggle_is_printed_past_what_the_server_holds() {
    // Issue 15 expected this toggle to be a per-request rewrite. Qwen3-8B's template reads
    // enable_thinking only in the generation prompt, after the history, so the held prefix
    // cannot change with it: the rewrite is the dropped reasoning, and keeping the previous
    // request's kwargs leaves it where it is (only the next prompt's tail changes).
    let Some(model) = shared_model("qwen3_toggle", "qwen3-8b") else {
        return;
    };
    let c = audit(&model, &conv("thinking-toggled.json"), &[], 1);
    let t = &c["transitions"][0];
    assert_eq!(t["rewrite"]["class"], "reasoning_dropped");
    assert_eq!(t["rewrite"]["position"], 15);
    let keep = remedy(t, "keep_request", "kwargs");
    assert_eq!(keep["value"], json!({"enable_thinking": null}));
    assert_eq!(keep["rewrite_position"], 15);
    assert_eq!(keep["removes_rewrite"], false);
    // The toggled prompt's generation prompt carries the empty think block: 4 tokens more.
    assert_eq!(uncached(t), [37, 37]);
    assert_eq!(uncached(keep), [33, 33]);
    assert_eq!(
        c["remedy_sources"]["history_switches"],
        json!(["enable_thinking"])
    );
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn a_template_without_a_switch_says_so_and_lists_the_resend_results() {
    let Some(model) = shared_model("no_switch", "deepseek-r1-distill-qwen-7b") else {
        return;
    };
    let c = audit(&model, &conv("reasoning.json"), &[], 1);
    assert_eq!(c["remedy_sources"]["history_switches"], json!([]));
    for t in c["transitions"].as_array().unwrap() {
        let kinds: Vec<&str> = t["remedies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["resend", "resend", "resend"], "{t:#}");
        assert!(
            t["remedies"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| r["removes_rewrite"] == false)
        );
    }
    let out = kvaudit()
        .args(["diff-turns", "-m", &model, "-c"])
        .arg(conv("reasoning.json"))
        .args(["--remedies", "--now", NOW])
        .assert()
        .code(1);
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        text.contains("no kwarg remedy: the template reads no history switch"),
        "{text}"
    );
    assert!(text.contains("no remedy removes the rewrite"), "{text}");
    assert_eq!(text.matches("      resend ").count(), 6, "{text}");
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn pinning_the_date_removes_a_rewrite_across_midnight() {
    let Some(model) = shared_model("pin_date", "llama-3.2-3b-instruct") else {
        return;
    };
    let c = audit(&model, &conv("across-days.json"), &[], 1);
    let t = &c["transitions"][0];
    assert_eq!(t["rewrite"]["class"], "date_changed");
    assert_eq!(
        c["remedy_sources"]["date_sources"],
        json!(["date_string", "strftime_now"])
    );
    let pin = remedy(t, "pin_date", "date_string");
    assert_eq!(pin["value"], "2026-01-15T23:59:00");
    assert_eq!(pin["removes_rewrite"], true);
    assert_eq!(pin["common_prefix_tokens"], t["held_tokens"]);
    assert_eq!(t["remedies"][0]["kind"], "pin_date");
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn under_vllm_clear_thinking_needs_the_reasoning_field_resent() {
    // vLLM drops a message's `reasoning_content` (it reads `reasoning`), so the switch alone
    // changes nothing; with the reasoning resent in vLLM's field it removes the rewrite.
    let Some(model) = shared_model("glm_vllm", "glm-4.7-flash") else {
        return;
    };
    let c = audit(&model, &conv("reasoning.json"), &["--server", "vllm"], 1);
    let t = &c["transitions"][0];
    let switch: Vec<&Json> = t["remedies"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["name"] == "clear_thinking")
        .collect();
    assert_eq!(switch.len(), 1, "{t:#}");
    assert_eq!(switch[0]["value"], false);
    assert_eq!(switch[0]["with_resend"], "reasoning_field");
    assert_eq!(switch[0]["removes_rewrite"], true);
    assert_eq!(remedy(t, "resend", "reasoning_field")["value"], "reasoning");
    // Under transformers the file's reasoning_content reaches the template: no resend needed.
    let plain = audit(&model, &conv("reasoning.json"), &[], 1);
    let r = remedy(&plain["transitions"][0], "kwarg", "clear_thinking");
    assert!(r.get("with_resend").is_none(), "{r:#}");
}

#[cfg_attr(
    not(kvaudit_shared),
    ignore = "needs ../shared (reference models, templates, captures) beside the repository"
)]
#[test]
fn across_midnight_the_rollover_transition_gets_its_own_remedies() {
    // Llama 3.2 prints today's date in its system header: on one day the probe extends, so
    // there is nothing to remedy; rendered across midnight it diverges at the date, and
    // pinning the date is measured there (before, --remedies ignored the rollover view).
    let Some(model) = shared_model("rollover_remedies", "llama-3.2-3b-instruct") else {
        return;
    };
    let out = kvaudit()
        .args(["diff-turns", "-m", &model, "--remedies", "--date-rollover"])
        .args(["--format", "json", "--now", NOW])
        .assert()
        .code(1);
    let report: Json = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let conversations = report["conversations"].as_array().unwrap();
    assert_eq!(conversations.len(), 3);
    for c in conversations {
        let t = &c["transitions"][0];
        assert!(t["rewrite"].is_null(), "{t:#}");
        assert!(t.get("remedies").is_none(), "{t:#}");
        let r = &t["date_rollover"];
        assert_eq!(r["moved"], true);
        assert_eq!(r["class"], "date_changed");
        let pin = &r["remedies"][0];
        assert_eq!(pin["kind"], "pin_date");
        assert_eq!(pin["name"], "date_string");
        // Prompt 1's time across midnight: the day of --now at 23:59.
        assert_eq!(pin["value"], "2026-01-15T23:59:00");
        assert_eq!(pin["removes_rewrite"], true);
        // Pinned to one day, the prompts are the same-day ones: the same numbers.
        assert_eq!(pin["common_prefix_tokens"], t["common_prefix_tokens"]);
        assert_eq!(pin["uncached"], t["uncached"]);
        assert!(uncached(r).iter().zip(uncached(pin)).all(|(a, b)| a > &b));
        // Resending another way leaves the date where it is.
        for mode in ["raw", "reasoning_field"] {
            let resend = remedy(r, "resend", mode);
            assert_eq!(resend["rewrite_position"], r["rewrite_position"], "{mode}");
        }
    }
    let text = stdout_of(
        &[
            "diff-turns",
            "-m",
            &model,
            "--remedies",
            "--date-rollover",
            "--now",
            NOW,
        ],
        1,
    );
    assert_eq!(
        text.matches("remedies across midnight (uncached at")
            .count(),
        3
    );
    assert!(
        text.contains("pin_date date_string at 2026-01-15T23:59:00: removes the rewrite"),
        "{text}"
    );
    // The summary counts rewrite points of the same day only; none here.
    assert!(!text.contains("a remedy removes"), "{text}");
}

#[test]
fn markdown_lists_the_remedies() {
    let tools = conv("tools-change.json");
    let tiny_tools = [
        "diff-turns",
        "-m",
        "fixtures/models/tiny-tools",
        "-c",
        &tools,
    ];
    let md = ["--format", "markdown", "--now", NOW];
    let text = stdout_of(&[&tiny_tools[..], &["--remedies"], &md].concat(), 1);
    insta::assert_snapshot!("tools_change_remedies_markdown", text);
    // A dated template across midnight: the rollover's own table, with the pinned date.
    let dated = [
        "diff-turns",
        "-m",
        "fixtures/models/tiny-plain",
        "--template",
        "fixtures/templates/dated.jinja",
        "-c",
        &tools,
        "--date-rollover",
        "--remedies",
    ];
    let text = stdout_of(&[&dated[..], &md].concat(), 1);
    insta::assert_snapshot!("dated_rollover_remedies_markdown", text);
    // Without --remedies, no table.
    let text = stdout_of(&[&tiny_tools[..], &md].concat(), 1);
    assert!(!text.contains("Remedies"), "{text}");
}
