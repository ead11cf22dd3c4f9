use super::*;
use crate::routers::llm_d::IndexConfig;

fn fixture(name: &str) -> Loaded {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/router-configs")
        .join(name);
    parse(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn base() -> RouterSettings {
    RouterSettings {
        engine_block_size: 16,
        index: IndexConfig::new(64),
        decider: DeciderConfig::default(),
    }
}

fn kinds(l: &Loaded) -> Vec<LintKind> {
    lint(l, 16, None).into_iter().map(|x| x.kind).collect()
}

#[test]
fn the_recommended_wiring_passes_and_is_emulated_as_written() {
    let l = fixture("recommended.yaml");
    assert_eq!(kinds(&l), vec![]);
    match l.spec(&base()).unwrap() {
        Spec::LlmD(LlmD(s)) => {
            assert_eq!(s.index.block_size, 16);
            assert_eq!(s.decider.non_cached_tokens, 512);
            assert_eq!(s.decider.prompt_tokens, 0);
        }
        other => panic!("{other:?}"),
    }
    // At an engine block of 32, 16 divides it: still fine.
    assert!(lint(&l, 32, None).is_empty());
}

#[test]
fn the_precise_sample_at_block_64_is_flagged() {
    let l = fixture("precise-block-64.yaml");
    let found = lint(&l, 16, None);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].kind, LintKind::BlockSize);
    assert!(
        found[0].message.contains("never sees a reply"),
        "{}",
        found[0].message
    );
    // No P/D decider: the emulation never disaggregates, and the index is at 64.
    match l.spec(&base()).unwrap() {
        Spec::LlmD(LlmD(s)) => {
            assert_eq!((s.index.block_size, s.decider.non_cached_tokens), (64, 0));
        }
        other => panic!("{other:?}"),
    }
    // An engine running blocks of 64 or 128 is fine with it.
    assert!(lint(&l, 128, None).is_empty());
}

#[test]
fn the_pd_sample_reads_the_approximate_producer_with_a_threshold_of_16() {
    let l = fixture("pd-approx.yaml");
    assert_eq!(
        kinds(&l),
        vec![
            LintKind::ReadsApproximate,
            LintKind::ReadsApproximate,
            LintKind::NonCachedTooLow
        ]
    );
    assert_eq!(
        l.spec(&base()).unwrap(),
        Spec::LlmDApprox(LlmDApprox {
            block_size: None,
            decider: DeciderConfig {
                non_cached_tokens: 16,
                prompt_tokens: 0
            }
        })
    );
}

#[test]
fn flag_files_select_the_routers_emulation() {
    let d = fixture("dynamo-frontend.args");
    assert_eq!(
        d,
        Loaded::Flags {
            spec: Spec::Dynamo(Dynamo {
                block_size: Some(64),
                conditional: Some(Conditional {
                    isl_threshold: 2048,
                    ratio: 0.7
                })
            }),
            unknown: vec![]
        }
    );
    assert_eq!(kinds(&d), vec![LintKind::BlockSize]);
    assert_eq!(
        fixture("vllm-router.args").spec(&base()).unwrap(),
        Spec::VllmRouter(VllmRouter {
            policy: VllmRouterPolicy::CacheAware,
            threshold: 0.5,
            block_size: 16,
            pd: false
        })
    );
}

#[test]
fn what_is_not_modelled_is_named() {
    let text = "kind: EndpointPickerConfig\nplugins:\n  - type: my-custom-scorer\n  - type: prefix-cache-scorer\n    parameters:\n      prefixMatchInfoProducerName: burst\n  - type: burst-prefix-cache-producer\n    name: burst\n";
    let l = parse(text).unwrap();
    let found = lint(&l, 16, None);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0]
            .message
            .contains("burst (burst-prefix-cache-producer)")
    );
    assert!(found[1].message.contains("my-custom-scorer"));
    assert!(
        l.spec(&base())
            .unwrap_err()
            .to_string()
            .contains("does not model")
    );
    // Not a config at all.
    assert_eq!(
        parse("kind: ConfigMap\n").unwrap_err().to_string(),
        "expected kind: EndpointPickerConfig, found ConfigMap"
    );
    assert!(
        parse("vllm-router --policy round_robin")
            .unwrap_err()
            .to_string()
            .contains("round_robin")
    );
    assert!(
        parse("plugins: [")
            .unwrap_err()
            .to_string()
            .starts_with("not YAML")
    );
}

