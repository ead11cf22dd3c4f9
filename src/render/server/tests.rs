//! The reference document's own examples, one per rule.

use serde_json::{Map, Value as Json, json};

use super::*;

const PLAIN: &str = "{% for m in messages %}{{ m.content }}{% endfor %}";

fn prepare(
    profile: ServerProfile,
    messages: Json,
    tools: Option<Json>,
) -> Result<TemplateInput<'static>, ServerError> {
    let msgs = messages.as_array().unwrap().clone();
    let kwargs = Map::new();
    profile
        .prepare(
            PLAIN,
            &ContentFormats::detect(PLAIN),
            &Request {
                messages: &msgs,
                tools: tools.as_ref(),
                documents: None,
                kwargs: &kwargs,
                server_kwargs: &kwargs,
                add_generation_prompt: true,
                reply: false,
            },
        )
        .map(TemplateInput::into_owned)
}

fn call(args: Json) -> Json {
    json!({"role": "assistant", "content": null, "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": args}, "id": "c1", "index": 0}]})
}

#[test]
fn vllm_null_content_and_arguments() {
    let got = prepare(
        ServerProfile::Vllm,
        json!([{"role": "user", "content": "q"}, call(json!("{\"city\":\"Paris\"}"))]),
        None,
    )
    .unwrap();
    // Key order is the TypedDict's, `index` is dropped, arguments become a dict (1.3).
    assert_eq!(
        serde_json::to_string(&got.messages[1]).unwrap(),
        r#"{"role":"assistant","content":"","tool_calls":[{"id":"c1","function":{"arguments":{"city":"Paris"},"name":"f"},"type":"function"}]}"#
    );
    for bad in [json!("{\"city\": "), json!("[]"), json!("42"), json!("")] {
        let got = prepare(
            ServerProfile::Vllm,
            json!([{"role": "user", "content": "q"}, call(bad)]),
            None,
        )
        .unwrap();
        assert_eq!(
            got.messages[1]["tool_calls"][0]["function"]["arguments"],
            json!({})
        );
    }
    // Outside validation's schema: a dict `arguments`, a call without id.
    let err = prepare(ServerProfile::Vllm, json!([call(json!({"a": 1}))]), None).unwrap_err();
    assert_eq!(err.reason(), "rejected:tool_call_arguments_not_a_string");
    let no_id = json!([{"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]}]);
    assert_eq!(
        prepare(ServerProfile::Vllm, no_id, None)
            .unwrap_err()
            .reason(),
        "rejected:tool_call_without_id"
    );
    // An empty list is removed.
    let got = prepare(
        ServerProfile::Vllm,
        json!([{"role": "assistant", "content": "a", "tool_calls": []}]),
        None,
    )
    .unwrap();
    assert!(got.messages[0].get("tool_calls").is_none());
}

#[test]
fn vllm_reasoning_and_parts() {
    let got = prepare(ServerProfile::Vllm, json!([
        {"role": "assistant", "content": "42", "reasoning": "r"},
        {"role": "assistant", "content": "42", "reasoning_content": "dropped"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "name": "bob"},
        {"role": "system", "content": "x-anthropic-billing-header: cch=1\nbe brief"},
    ]), None).unwrap();
    assert_eq!(
        got.messages[0],
        json!({"role": "assistant", "content": "42", "reasoning": "r", "reasoning_content": "r"})
    );
    assert_eq!(
        got.messages[1],
        json!({"role": "assistant", "content": "42"})
    );
    assert_eq!(
        got.messages[2],
        json!({"role": "user", "content": "a\nb", "name": "bob"})
    );
    assert_eq!(got.messages[3]["content"], json!("be brief"));
    // A developer message becomes system and merges to the front (1.5).
    let got = prepare(
        ServerProfile::Vllm,
        json!([{"role": "user", "content": "u"}, {"role": "developer", "content": "d"}]),
        None,
    )
    .unwrap();
    assert_eq!(
        Json::Array(got.messages.into_owned()),
        json!([{"role": "system", "content": "d"}, {"role": "user", "content": "u"}])
    );
}

#[test]
fn vllm_openai_format_wraps_strings() {
    let loops =
        "{% for m in messages %}{% for c in m.content %}{{ c.text }}{% endfor %}{% endfor %}";
    let msgs = vec![
        json!({"role": "user", "content": "hi"}),
        json!({"role": "assistant", "content": null}),
        json!({"role": "tool", "content": "r"}),
    ];
    let kwargs = Map::new();
    let got = ServerProfile::Vllm
        .prepare(
            loops,
            &ContentFormats::detect(loops),
            &Request {
                messages: &msgs,
                tools: None,
                documents: None,
                kwargs: &kwargs,
                server_kwargs: &kwargs,
                add_generation_prompt: true,
                reply: false,
            },
        )
        .unwrap();
    assert_eq!(
        got.messages[0]["content"],
        json!([{"type": "text", "text": "hi"}])
    );
    assert_eq!(got.messages[1]["content"], json!([]));
    // Tool results stay strings (1.2).
    assert_eq!(got.messages[2]["content"], json!("r"));
}

#[test]
fn vllm_tools_are_reserialised() {
    let tools =
        json!([{"function": {"parameters": {"type": "object"}, "name": "f"}, "type": "function"}]);
    let got = prepare(
        ServerProfile::Vllm,
        json!([{"role": "user", "content": "q"}]),
        Some(tools),
    )
    .unwrap();
    assert_eq!(
        serde_json::to_string(&got.tools).unwrap(),
        r#"[{"type":"function","function":{"name":"f","description":null,"parameters":{"type":"object"}}}]"#
    );
    let got = prepare(
        ServerProfile::Vllm,
        json!([{"role": "user", "content": "q"}]),
        Some(json!([])),
    )
    .unwrap();
    assert_eq!(got.tools, Some(json!([])));
}

#[test]
fn sglang_rules() {
    let main = ServerProfile::Sglang(SglangRelease::Main);
    let got = prepare(main, json!([
        {"role": "user", "content": "q", "name": "dropped"},
        {"role": "assistant", "content": null, "reasoning": "dropped", "reasoning_content": "r", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
        {"role": "tool", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "tool_call_id": "c1"},
    ]), None).unwrap();
    assert_eq!(got.messages[0], json!({"role": "user", "content": "q"}));
    assert_eq!(
        serde_json::to_string(&got.messages[1]).unwrap(),
        r#"{"role":"assistant","content":"","reasoning_content":"r","tool_calls":[{"id":"c1","index":null,"type":"function","function":{"name":"f","arguments":{"a":1}}}]}"#
    );
    assert_eq!(
        got.messages[2],
        json!({"role": "tool", "content": "a b", "tool_call_id": "c1"})
    );
    assert!(got.add_generation_prompt);
    for (args, reason) in [
        (json!("{\"a\": "), "rejected:arguments_invalid_json"),
        (json!("[1]"), "rejected:arguments_not_an_object"),
    ] {
        let err = prepare(main, json!([call(args)]), None).unwrap_err();
        assert_eq!(err.reason(), reason);
    }
    // A final assistant message is sent as a user message.
    let got = prepare(
        main,
        json!([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]),
        None,
    )
    .unwrap();
    assert_eq!(got.messages[1], json!({"role": "user", "content": "a"}));
    // Tools: [] gives None; a tool gets SGLang's field order and defaults.
    let got = prepare(
        main,
        json!([{"role": "user", "content": "q"}]),
        Some(json!([])),
    )
    .unwrap();
    assert_eq!(got.tools, None);
    let tools = json!([{"type": "function", "function": {"name": "f", "description": "d", "parameters": {}}}]);
    let got = prepare(main, json!([{"role": "user", "content": "q"}]), Some(tools)).unwrap();
    assert_eq!(
        serde_json::to_string(&got.tools).unwrap(),
        r#"[{"type":"function","function":{"description":"d","name":"f","parameters":{},"strict":false},"defer_loading":null}]"#
    );
}

/// SGLang 0.5.23's request models. Expected values are what 0.5.23's own `Tool(**tool)
/// .model_dump()` and `ChatCompletionRequest(...).messages[i].model_dump()` return (run in the
/// environment .ci/sglang.sh installs), less the `None` values SGLang then drops.
#[test]
fn sglang_0_5_23_keeps_the_clients_tool_fields_in_order() {
    let release = ServerProfile::Sglang(SglangRelease::V0_5_23);
    let cases = [
        (
            json!({"type":"function","function":{"name":"f","description":"d","parameters":{}}}),
            r#"{"type":"function","function":{"name":"f","description":"d","parameters":{}},"defer_loading":null}"#,
        ),
        (
            json!({"type":"function","function":{"parameters":{"type":"object"},"name":"f","foo":1}}),
            r#"{"type":"function","function":{"parameters":{"type":"object"},"name":"f","description":null},"defer_loading":null}"#,
        ),
        (
            json!({"function":{"name":"f","strict":"yes","description":null}}),
            r#"{"type":"function","function":{"name":"f","strict":true,"description":null,"parameters":null},"defer_loading":null}"#,
        ),
        (
            json!({"type":"function","function":{"name":"f","strict":null},"defer_loading":true}),
            r#"{"type":"function","function":{"name":"f","description":null,"parameters":null,"defer_loading":true},"defer_loading":true}"#,
        ),
        (
            json!({"type":"function","function":{"defer_loading":false,"name":"f"},"defer_loading":true}),
            r#"{"type":"function","function":{"defer_loading":false,"name":"f","description":null,"parameters":null},"defer_loading":true}"#,
        ),
    ];
    for (tool, want) in cases {
        let got = prepare(
            release,
            json!([{"role": "user", "content": "q"}]),
            Some(json!([tool])),
        )
        .unwrap();
        assert_eq!(serde_json::to_string(&got.tools.unwrap()[0]).unwrap(), want);
    }
    // `root` is a role; `phase` and `prefix` are kept; arguments are parsed on assistant
    // messages only; `index` is read as pydantic reads an int.
    let got = prepare(release, json!([
        {"role": "ROOT", "content": "x"},
        {"role": "assistant", "content": "a", "phase": "commentary", "prefix": "yes",
         "tool_calls": [{"index": "3", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "system", "content": "s", "tool_calls": [{"function": {"name": "f", "arguments": "oops"}}]},
    ]), None)
    .unwrap();
    assert_eq!(got.messages[0], json!({"role": "root", "content": "x"}));
    assert_eq!(
        serde_json::to_string(&got.messages[1]).unwrap(),
        r#"{"role":"assistant","content":"a","phase":"commentary","tool_calls":[{"id":null,"index":3,"type":"function","function":{"name":"f","arguments":{}}}],"prefix":true}"#
    );
    assert_eq!(
        got.messages[2]["tool_calls"][0]["function"]["arguments"],
        json!("oops")
    );
    let err = prepare(
        release,
        json!([{"role": "assistant", "content": "a", "phase": "x"}]),
        None,
    )
    .unwrap_err();
    assert_eq!(err.reason(), "rejected:phase_not_allowed");
    // Parameters: database type names rewritten, an invalid schema refused, and names unique
    // once messages carry tools.
    let tool = |params: Json| json!([{"type": "function", "function": {"name": "f", "parameters": params}}]);
    let got = prepare(
        release,
        json!([{"role": "user", "content": "q"}]),
        Some(tool(
            json!({"type": "object", "properties": {"n": {"type": "INT"}}}),
        )),
    )
    .unwrap();
    assert_eq!(
        got.tools.unwrap()[0]["function"]["parameters"]["properties"]["n"]["type"],
        json!("integer")
    );
    let err = prepare(
        release,
        json!([{"role": "user", "content": "q"}]),
        Some(tool(json!({"type": "foo"}))),
    )
    .unwrap_err();
    assert_eq!(err.reason(), "rejected:tool_parameters_invalid");
    let err = prepare(
        release,
        json!([{"role": "system", "content": "s", "tools": tool(json!(null))}, {"role": "user", "content": "q"}]),
        Some(tool(json!(null))),
    )
    .unwrap_err();
    assert_eq!(err.reason(), "rejected:tool_names_not_unique");
}

#[test]
fn transformers_passes_everything_through() {
    let msgs = json!([{"role": "assistant", "content": null, "reasoning_content": "r", "x": 1}]);
    let got = prepare(ServerProfile::Transformers, msgs.clone(), Some(json!([]))).unwrap();
    assert_eq!(Json::Array(got.messages.into_owned()), msgs);
    assert_eq!(got.tools, Some(json!([])));
}

/// vLLM's tool models keep only their own fields. Expected values are what
/// `ChatCompletionToolsParam(**tool).model_dump()` returns in vLLM 0.32.0 (pydantic 2).
#[test]
fn vllm_tools_keep_only_the_request_models_fields() {
    let cases = [
        (
            json!({"type":"function","function":{"name":"f","required":null,"foo":1,"parameters":{"type":"object"}},"extra":2}),
            json!({"type":"function","function":{"name":"f","description":null,"parameters":{"type":"object"}}}),
        ),
        (
            json!({"function":{"name":"f","description":"d","strict":null}}),
            json!({"type":"function","function":{"name":"f","description":"d","parameters":null}}),
        ),
        (
            json!({"type":"function","function":{"name":"f","strict":"yes"},"defer_loading":true}),
            json!({"type":"function","function":{"name":"f","description":null,"parameters":null,"strict":true,"defer_loading":true},"defer_loading":true}),
        ),
        (
            json!({"type":"function","function":{"name":"f","defer_loading":false},"defer_loading":true}),
            json!({"type":"function","function":{"name":"f","description":null,"parameters":null,"defer_loading":false},"defer_loading":true}),
        ),
        (
            json!({"type":"function","function":{"name":"f","strict":1}}),
            json!({"type":"function","function":{"name":"f","description":null,"parameters":null,"strict":true}}),
        ),
        (
            json!({"type":"function","function":{"name":"f","strict":"TRUE"}}),
            json!({"type":"function","function":{"name":"f","description":null,"parameters":null,"strict":true}}),
        ),
    ];
    for (sent, want) in cases {
        let got = prepare(
            ServerProfile::Vllm,
            json!([{"role": "user", "content": "q"}]),
            Some(json!([sent])),
        )
        .unwrap();
        // Key order matters: the template's tojson prints it.
        assert_eq!(
            serde_json::to_string(&got.tools).unwrap(),
            serde_json::to_string(&json!([want])).unwrap(),
            "{sent}"
        );
    }
    // pydantic refuses these (400): a strict of 2, " true", a numeric description, list parameters.
    for bad in [
        json!({"type":"function","function":{"name":"f","strict":2}}),
        json!({"type":"function","function":{"name":"f","strict":" true"}}),
        json!({"type":"function","function":{"name":"f","description":3}}),
        json!({"type":"function","function":{"name":"f","parameters":[]}}),
    ] {
        let got = prepare(
            ServerProfile::Vllm,
            json!([{"role": "user", "content": "q"}]),
            Some(json!([bad])),
        );
        assert!(got.is_err(), "{bad}");
    }
}
