# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_kvaudit_global_optspecs
    string join \n color= q/quiet h/help V/version
end

function __fish_kvaudit_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_kvaudit_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_kvaudit_using_subcommand
    set -l cmd (__fish_kvaudit_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c kvaudit -n "__fish_kvaudit_needs_command" -l color -d 'When to colour human output (auto: on a terminal, unless NO_COLOR is set non-empty; FORCE_COLOR forces it)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kvaudit -n "__fish_kvaudit_needs_command" -s q -l quiet -d 'Print nothing on stdout: the exit code is the answer (0 clean, 1 findings, 2 error). Errors still go to stderr'
complete -c kvaudit -n "__fish_kvaudit_needs_command" -s h -l help -d 'Print help'
complete -c kvaudit -n "__fish_kvaudit_needs_command" -s V -l version -d 'Print version'
complete -c kvaudit -n "__fish_kvaudit_needs_command" -f -a "diff-turns" -d 'Render each turn with the model\'s template and tokenizer and show where turn k+1 stops extending what the decode server holds after turn k'
complete -c kvaudit -n "__fish_kvaudit_needs_command" -f -a "fetch" -d 'Download a model\'s tokenizer and chat template files into the Hugging Face cache and print the snapshot directory'
complete -c kvaudit -n "__fish_kvaudit_needs_command" -f -a "replay" -d 'Replay a KV-event capture through llm-d\'s precise prefix index and report what it keeps, what it skips and why, and what lookups find versus what the engine holds'
complete -c kvaudit -n "__fish_kvaudit_needs_command" -f -a "keys" -d 'Print llm-d\'s block keys for a token list or a rendered conversation'
complete -c kvaudit -n "__fish_kvaudit_needs_command" -f -a "render" -d 'Print the exact prompts kvaudit renders for a conversation (what the model sees), or the held stream of one transition'
complete -c kvaudit -n "__fish_kvaudit_needs_command" -f -a "capture" -d 'Record KV events live from vLLM/SGLang ZMQ publishers into a `.frames` file, with gap detection and recovery through the publishers\' replay sockets'
complete -c kvaudit -n "__fish_kvaudit_needs_command" -f -a "watch" -d 'Attribute every prompt token of a fleet\'s requests to why it was or was not served from the KV cache (reused, misrouted, evicted, block tail, rewritten, new), with each pod\'s holdings kept by its KV events'
complete -c kvaudit -n "__fish_kvaudit_needs_command" -f -a "check" -d 'The CI gate: audit the models of kvaudit.toml, compare with the baseline, and fail (exit 1) on deny findings'
complete -c kvaudit -n "__fish_kvaudit_needs_command" -f -a "corpus" -d 'Audit a corpus of real conversations (JSONL, ShareGPT, WildChat; gzip or zstd; Parquet) on worker threads: uncached tokens per block size, rewrite classes, the router\'s view, PPD session-key collisions, and what each serving alternative computes and moves'
complete -c kvaudit -n "__fish_kvaudit_needs_command" -f -a "merge" -d 'Merge the partial results of corpus runs over shards (`corpus --partial`) into the report one run over all the shards would have printed'
complete -c kvaudit -n "__fish_kvaudit_needs_command" -f -a "probe" -d 'Chat with a live OpenAI-compatible server (vLLM, SGLang, llama.cpp) turn by turn and put its prompt and cached-token counts beside kvaudit\'s render and prediction'
complete -c kvaudit -n "__fish_kvaudit_needs_command" -f -a "init" -d 'Write a commented starter kvaudit.toml for the models given'
complete -c kvaudit -n "__fish_kvaudit_needs_command" -f -a "completions" -d 'Print the shell completion script for a shell'
complete -c kvaudit -n "__fish_kvaudit_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -s m -l model -d 'A local model directory, a GGUF file (its tokenizer and chat templates, tokenized as llama.cpp tokenizes), or a Hub id `org/name[@revision]`' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l revision -d 'Hub revision (branch, tag or commit); overrides `@revision` in --model' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l template -d 'Use this chat template file instead of the model\'s (e.g. the file under review)' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l template-name -d 'Use the model\'s named template (e.g. `tool_use`)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l tokenizer -d 'Use this tokenizer.json instead of the model\'s' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -s c -l conversation -d 'A conversation JSON file, `-` for standard input (repeatable; each is audited separately)' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l system -d 'Quick form: a system prompt' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l user -d 'Quick form: the first user message' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l reply -d 'Quick form: the assistant\'s answer (content)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l reasoning -d 'Quick form: the assistant\'s reasoning, for reasoning models' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l follow-up -d 'Quick form: a follow-up user message (repeatable; each is a separate conversation)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l resend -d 'Quick form and probes: how the client sends the reply back' -r -f -a "content\t'Content only, as a server with a reasoning parser returns it'
raw\t'The generated text verbatim, reasoning block included'
reasoning-field\t'Content plus the reasoning field the server reads: `reasoning` under --server vllm, else `reasoning_content` / `thinking`'"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l reply-format -d 'Reply layout for derived replies (default: detected from the template)' -r -f -a "plain\t''
think_nl\t''
think_tight\t''
harmony\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l template-kwarg -d 'A template variable `key=value` (value parsed as JSON, Python\'s True/False/None as booleans and null, else a string); repeatable. A key the template never reads is warned about. Under --server vllm|sglang this is the request\'s `chat_template_kwargs`' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l kwargs-turn -d 'A template variable that changes at prompt N and stays, `N:KEY=VALUE` (value parsed as JSON, else a string), over --template-kwarg; repeatable. E.g. 2:enable_thinking=false' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l server -d 'Render each request as this server does: its message preprocessing (content null, content parts, tool-call arguments, reasoning fields, tools, kwargs) before the template' -r -f -a "transformers\t'transformers\' apply_chat_template on the messages as given (4.57)'
vllm\t'vLLM 0.32, the release the tests run (vllm/renderers since PR #48922), OpenAI server with the HF tokenizer mode; gpt-oss (Harmony) and Mistral (mistral-common) bypass Jinja there'
vllm@0.32\t'the same as vllm'
sglang\t'SGLang 0.5.23, the release the tests run, OpenAI server on its Jinja path: tools as the client wrote them'
sglang@0.5.23\t'the same as sglang'
sglang@main\t'SGLang main with the chat_input package (commits 3ba38dc0, 310081f7), Jinja path: every tool field written, strict false'
llamacpp\t'llama.cpp llama-server --jinja after b7756: messages re-serialised (reasoning_content kept, `reasoning` dropped), BOS/EOS text stripped; capability polyfills not emulated'"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l server-template-kwarg -d 'The server\'s default template kwarg `key=value` (vLLM/SGLang `--default-chat-template-kwargs`; the request\'s own win); repeatable' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l now -d 'The clock for strftime_now, e.g. 2026-01-15T10:00:00 (default: now, local time). A zone (Z, +02:00) is allowed and the time is taken as the wall clock at that offset, which is what a server in that zone prints' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l fuel -d 'Instruction budget per render (templates are untrusted input)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l block-sizes -d 'KV block sizes for the uncached counts' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l router-config -d 'A router\'s real configuration to emulate (repeatable): llm-d\'s EndpointPickerConfig (YAML), or a file of Dynamo\'s, vllm-router\'s or smg\'s flags; what it names and kvaudit does not model is reported' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l router -d 'A router to ask, `NAME` or `NAME:key=value,...` (repeatable): llm-d (diff-turns\' and corpus\' default; watch asks none unless given), llm-d-approx, dynamo, dynamo-approx, vllm-router, sglang, gaie; each answers what it credits to the decode pod and where the next turn goes (docs/routers.md)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l index-block-size -d 'llm-d\'s index block size (blockSizeTokens) for the router view' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l hash -d 'Block key hash' -r -f -a "cbor-fnv\t''
xxh64\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l hash-seed -d 'llm-d\'s hashSeed' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l model-name -d 'Model name used in block keys (default: from each topic, or the --model given)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l llmd-profile -d 'Which llm-d behaviour to reproduce for events shorter than one index block' -r -f -a "digest-first\t'Events shorter than one index block fail a digest check (incomplete_canonical_block)'
router-2026-08\t'llm-d-router as of 2026-08: silent drop, then parent_unresolved for the descendants'"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l topic-filter -d 'llm-d\'s kvEventsConfig.topicFilter (replay, capture): its subscriber receives only messages whose topic starts with it, and never sees the others (counted as `topic_filter`); an empty filter receives every topic' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l decider -d 'The prefix-based P/D decider\'s settings (llm-d\'s nonCachedTokens, promptTokens); a setting left out keeps its default here, and 0 turns a threshold off' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l engine-block-size -d 'The engine\'s (vLLM\'s) KV block size, for the simulated events of the router view' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l format -d 'Output format' -r -f -a "human\t''
json\t''
markdown\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l color -d 'When to colour human output (auto: on a terminal, unless NO_COLOR is set non-empty; FORCE_COLOR forces it)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l offline -d 'Use the Hugging Face cache only, never the network (also HF_HUB_OFFLINE=1)'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l date-rollover -d 'Also render each prompt one day after the previous (23:59 -> 00:01) and report whether the divergence moves'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l remedies -d 'For each transition with a rewrite point, re-run the audit under every applicable remedy (each resend mode, each history switch the template reads, a pinned date, keeping the previous request\'s kwargs and tools) and report what each one saves'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l global-socket -d 'llm-d binds one socket for every pod (kvEventsConfig.zmqEndpoint set; replay, capture): each message\'s pod is the one its topic names (kv@POD@MODEL), scored only when that is an endpoint\'s IP address:port; the others are counted as `pod_not_endpoint` and credit nothing'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -l only-rewrites -d 'Human output: show only transitions with a rewrite point (the summary still counts every transition; JSON and Markdown always list them all)'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -s q -l quiet -d 'Print nothing on stdout: the exit code is the answer (0 clean, 1 findings, 2 error). Errors still go to stderr'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand diff-turns" -s V -l version -d 'Print version'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand fetch" -l revision -d 'Revision (branch, tag or commit)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand fetch" -l color -d 'When to colour human output (auto: on a terminal, unless NO_COLOR is set non-empty; FORCE_COLOR forces it)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand fetch" -l offline -d 'Check the cache only'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand fetch" -l force -d 'Ask the Hub again even when the revision is cached: a branch or tag that moved is re-resolved and only files whose content changed are downloaded'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand fetch" -s q -l quiet -d 'Print nothing on stdout: the exit code is the answer (0 clean, 1 findings, 2 error). Errors still go to stderr'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand fetch" -s h -l help -d 'Print help'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand fetch" -s V -l version -d 'Print version'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand replay" -l block-sizes -l index-block-size -d 'llm-d index block sizes to emulate; a list is one pass over the stream (`--index-block-size`, its older name, still works)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand replay" -l router -d 'A router to replay the events through, `NAME` or `NAME:block_size=B` (repeatable): `llm-d` (the default: one view per --block-sizes) or `dynamo` (at the engine\'s block size, learned from the events, unless block_size is given)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand replay" -l hash -d 'Block key hash' -r -f -a "cbor-fnv\t''
xxh64\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand replay" -l hash-seed -d 'llm-d\'s hashSeed' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand replay" -l model-name -d 'Model name used in block keys (default: from each topic, or the --model given)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand replay" -l llmd-profile -d 'Which llm-d behaviour to reproduce for events shorter than one index block' -r -f -a "digest-first\t'Events shorter than one index block fail a digest check (incomplete_canonical_block)'
router-2026-08\t'llm-d-router as of 2026-08: silent drop, then parent_unresolved for the descendants'"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand replay" -l topic-filter -d 'llm-d\'s kvEventsConfig.topicFilter (replay, capture): its subscriber receives only messages whose topic starts with it, and never sees the others (counted as `topic_filter`); an empty filter receives every topic' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand replay" -l engine -d 'The engine that publishes the events' -r -f -a "vllm\t''
sglang\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand replay" -l lookup -d 'Explicit lookups: a JSON list of token-id lists or {"tokens", "pod", "model"} objects' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand replay" -l pod -d 'Pod name for captures without topics (raw msgpack)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand replay" -l format -d 'Output format' -r -f -a "human\t''
json\t''
prometheus\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand replay" -l color -d 'When to colour human output (auto: on a terminal, unless NO_COLOR is set non-empty; FORCE_COLOR forces it)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand replay" -l global-socket -d 'llm-d binds one socket for every pod (kvEventsConfig.zmqEndpoint set; replay, capture): each message\'s pod is the one its topic names (kv@POD@MODEL), scored only when that is an endpoint\'s IP address:port; the others are counted as `pod_not_endpoint` and credit nothing'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand replay" -l keep-going -d 'Count undecodable messages as malformed and go on, instead of stopping'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand replay" -s q -l quiet -d 'Print nothing on stdout: the exit code is the answer (0 clean, 1 findings, 2 error). Errors still go to stderr'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand replay" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand replay" -s V -l version -d 'Print version'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l tokens -d 'Token ids, comma separated' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l tokens-file -d 'A file of token ids (a JSON list, or ids separated by commas or whitespace)' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -s m -l model -d 'Render conversations with this model and print the keys of every prompt' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l template -d 'With --model: use this chat template file instead of the model\'s' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -s c -l conversation -d 'A conversation JSON file, `-` for standard input (repeatable; each is audited separately)' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l system -d 'Quick form: a system prompt' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l user -d 'Quick form: the first user message' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l reply -d 'Quick form: the assistant\'s answer (content)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l reasoning -d 'Quick form: the assistant\'s reasoning, for reasoning models' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l follow-up -d 'Quick form: a follow-up user message (repeatable; each is a separate conversation)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l resend -d 'Quick form and probes: how the client sends the reply back' -r -f -a "content\t'Content only, as a server with a reasoning parser returns it'
raw\t'The generated text verbatim, reasoning block included'
reasoning-field\t'Content plus the reasoning field the server reads: `reasoning` under --server vllm, else `reasoning_content` / `thinking`'"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l reply-format -d 'Reply layout for derived replies (default: detected from the template)' -r -f -a "plain\t''
think_nl\t''
think_tight\t''
harmony\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l template-kwarg -d 'A template variable `key=value` (value parsed as JSON, Python\'s True/False/None as booleans and null, else a string); repeatable. A key the template never reads is warned about. Under --server vllm|sglang this is the request\'s `chat_template_kwargs`' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l kwargs-turn -d 'A template variable that changes at prompt N and stays, `N:KEY=VALUE` (value parsed as JSON, else a string), over --template-kwarg; repeatable. E.g. 2:enable_thinking=false' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l server -d 'Render each request as this server does: its message preprocessing (content null, content parts, tool-call arguments, reasoning fields, tools, kwargs) before the template' -r -f -a "transformers\t'transformers\' apply_chat_template on the messages as given (4.57)'
vllm\t'vLLM 0.32, the release the tests run (vllm/renderers since PR #48922), OpenAI server with the HF tokenizer mode; gpt-oss (Harmony) and Mistral (mistral-common) bypass Jinja there'
vllm@0.32\t'the same as vllm'
sglang\t'SGLang 0.5.23, the release the tests run, OpenAI server on its Jinja path: tools as the client wrote them'
sglang@0.5.23\t'the same as sglang'
sglang@main\t'SGLang main with the chat_input package (commits 3ba38dc0, 310081f7), Jinja path: every tool field written, strict false'
llamacpp\t'llama.cpp llama-server --jinja after b7756: messages re-serialised (reasoning_content kept, `reasoning` dropped), BOS/EOS text stripped; capability polyfills not emulated'"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l server-template-kwarg -d 'The server\'s default template kwarg `key=value` (vLLM/SGLang `--default-chat-template-kwargs`; the request\'s own win); repeatable' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l now -d 'The clock for strftime_now, e.g. 2026-01-15T10:00:00 (default: now, local time). A zone (Z, +02:00) is allowed and the time is taken as the wall clock at that offset, which is what a server in that zone prints' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l fuel -d 'Instruction budget per render (templates are untrusted input)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l block-sizes -l index-block-size -d 'llm-d\'s block size (blockSizeTokens; `--index-block-size`, its older name, still works)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l hash -d 'Block key hash' -r -f -a "cbor-fnv\t''
xxh64\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l hash-seed -d 'llm-d\'s hashSeed' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l model-name -d 'Model name used in block keys (default: from each topic, or the --model given)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l llmd-profile -d 'Which llm-d behaviour to reproduce for events shorter than one index block' -r -f -a "digest-first\t'Events shorter than one index block fail a digest check (incomplete_canonical_block)'
router-2026-08\t'llm-d-router as of 2026-08: silent drop, then parent_unresolved for the descendants'"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l topic-filter -d 'llm-d\'s kvEventsConfig.topicFilter (replay, capture): its subscriber receives only messages whose topic starts with it, and never sees the others (counted as `topic_filter`); an empty filter receives every topic' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l format -d 'Output format' -r -f -a "human\t''
json\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l color -d 'When to colour human output (auto: on a terminal, unless NO_COLOR is set non-empty; FORCE_COLOR forces it)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l offline -d 'With --model: use the Hugging Face cache only'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -l global-socket -d 'llm-d binds one socket for every pod (kvEventsConfig.zmqEndpoint set; replay, capture): each message\'s pod is the one its topic names (kv@POD@MODEL), scored only when that is an endpoint\'s IP address:port; the others are counted as `pod_not_endpoint` and credit nothing'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -s q -l quiet -d 'Print nothing on stdout: the exit code is the answer (0 clean, 1 findings, 2 error). Errors still go to stderr'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand keys" -s V -l version -d 'Print version'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -s m -l model -d 'A local model directory, a GGUF file (its tokenizer and chat templates, tokenized as llama.cpp tokenizes), or a Hub id `org/name[@revision]`' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -l revision -d 'Hub revision (branch, tag or commit); overrides `@revision` in --model' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -l template -d 'Use this chat template file instead of the model\'s (e.g. the file under review)' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -l template-name -d 'Use the model\'s named template (e.g. `tool_use`)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -l tokenizer -d 'Use this tokenizer.json instead of the model\'s' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -s c -l conversation -d 'A conversation JSON file, `-` for standard input (repeatable; each is audited separately)' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -l system -d 'Quick form: a system prompt' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -l user -d 'Quick form: the first user message' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -l reply -d 'Quick form: the assistant\'s answer (content)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -l reasoning -d 'Quick form: the assistant\'s reasoning, for reasoning models' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -l follow-up -d 'Quick form: a follow-up user message (repeatable; each is a separate conversation)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -l resend -d 'Quick form and probes: how the client sends the reply back' -r -f -a "content\t'Content only, as a server with a reasoning parser returns it'
raw\t'The generated text verbatim, reasoning block included'
reasoning-field\t'Content plus the reasoning field the server reads: `reasoning` under --server vllm, else `reasoning_content` / `thinking`'"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -l reply-format -d 'Reply layout for derived replies (default: detected from the template)' -r -f -a "plain\t''
think_nl\t''
think_tight\t''
harmony\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -l template-kwarg -d 'A template variable `key=value` (value parsed as JSON, Python\'s True/False/None as booleans and null, else a string); repeatable. A key the template never reads is warned about. Under --server vllm|sglang this is the request\'s `chat_template_kwargs`' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -l kwargs-turn -d 'A template variable that changes at prompt N and stays, `N:KEY=VALUE` (value parsed as JSON, else a string), over --template-kwarg; repeatable. E.g. 2:enable_thinking=false' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -l server -d 'Render each request as this server does: its message preprocessing (content null, content parts, tool-call arguments, reasoning fields, tools, kwargs) before the template' -r -f -a "transformers\t'transformers\' apply_chat_template on the messages as given (4.57)'
vllm\t'vLLM 0.32, the release the tests run (vllm/renderers since PR #48922), OpenAI server with the HF tokenizer mode; gpt-oss (Harmony) and Mistral (mistral-common) bypass Jinja there'
vllm@0.32\t'the same as vllm'
sglang\t'SGLang 0.5.23, the release the tests run, OpenAI server on its Jinja path: tools as the client wrote them'
sglang@0.5.23\t'the same as sglang'
sglang@main\t'SGLang main with the chat_input package (commits 3ba38dc0, 310081f7), Jinja path: every tool field written, strict false'
llamacpp\t'llama.cpp llama-server --jinja after b7756: messages re-serialised (reasoning_content kept, `reasoning` dropped), BOS/EOS text stripped; capability polyfills not emulated'"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -l server-template-kwarg -d 'The server\'s default template kwarg `key=value` (vLLM/SGLang `--default-chat-template-kwargs`; the request\'s own win); repeatable' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -l now -d 'The clock for strftime_now, e.g. 2026-01-15T10:00:00 (default: now, local time). A zone (Z, +02:00) is allowed and the time is taken as the wall clock at that offset, which is what a server in that zone prints' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -l fuel -d 'Instruction budget per render (templates are untrusted input)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -l prompt -d 'Only prompt N (1-based) of each conversation' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -l held -d 'Instead of prompts, what the decode server holds after generation N: prompt N and its reply without the stop token (the held tokens of transition N -> N+1 in diff-turns)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -l format -d 'Output format' -r -f -a "human\t''
json\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -l color -d 'When to colour human output (auto: on a terminal, unless NO_COLOR is set non-empty; FORCE_COLOR forces it)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -l offline -d 'Use the Hugging Face cache only, never the network (also HF_HUB_OFFLINE=1)'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -l tokens -d 'Show the tokens: `text·id` pairs, special tokens in ⟨ ⟩ (JSON: ids and tokens)'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -s q -l quiet -d 'Print nothing on stdout: the exit code is the answer (0 clean, 1 findings, 2 error). Errors still go to stderr'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand render" -s V -l version -d 'Print version'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -l endpoint -d 'A publisher to connect to, e.g. tcp://10.0.0.5:5557 (repeatable; one SUB socket each)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -l bind -d 'Bind here instead, for publishers that connect out (e.g. tcp://0.0.0.0:5557). The address bound is printed to stderr ("listening on ...") and given in the summary, so port 0 (the system picks a free port) can be used' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -l topic -d 'Only topics starting with this prefix (ZMQ subscription; default: everything)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -l out -d 'The capture file to write (`.frames` layout, readable by `replay`)' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -l max-messages -d 'Stop after this many messages written. When the publishers have sent N (by their sequence numbers) but some were lost in gaps, capture does not wait for messages that will never come: once the live stream is quiet for --replay-timeout, recovery gets one more --replay-timeout, then capture stops ("stopped by max messages with gaps")' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -l duration -d 'Stop after this long, e.g. 90s, 5m' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -l replay-endpoint -d 'The replay (ROUTER) socket of each --endpoint, same order, to recover gaps' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -l block-sizes -l index-block-size -d 'llm-d index block sizes to emulate; a list is one pass over the stream (`--index-block-size`, its older name, still works)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -l router -d 'A router to replay the events through, `NAME` or `NAME:block_size=B` (repeatable): `llm-d` (the default: one view per --block-sizes) or `dynamo` (at the engine\'s block size, learned from the events, unless block_size is given)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -l hash -d 'Block key hash' -r -f -a "cbor-fnv\t''
xxh64\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -l hash-seed -d 'llm-d\'s hashSeed' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -l model-name -d 'Model name used in block keys (default: from each topic, or the --model given)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -l llmd-profile -d 'Which llm-d behaviour to reproduce for events shorter than one index block' -r -f -a "digest-first\t'Events shorter than one index block fail a digest check (incomplete_canonical_block)'
router-2026-08\t'llm-d-router as of 2026-08: silent drop, then parent_unresolved for the descendants'"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -l topic-filter -d 'llm-d\'s kvEventsConfig.topicFilter (replay, capture): its subscriber receives only messages whose topic starts with it, and never sees the others (counted as `topic_filter`); an empty filter receives every topic' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -l engine -d 'The engine that publishes the events' -r -f -a "vllm\t''
sglang\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -l connect-timeout -d 'How long to wait for each publisher to accept the connection, and for each connection\'s ZMTP handshake (a publisher that does not complete it in time is dropped and counted)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -l max-message-size -d 'The largest message (all its frames together) a publisher or replay endpoint may send, like libzmq\'s ZMQ_MAXMSGSIZE: a peer that announces more is dropped before any of it is read, and counted ("oversized_message"). Bytes, or with KiB, MiB, GiB (also K, M, G: powers of 1024); from 1 KiB to 1 GiB. The default is 30x the largest batch a vLLM engine step produces (about 8 MB for 1M tokens)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -l replay-timeout -d 'How long to wait for a replay socket to answer a gap' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -l format -d 'Output format of the summary' -r -f -a "human\t''
json\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -l color -d 'When to colour human output (auto: on a terminal, unless NO_COLOR is set non-empty; FORCE_COLOR forces it)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -l live-replay -d 'Run the llm-d emulation on the stream as it arrives (status line each second on a terminal)'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -l global-socket -d 'llm-d binds one socket for every pod (kvEventsConfig.zmqEndpoint set; replay, capture): each message\'s pod is the one its topic names (kv@POD@MODEL), scored only when that is an endpoint\'s IP address:port; the others are counted as `pod_not_endpoint` and credit nothing'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -s q -l quiet -d 'Print nothing on stdout: the exit code is the answer (0 clean, 1 findings, 2 error). Errors still go to stderr'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand capture" -s V -l version -d 'Print version'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -s m -l model -d 'A local model directory, a GGUF file (its tokenizer and chat templates, tokenized as llama.cpp tokenizes), or a Hub id `org/name[@revision]`' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l revision -d 'Hub revision (branch, tag or commit); overrides `@revision` in --model' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l template -d 'Use this chat template file instead of the model\'s (e.g. the file under review)' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l template-name -d 'Use the model\'s named template (e.g. `tool_use`)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l tokenizer -d 'Use this tokenizer.json instead of the model\'s' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l pod -d 'A pod and where its KV events come from: `NAME=ENDPOINT`, its publisher to subscribe to (e.g. d0=tcp://10.0.0.5:5557; vLLM binds for `tcp://*:PORT`), or with --requests `NAME=FILE`, a capture of it `kvaudit capture` wrote (repeatable, one per pod)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l bind -d 'A pod whose publisher connects out (vLLM with a host in its endpoint): `NAME=ENDPOINT` to bind for it, e.g. d1=tcp://0.0.0.0:5558 (repeatable)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l upstream -d 'Proxy mode: forward every connection to this URL (`http://HOST:PORT`, the router or the engine), every byte unchanged both ways, reading the chat requests and their answers as they pass' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l mirror -d 'Mirror mode: take copies of the requests (a gateway\'s request mirroring or shadow traffic) on ADDR, answer each at once and forward nothing; the serving pod comes from the events' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l listen -d 'Where the proxy listens (loopback unless you say otherwise)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l pod-header -d 'A response header naming the pod that served the request (else the pod whose next stores carry the prompt)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l metrics -d 'Serve Prometheus text at http://ADDR/metrics' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l interval -d 'How often the human summary goes to standard error while watching' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l duration -d 'Stop after this long (else at SIGTERM or Ctrl-C); the report goes to standard output' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l drain -d 'After the stop, how long exchanges in flight get to finish (less than the pod\'s termination grace period, so the report and files are written; a second signal skips it)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l topic -d 'Only event topics starting with this prefix' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l max-body -d 'The longest request or response body read (longer ones pass through unread, and are counted)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l connect-timeout -d 'How long to wait for each publisher and for the upstream to accept a connection' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l requests -d 'Request-log mode: the requests, one JSON object a line (`-` for standard input): `{"ts": SECONDS, "request": {chat completion body}, "pod": NAME, "usage": {the response\'s usage}}`; `pod` and `usage` when known, `ts` on the engines\' clock' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l block-size -d 'The engine\'s KV block size (default: the --server engine\'s default)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l pod-api -d 'A pod\'s HTTP address, `NAME=URL` (e.g. d0=http://10.0.0.5:8000; repeatable): read once at the start (vLLM\'s `/metrics`, SGLang\'s `/server_info`), its pool\'s block count bounds that pod\'s view in place of --capacity, and its block size must be --block-size' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l pod-replay -d 'A pod\'s replay (ROUTER) endpoint, `NAME=ENDPOINT` (vLLM\'s `replay_endpoint`, e.g. d0=tcp://10.0.0.5:5558; repeatable): a gap in the pod\'s events is recovered through it, the pod\'s later batches held meanwhile so all apply in order, instead of the view going stale' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l replay-timeout -d 'How long a replay endpoint gets to connect and to send each message of its answer' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l capacity -d 'The most KV blocks one pod holds (its GPU block count): a pod\'s view stops there and is marked stale rather than grow without bound' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l conversations -d 'Conversations remembered to link a request to the one before it (least recently seen forgotten first)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l record -d 'Also write the observed conversations, one JSON line each, as `kvaudit corpus` reads them (opt-in: they hold the prompts)' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l partial -d 'Also write, when the run ends, the corpus totals of the recorded conversations as a partial for `kvaudit merge` (and its HTML report): what `kvaudit corpus RECORD --block-sizes B --engine-block-size B --partial FILE` with the same model, rendering and router flags (`--no-router` when none is given) writes. Needs --record' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l per-request -d 'Also write one JSON line per attributed request: its number, pod, prompt length, the engine\'s cached_tokens and the tokens of each cause (counts only, no text)' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l router-config -d 'A router\'s real configuration to emulate (repeatable): llm-d\'s EndpointPickerConfig (YAML), or a file of Dynamo\'s, vllm-router\'s or smg\'s flags; what it names and kvaudit does not model is reported' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l router -d 'A router to ask, `NAME` or `NAME:key=value,...` (repeatable): llm-d (diff-turns\' and corpus\' default; watch asks none unless given), llm-d-approx, dynamo, dynamo-approx, vllm-router, sglang, gaie; each answers what it credits to the decode pod and where the next turn goes (docs/routers.md)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l index-block-size -d 'llm-d\'s index block size (blockSizeTokens) for the router view' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l hash -d 'Block key hash' -r -f -a "cbor-fnv\t''
xxh64\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l hash-seed -d 'llm-d\'s hashSeed' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l model-name -d 'Model name used in block keys (default: from each topic, or the --model given)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l llmd-profile -d 'Which llm-d behaviour to reproduce for events shorter than one index block' -r -f -a "digest-first\t'Events shorter than one index block fail a digest check (incomplete_canonical_block)'
router-2026-08\t'llm-d-router as of 2026-08: silent drop, then parent_unresolved for the descendants'"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l topic-filter -d 'llm-d\'s kvEventsConfig.topicFilter (replay, capture): its subscriber receives only messages whose topic starts with it, and never sees the others (counted as `topic_filter`); an empty filter receives every topic' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l decider -d 'The prefix-based P/D decider\'s settings (llm-d\'s nonCachedTokens, promptTokens); a setting left out keeps its default here, and 0 turns a threshold off' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l reply-format -d 'Reply layout for derived replies (default: detected from the template)' -r -f -a "plain\t''
think_nl\t''
think_tight\t''
harmony\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l template-kwarg -d 'A template variable `key=value` (value parsed as JSON, Python\'s True/False/None as booleans and null, else a string); repeatable. A key the template never reads is warned about. Under --server vllm|sglang this is the request\'s `chat_template_kwargs`' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l kwargs-turn -d 'A template variable that changes at prompt N and stays, `N:KEY=VALUE` (value parsed as JSON, else a string), over --template-kwarg; repeatable. E.g. 2:enable_thinking=false' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l server -d 'Render each request as this server does: its message preprocessing (content null, content parts, tool-call arguments, reasoning fields, tools, kwargs) before the template' -r -f -a "transformers\t'transformers\' apply_chat_template on the messages as given (4.57)'
vllm\t'vLLM 0.32, the release the tests run (vllm/renderers since PR #48922), OpenAI server with the HF tokenizer mode; gpt-oss (Harmony) and Mistral (mistral-common) bypass Jinja there'
vllm@0.32\t'the same as vllm'
sglang\t'SGLang 0.5.23, the release the tests run, OpenAI server on its Jinja path: tools as the client wrote them'
sglang@0.5.23\t'the same as sglang'
sglang@main\t'SGLang main with the chat_input package (commits 3ba38dc0, 310081f7), Jinja path: every tool field written, strict false'
llamacpp\t'llama.cpp llama-server --jinja after b7756: messages re-serialised (reasoning_content kept, `reasoning` dropped), BOS/EOS text stripped; capability polyfills not emulated'"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l server-template-kwarg -d 'The server\'s default template kwarg `key=value` (vLLM/SGLang `--default-chat-template-kwargs`; the request\'s own win); repeatable' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l now -d 'The clock for strftime_now, e.g. 2026-01-15T10:00:00 (default: now, local time). A zone (Z, +02:00) is allowed and the time is taken as the wall clock at that offset, which is what a server in that zone prints' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l fuel -d 'Instruction budget per render (templates are untrusted input)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l format -d 'Output format' -r -f -a "human\t''
json\t''
prometheus\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l color -d 'When to colour human output (auto: on a terminal, unless NO_COLOR is set non-empty; FORCE_COLOR forces it)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l offline -d 'Use the Hugging Face cache only, never the network (also HF_HUB_OFFLINE=1)'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -l global-socket -d 'llm-d binds one socket for every pod (kvEventsConfig.zmqEndpoint set; replay, capture): each message\'s pod is the one its topic names (kv@POD@MODEL), scored only when that is an endpoint\'s IP address:port; the others are counted as `pod_not_endpoint` and credit nothing'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -s q -l quiet -d 'Print nothing on stdout: the exit code is the answer (0 clean, 1 findings, 2 error). Errors still go to stderr'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand watch" -s V -l version -d 'Print version'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand check" -l router-config -d 'A router configuration to lint against the engine: llm-d\'s EndpointPickerConfig (YAML), or a file of Dynamo\'s, vllm-router\'s or smg\'s flags (KVA403–KVA406). With a kvaudit.toml, its llm-d wiring also becomes the router view of the models\' run' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand check" -l router -d 'A router to ask about every transition, `NAME[:key=value,...]` as in diff-turns (repeatable; adds to kvaudit.toml\'s `routers`): KVA407 when it sends a turn elsewhere that the decode pod could serve' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand check" -l engine-block-size -d 'The engine\'s KV block size (vLLM\'s --block-size) the router config is linted against' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand check" -l engine-args -d 'The engine\'s serving flags (a file holding the `vllm serve …` command line) the router config is linted against: KVA408 when vllm-router\'s cache_aware cannot render on it, KVA409 and KVA410 when llm-d\'s precise producer cannot receive or place its events' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand check" -l config -d 'The config file (default: ./kvaudit.toml when it exists)' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand check" -s m -l model -d 'Check this model (directory, GGUF file or Hub id) instead of the config\'s models; repeatable' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand check" -s c -l scenario -d 'Audit this conversation file instead of the config\'s scenarios; repeatable' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand check" -l template -d 'The template under review, for every model (overrides the config\'s `template`)' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand check" -l baseline-template -d 'Compare with this template instead of a lock: the gate fails on what got worse (e.g. `git show origin/main:chat_template.jinja > old.jinja`)' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand check" -l baseline -d 'The lock file to compare with or write (default: [gate] baseline, else kvaudit.lock)' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand check" -l format -d 'Output format' -r -f -a "human\t''
json\t''
sarif\t'SARIF 2.1.0, for GitHub code scanning'
junit\t'JUnit XML: one test case per model and scenario'
markdown\t'For $GITHUB_STEP_SUMMARY and pull-request comments'"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand check" -s o -l output -d 'Write the report to this file instead of stdout (`--update-baseline` writes no report)' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand check" -l explain -d 'Explain a finding code (e.g. KVA101) and exit' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand check" -s j -l jobs -d 'Models audited at once (default: one per core)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand check" -l color -d 'When to colour human output (auto: on a terminal, unless NO_COLOR is set non-empty; FORCE_COLOR forces it)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand check" -l update-baseline -d 'Write the lock from this run and exit 0 (accepting every finding as known)'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand check" -l list-codes -d 'List every finding code and exit'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand check" -l offline -d 'Use the Hugging Face cache only, never the network (also HF_HUB_OFFLINE=1)'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand check" -l no-remedies -d 'Do not measure remedies: help lines give the code\'s general advice (overrides [gate] remedies; saves re-rendering each conversation once per remedy)'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand check" -s q -l quiet -d 'Print nothing on stdout: the exit code is the answer (0 clean, 1 findings, 2 error). Errors still go to stderr'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand check" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand check" -s V -l version -d 'Print version'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -s m -l model -d 'A local model directory, a GGUF file (its tokenizer and chat templates, tokenized as llama.cpp tokenizes), or a Hub id `org/name[@revision]`' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l revision -d 'Hub revision (branch, tag or commit); overrides `@revision` in --model' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l template -d 'Use this chat template file instead of the model\'s (e.g. the file under review)' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l template-name -d 'Use the model\'s named template (e.g. `tool_use`)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l tokenizer -d 'Use this tokenizer.json instead of the model\'s' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l format-in -d 'How rows are laid out' -r -f -a "auto\t'Decided per file by its first row'
openai\t'kvaudit\'s conversation format or a bare list of messages, one per line (OpenAI chat)'
sharegpt\t'ShareGPT (`conversations` of `from`/`value`), a JSON array or one row per line'
wildchat\t'WildChat / LMSYS-Chat rows (`conversation` of `role`/`content`), one per line'"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l limit -d 'Read at most N rows (used or skipped), in input order' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l sample -d 'Audit a uniform random sample of N rows (reservoir sampling over the whole input, seeded: the same rows for the same input and --seed); memory grows with N' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l seed -d 'Seed for --sample' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l parquet-limit -d 'Raise (or lower) one of the limits a Parquet file is read within, checked before any row is read: `file_bytes=SIZE` (its pages decompressed plus the rows made of them, default 4GiB), `row_group_bytes=SIZE` (the same for one row group, which bounds one row; default 256MiB), `columns=N` (fields its schema declares; default 4096). Repeatable' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -s j -l jobs -d 'Worker threads (default: every core)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l reply-format -d 'Reply layout for derived replies (default: detected from the template)' -r -f -a "plain\t''
think_nl\t''
think_tight\t''
harmony\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l template-kwarg -d 'A template variable `key=value` (value parsed as JSON, Python\'s True/False/None as booleans and null, else a string); repeatable. A key the template never reads is warned about. Under --server vllm|sglang this is the request\'s `chat_template_kwargs`' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l kwargs-turn -d 'A template variable that changes at prompt N and stays, `N:KEY=VALUE` (value parsed as JSON, else a string), over --template-kwarg; repeatable. E.g. 2:enable_thinking=false' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l server -d 'Render each request as this server does: its message preprocessing (content null, content parts, tool-call arguments, reasoning fields, tools, kwargs) before the template' -r -f -a "transformers\t'transformers\' apply_chat_template on the messages as given (4.57)'
vllm\t'vLLM 0.32, the release the tests run (vllm/renderers since PR #48922), OpenAI server with the HF tokenizer mode; gpt-oss (Harmony) and Mistral (mistral-common) bypass Jinja there'
vllm@0.32\t'the same as vllm'
sglang\t'SGLang 0.5.23, the release the tests run, OpenAI server on its Jinja path: tools as the client wrote them'
sglang@0.5.23\t'the same as sglang'
sglang@main\t'SGLang main with the chat_input package (commits 3ba38dc0, 310081f7), Jinja path: every tool field written, strict false'
llamacpp\t'llama.cpp llama-server --jinja after b7756: messages re-serialised (reasoning_content kept, `reasoning` dropped), BOS/EOS text stripped; capability polyfills not emulated'"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l server-template-kwarg -d 'The server\'s default template kwarg `key=value` (vLLM/SGLang `--default-chat-template-kwargs`; the request\'s own win); repeatable' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l now -d 'The clock for strftime_now, e.g. 2026-01-15T10:00:00 (default: now, local time). A zone (Z, +02:00) is allowed and the time is taken as the wall clock at that offset, which is what a server in that zone prints' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l fuel -d 'Instruction budget per render (templates are untrusted input)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l block-sizes -d 'KV block sizes for the uncached counts and the alternatives' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l router-config -d 'A router\'s real configuration to emulate (repeatable): llm-d\'s EndpointPickerConfig (YAML), or a file of Dynamo\'s, vllm-router\'s or smg\'s flags; what it names and kvaudit does not model is reported' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l router -d 'A router to ask, `NAME` or `NAME:key=value,...` (repeatable): llm-d (diff-turns\' and corpus\' default; watch asks none unless given), llm-d-approx, dynamo, dynamo-approx, vllm-router, sglang, gaie; each answers what it credits to the decode pod and where the next turn goes (docs/routers.md)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l index-block-size -d 'llm-d\'s index block size (blockSizeTokens) for the router view' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l hash -d 'Block key hash' -r -f -a "cbor-fnv\t''
xxh64\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l hash-seed -d 'llm-d\'s hashSeed' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l model-name -d 'Model name used in block keys (default: from each topic, or the --model given)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l llmd-profile -d 'Which llm-d behaviour to reproduce for events shorter than one index block' -r -f -a "digest-first\t'Events shorter than one index block fail a digest check (incomplete_canonical_block)'
router-2026-08\t'llm-d-router as of 2026-08: silent drop, then parent_unresolved for the descendants'"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l topic-filter -d 'llm-d\'s kvEventsConfig.topicFilter (replay, capture): its subscriber receives only messages whose topic starts with it, and never sees the others (counted as `topic_filter`); an empty filter receives every topic' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l decider -d 'The prefix-based P/D decider\'s settings (llm-d\'s nonCachedTokens, promptTokens); a setting left out keeps its default here, and 0 turns a threshold off' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l engine-block-size -d 'The engine\'s (vLLM\'s) KV block size, for the simulated events of the router view' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l prefill-affinity -d 'Whether turn k+1\'s prefill pod still holds turn k\'s prompt (plain P/D and the alternatives that prefill on P)' -r -f -a "same\t'Turn k+1 reaches the prefill pod that prefilled turn k, its prefix cache intact'
none\t'Another prefill pod (or an evicted cache): nothing of the history is there'"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l kv-recompute-threshold -d 'vLLM\'s kv_recompute_threshold: a D->P pull shorter than this many tokens is recomputed on P instead' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l kv-bytes-per-token -d 'KV-cache bytes per token, for bytes moved (default: derived from the model\'s config.json when it has the fields)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l per-transition -d 'Also write one JSON line per transition (the diff-turns transition plus each alternative\'s cost), in input order' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l html -d 'Also write a self-contained HTML report (inline CSS and SVG, no external assets)' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l worst -d 'How many of the worst conversations (most uncached tokens at the first block size) the report lists' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l partial -d 'Also write this shard\'s totals to FILE for `kvaudit merge` (not with --sample or --limit). A shard whose rows are all skipped still writes its partial' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l format -d 'Output format' -r -f -a "human\t''
json\t''
markdown\t''
html\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l color -d 'When to colour human output (auto: on a terminal, unless NO_COLOR is set non-empty; FORCE_COLOR forces it)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l offline -d 'Use the Hugging Face cache only, never the network (also HF_HUB_OFFLINE=1)'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l global-socket -d 'llm-d binds one socket for every pod (kvEventsConfig.zmqEndpoint set; replay, capture): each message\'s pod is the one its topic names (kv@POD@MODEL), scored only when that is an endpoint\'s IP address:port; the others are counted as `pod_not_endpoint` and credit nothing'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l no-router -d 'Leave out the router view (simulated events, index lookups, decider)'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -l remedies -d 'For every rewrite point, re-run the audit under each applicable remedy (as `diff-turns --remedies`) and total, per remedy, the rewrite points it removes and the uncached tokens with and without it. Each remedy is a full re-render: slower'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -s q -l quiet -d 'Print nothing on stdout: the exit code is the answer (0 clean, 1 findings, 2 error). Errors still go to stderr'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand corpus" -s V -l version -d 'Print version'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand merge" -l html -d 'Also write a self-contained HTML report' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand merge" -l format -d 'Output format' -r -f -a "human\t''
json\t''
markdown\t''
html\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand merge" -l color -d 'When to colour human output (auto: on a terminal, unless NO_COLOR is set non-empty; FORCE_COLOR forces it)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand merge" -s q -l quiet -d 'Print nothing on stdout: the exit code is the answer (0 clean, 1 findings, 2 error). Errors still go to stderr'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand merge" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand merge" -s V -l version -d 'Print version'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l url -d 'The server\'s OpenAI base URL, e.g. http://host:8000/v1' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -s m -l model -d 'A local model directory, a GGUF file (its tokenizer and chat templates, tokenized as llama.cpp tokenizes), or a Hub id `org/name[@revision]`' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l revision -d 'Hub revision (branch, tag or commit); overrides `@revision` in --model' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l template -d 'Use this chat template file instead of the model\'s (e.g. the file under review)' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l template-name -d 'Use the model\'s named template (e.g. `tool_use`)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l tokenizer -d 'Use this tokenizer.json instead of the model\'s' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l served-model -d 'The model name the server serves it under (default: the first of /v1/models)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l server -d 'The engine behind the URL, `name@release` to pick the release whose rendering applies (default: from /v1/models `owned_by`, its newest release kvaudit follows)' -r -f -a "vllm\t'vLLM 0.32, the release the tests run (vllm/renderers since PR #48922), OpenAI server with the HF tokenizer mode; gpt-oss (Harmony) and Mistral (mistral-common) bypass Jinja there'
vllm@0.32\t'the same as vllm'
sglang\t'SGLang 0.5.23, the release the tests run, OpenAI server on its Jinja path: tools as the client wrote them'
sglang@0.5.23\t'the same as sglang'
sglang@main\t'SGLang main with the chat_input package (commits 3ba38dc0, 310081f7), Jinja path: every tool field written, strict false'
llamacpp\t'llama.cpp llama-server --jinja after b7756: messages re-serialised (reasoning_content kept, `reasoning` dropped), BOS/EOS text stripped; capability polyfills not emulated'"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -s c -l conversation -d 'A conversation JSON file: its user messages are sent, its assistant messages mark where the server\'s replies go' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l system -d 'Quick form: a system prompt' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l user -d 'Quick form: the first user message' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l follow-up -d 'Quick form: a later user message (repeatable, in order)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l resend -d 'How the client sends each reply back' -r -f -a "content\t'Content only, as a server with a reasoning parser returns it'
raw\t'The generated text verbatim, reasoning block included'
reasoning-field\t'Content plus the reasoning field the server reads: `reasoning` under --server vllm, else `reasoning_content` / `thinking`'"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l turns -d 'Send at most K turns (default: every user turn of the conversation)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l max-tokens -d 'max_tokens of each request' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l seed -d 'The sampling seed of each request (with temperature 0)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l block-sizes -l block-size -d 'The server\'s KV block size (vLLM --block-size) or page size (SGLang --page-size); `--block-size` still works' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l api-key -d 'The API key (default: OPENAI_API_KEY); sent only to the --url host, never printed' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l header -d 'An extra request header `NAME: VALUE` (repeatable), for routers that need one' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l pod-header -d 'A response header that names the pod that answered (repeatable; default: the usual router headers, e.g. x-gateway-destination-endpoint)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l timeout -d 'How long one request may take, generation included' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l connect-timeout -d 'How long to wait for the connection' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l save-conversation -d 'Also write the conversation as it happened (replies with their sampled ids), which `diff-turns --conversation` audits to the same numbers' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l reply-format -d 'Reply layout for the replies (default: detected from the template)' -r -f -a "plain\t''
think_nl\t''
think_tight\t''
harmony\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l template-kwarg -d 'A template variable `key=value` sent as the request\'s `chat_template_kwargs` and rendered by kvaudit alike (value parsed as JSON, else a string); repeatable. E.g. enable_thinking=false' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l server-template-kwarg -d 'The server\'s default template kwarg `key=value` (vLLM/SGLang `--default-chat-template-kwargs`, llama-server `--chat-template-kwargs`): kvaudit renders with it, the request does not send it; repeatable' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l now -d 'The clock for strftime_now (default: now, local time), as the server\'s' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l fuel -d 'Instruction budget per render (templates are untrusted input)' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l format -d 'Output format' -r -f -a "human\t''
json\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l color -d 'When to colour human output (auto: on a terminal, unless NO_COLOR is set non-empty; FORCE_COLOR forces it)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -l offline -d 'Use the Hugging Face cache only, never the network (also HF_HUB_OFFLINE=1)'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -s q -l quiet -d 'Print nothing on stdout: the exit code is the answer (0 clean, 1 findings, 2 error). Errors still go to stderr'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand probe" -s V -l version -d 'Print version'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand init" -s m -l model -d 'A model to check (directory or Hub id, `@revision` to pin); repeatable' -r
complete -c kvaudit -n "__fish_kvaudit_using_subcommand init" -l output -d 'Where to write it' -r -F
complete -c kvaudit -n "__fish_kvaudit_using_subcommand init" -l color -d 'When to colour human output (auto: on a terminal, unless NO_COLOR is set non-empty; FORCE_COLOR forces it)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand init" -l force -d 'Overwrite an existing file'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand init" -s q -l quiet -d 'Print nothing on stdout: the exit code is the answer (0 clean, 1 findings, 2 error). Errors still go to stderr'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand init" -s h -l help -d 'Print help'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand init" -s V -l version -d 'Print version'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand completions" -l color -d 'When to colour human output (auto: on a terminal, unless NO_COLOR is set non-empty; FORCE_COLOR forces it)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kvaudit -n "__fish_kvaudit_using_subcommand completions" -s q -l quiet -d 'Print nothing on stdout: the exit code is the answer (0 clean, 1 findings, 2 error). Errors still go to stderr'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand completions" -s h -l help -d 'Print help'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand completions" -s V -l version -d 'Print version'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand help; and not __fish_seen_subcommand_from diff-turns fetch replay keys render capture watch check corpus merge probe init completions help" -f -a "diff-turns" -d 'Render each turn with the model\'s template and tokenizer and show where turn k+1 stops extending what the decode server holds after turn k'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand help; and not __fish_seen_subcommand_from diff-turns fetch replay keys render capture watch check corpus merge probe init completions help" -f -a "fetch" -d 'Download a model\'s tokenizer and chat template files into the Hugging Face cache and print the snapshot directory'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand help; and not __fish_seen_subcommand_from diff-turns fetch replay keys render capture watch check corpus merge probe init completions help" -f -a "replay" -d 'Replay a KV-event capture through llm-d\'s precise prefix index and report what it keeps, what it skips and why, and what lookups find versus what the engine holds'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand help; and not __fish_seen_subcommand_from diff-turns fetch replay keys render capture watch check corpus merge probe init completions help" -f -a "keys" -d 'Print llm-d\'s block keys for a token list or a rendered conversation'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand help; and not __fish_seen_subcommand_from diff-turns fetch replay keys render capture watch check corpus merge probe init completions help" -f -a "render" -d 'Print the exact prompts kvaudit renders for a conversation (what the model sees), or the held stream of one transition'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand help; and not __fish_seen_subcommand_from diff-turns fetch replay keys render capture watch check corpus merge probe init completions help" -f -a "capture" -d 'Record KV events live from vLLM/SGLang ZMQ publishers into a `.frames` file, with gap detection and recovery through the publishers\' replay sockets'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand help; and not __fish_seen_subcommand_from diff-turns fetch replay keys render capture watch check corpus merge probe init completions help" -f -a "watch" -d 'Attribute every prompt token of a fleet\'s requests to why it was or was not served from the KV cache (reused, misrouted, evicted, block tail, rewritten, new), with each pod\'s holdings kept by its KV events'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand help; and not __fish_seen_subcommand_from diff-turns fetch replay keys render capture watch check corpus merge probe init completions help" -f -a "check" -d 'The CI gate: audit the models of kvaudit.toml, compare with the baseline, and fail (exit 1) on deny findings'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand help; and not __fish_seen_subcommand_from diff-turns fetch replay keys render capture watch check corpus merge probe init completions help" -f -a "corpus" -d 'Audit a corpus of real conversations (JSONL, ShareGPT, WildChat; gzip or zstd; Parquet) on worker threads: uncached tokens per block size, rewrite classes, the router\'s view, PPD session-key collisions, and what each serving alternative computes and moves'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand help; and not __fish_seen_subcommand_from diff-turns fetch replay keys render capture watch check corpus merge probe init completions help" -f -a "merge" -d 'Merge the partial results of corpus runs over shards (`corpus --partial`) into the report one run over all the shards would have printed'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand help; and not __fish_seen_subcommand_from diff-turns fetch replay keys render capture watch check corpus merge probe init completions help" -f -a "probe" -d 'Chat with a live OpenAI-compatible server (vLLM, SGLang, llama.cpp) turn by turn and put its prompt and cached-token counts beside kvaudit\'s render and prediction'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand help; and not __fish_seen_subcommand_from diff-turns fetch replay keys render capture watch check corpus merge probe init completions help" -f -a "init" -d 'Write a commented starter kvaudit.toml for the models given'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand help; and not __fish_seen_subcommand_from diff-turns fetch replay keys render capture watch check corpus merge probe init completions help" -f -a "completions" -d 'Print the shell completion script for a shell'
complete -c kvaudit -n "__fish_kvaudit_using_subcommand help; and not __fish_seen_subcommand_from diff-turns fetch replay keys render capture watch check corpus merge probe init completions help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