#[test]
fn cache_aware_vllm_router_needs_engines_that_render() {
    let router = parse("vllm-router --policy cache_aware --worker-urls http://a:8000\n").unwrap();
    let lints = |serve: &str| -> Vec<LintKind> {
        lint(&router, 16, Some(&engine_args(serve).unwrap()))
            .into_iter()
            .map(|x| x.kind)
            .filter(|k| *k != LintKind::Unmodelled)
            .collect()
    };
    assert_eq!(
        lints("vllm serve Qwen/Qwen3-8B --block-size 16 \\\n  --kv-events-config '{}'\n"),
        vec![LintKind::CannotRender]
    );
    assert!(lints("vllm serve Qwen/Qwen3-8B --enable-scale-out\n").is_empty());
    // The last of two settings holds, as argparse reads them.
    assert_eq!(
        lints("vllm serve m --enable-scale-out --no-enable-scale-out"),
        vec![LintKind::CannotRender]
    );
    // Without the engine's flags nothing is said.
    assert!(
        lint(&router, 16, None)
            .iter()
            .all(|l| l.kind == LintKind::Unmodelled)
    );
}

#[test]
fn llm_d_receives_the_engines_events_only_under_its_topic_filter_and_pod_names() {
    let kinds = |yaml: &Loaded, serve: &str| -> Vec<LintKind> {
        lint(yaml, 16, Some(&engine_args(serve).unwrap()))
            .into_iter()
            .map(|x| x.kind)
            .collect()
    };
    let recommended = fixture("recommended.yaml");
    // The JSON quoted as one word, across a line continuation, as a shell reads it.
    let serve = |topic: &str| {
        format!(
            "vllm serve Qwen/Qwen3-8B --block-size 16 \\\n  --kv-events-config '{{\"enable_kv_cache_events\": true, \"publisher\": \"zmq\", \"topic\": \"{topic}\"}}'\n"
        )
    };
    // vLLM's topic from the docs' example reaches llm-d's subscriber (filter "kv@") 0 times.
    assert_eq!(
        kinds(&recommended, &serve("kv-events")),
        vec![LintKind::TopicFiltered]
    );
    // No --kv-events-config: the engine publishes nothing.
    assert_eq!(
        kinds(&recommended, "vllm serve Qwen/Qwen3-8B"),
        vec![LintKind::TopicFiltered]
    );
    assert!(kinds(&recommended, &serve("kv@10.0.0.5:8000@Qwen/Qwen3-8B")).is_empty());
    // One bound socket for every pod: the pod comes from the topic and must be an
    // endpoint's address.
    let single = parse(
        "kind: EndpointPickerConfig\nplugins:\n  - type: precise-prefix-cache-producer\n    parameters:\n      tokenProcessorConfig:\n        blockSizeTokens: 16\n      kvEventsConfig:\n        zmqEndpoint: tcp://*:5557\n        topicFilter: kv@\n        discoverPods: false\n  - type: prefix-cache-scorer\n    parameters:\n      prefixMatchInfoProducerName: precise-prefix-cache-producer\n",
    )
    .unwrap();
    assert_eq!(
        kinds(&single, &serve("kv@pod-a@Qwen/Qwen3-8B")),
        vec![LintKind::TopicPod]
    );
    assert!(kinds(&single, &serve("kv@$(POD_IP):8000@Qwen/Qwen3-8B")).is_empty());
    // Its view takes each message's pod from the topic (replay counts the others).
    let global = |l: &Loaded| match l.spec(&base()).unwrap() {
        Spec::LlmD(LlmD(s)) => s.index.global_socket,
        other => panic!("{other:?}"),
    };
    assert!(global(&single) && !global(&recommended));
    // Without enable_kv_cache_events vLLM publishes nothing; with the null publisher neither.
    assert_eq!(
        kinds(
            &recommended,
            "vllm serve m --kv-events-config '{\"topic\": \"kv@10.0.0.5:8000@m\"}'"
        ),
        vec![LintKind::TopicFiltered]
    );
    assert_eq!(
        kinds(
            &recommended,
            "vllm serve m --kv-events-config '{\"enable_kv_cache_events\": true, \"publisher\": \"null\", \"topic\": \"kv@10.0.0.5:8000@m\"}'"
        ),
        vec![LintKind::TopicFiltered]
    );
    // SGLang publishes once a publisher is named.
    assert!(
        kinds(
            &recommended,
            "python -m sglang.launch_server --kv-events-config '{\"publisher\": \"zmq\", \"topic\": \"kv@10.0.0.5:8000@m\"}'"
        )
        .is_empty()
    );
    // vLLM's other spellings: underscores, `=`, dotted keys.
    assert!(
        kinds(
            &recommended,
            "vllm serve m --kv-events-config.enable_kv_cache_events true --kv-events-config.publisher zmq --kv_events_config.topic=kv@10.0.0.5:8000@m"
        )
        .is_empty()
    );
    assert!(
        engine_args("vllm serve m --enable_scale_out")
            .unwrap()
            .enable_scale_out
    );
    // Discovered pods are named by their endpoint; the model still comes from the topic.
    assert!(kinds(&recommended, &serve("kv@pod-a@Qwen/Qwen3-8B")).is_empty());
    assert_eq!(
        kinds(&recommended, &serve("kv@10.0.0.5:8000")),
        vec![LintKind::TopicPod]
    );
    // One socket for every pod: a host name is not the address llm-d scores.
    assert_eq!(
        kinds(&single, &serve("kv@pod-a:8000@Qwen/Qwen3-8B")),
        vec![LintKind::TopicPod]
    );
    // Settings of the wrong kind are errors, not defaults.
    for bad in [
        "kvEventsConfig: oops",
        "kvEventsConfig:\n        discoverPods: \"false\"",
        "kvEventsConfig:\n        zmqEndpoint: 5557",
    ] {
        let yaml = format!(
            "kind: EndpointPickerConfig\nplugins:\n  - type: precise-prefix-cache-producer\n    parameters:\n      {bad}\n  - type: prefix-cache-scorer\n    parameters:\n      prefixMatchInfoProducerName: precise-prefix-cache-producer\n"
        );
        assert!(parse(&yaml).is_err(), "{bad}");
    }
    // A filter of the user's own.
    let custom = parse(
        "kind: EndpointPickerConfig\nplugins:\n  - type: precise-prefix-cache-producer\n    parameters:\n      kvEventsConfig:\n        topicFilter: kv-\n  - type: prefix-cache-scorer\n    parameters:\n      prefixMatchInfoProducerName: precise-prefix-cache-producer\n",
    )
    .unwrap();
    assert!(kinds(&custom, &serve("kv-x@10.0.0.5:8000@Qwen/Qwen3-8B")).is_empty());
    // Flags that do not split, or a config that is not JSON, are errors, not guesses.
    assert!(engine_args("vllm serve m --kv-events-config '{\"topic\": 1").is_err());
    assert!(engine_args("vllm serve m --kv-events-config {topic}").is_err());
    assert!(engine_args("vllm serve m --kv-events-config").is_err());
    assert!(engine_args("vllm serve m --kv-events-config '{\"topic\": 3}'").is_err());
    assert!(engine_args("vllm serve m --kv-events-config null").is_err());
}

#[test]
fn llm_ds_sglang_adapter_decodes_neither_engines_events() {
    let config = |engine_type: &str| {
        parse(&format!(
            "kind: EndpointPickerConfig\nplugins:\n  - type: precise-prefix-cache-producer\n    parameters:\n      tokenProcessorConfig:\n        blockSizeTokens: 16\n      kvEventsConfig:\n        topicFilter: kv@\n        engineType: {engine_type}\n  - type: prefix-cache-scorer\n    parameters:\n      prefixMatchInfoProducerName: precise-prefix-cache-producer\n"
        ))
    };
    let kinds = |yaml: &Loaded, serve: &str| -> Vec<LintKind> {
        lint(yaml, 16, Some(&engine_args(serve).unwrap()))
            .into_iter()
            .map(|x| x.kind)
            .collect()
    };
    let sglang = "python -m sglang.launch_server --page-size 16 --kv-events-config '{\"publisher\": \"zmq\", \"topic\": \"kv@10.0.0.5:30000@m\"}'";
    let vllm = "vllm serve m --kv-events-config '{\"enable_kv_cache_events\": true, \"publisher\": \"zmq\", \"topic\": \"kv@10.0.0.5:8000@m\"}'";
    assert_eq!(engine_args(sglang).unwrap().server, Some("sglang"));
    assert_eq!(engine_args(vllm).unwrap().server, Some("vllm"));
    let with_sglang = config("sglang").unwrap();
    assert_eq!(
        kinds(&with_sglang, sglang),
        vec![LintKind::EventsUndecodable]
    );
    assert_eq!(kinds(&with_sglang, vllm), vec![LintKind::EventsUndecodable]);
    let message = &lint(&with_sglang, 16, Some(&engine_args(vllm).unwrap()))[0].message;
    assert!(
        message.contains("and vLLM sends each as a map"),
        "{message}"
    );
    // The vllm adapter (the default) reads both engines' tagged maps.
    assert!(kinds(&config("vllm").unwrap(), sglang).is_empty());
    let err = config("trtllm").unwrap_err().to_string();
    assert!(
        err.contains("engineType \"trtllm\" is not vllm or sglang"),
        "{err}"
    );
}
