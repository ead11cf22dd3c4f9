//! What `probe` sends each engine and what it reads back (server-preprocessing.md 1.9, 2.8, 3).
//! Every field read from a server is untrusted: counts are checked, lists are bounded, and a
//! missing field is an error that names the server flag that turns it on.

use serde_json::{Map, Value as Json, json};

use super::ProbeError;
use super::http::Answer;

/// The serving engine behind the URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    Vllm,
    Sglang,
    Llamacpp,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
            Engine::Llamacpp => "llamacpp",
        }
    }

    /// The engine a `/v1/models` entry's `owned_by` names.
    pub fn from_owner(owner: &str) -> Option<Engine> {
        match owner.to_ascii_lowercase().as_str() {
            "vllm" => Some(Engine::Vllm),
            "sglang" => Some(Engine::Sglang),
            "llamacpp" | "llama.cpp" | "llama-cpp" => Some(Engine::Llamacpp),
            _ => None,
        }
    }

    /// The server flag without which the cached-token count is not in the answer.
    pub fn cached_tokens_flag(self) -> &'static str {
        match self {
            Engine::Vllm => {
                "vLLM reports usage.prompt_tokens_details.cached_tokens only when started with \
                 --enable-prompt-tokens-details (and only on requests with a cache hit)"
            }
            Engine::Sglang => {
                "SGLang reports usage.prompt_tokens_details.cached_tokens only when started with \
                 --enable-cache-report (and only on requests with a cache hit)"
            }
            Engine::Llamacpp => {
                "llama-server reports usage.prompt_tokens_details.cached_tokens and \
                 timings.cache_n on every chat completion; this server is older or another \
                 server behind the URL"
            }
        }
    }

    /// The KV granularity cached tokens come in by default: vLLM's block size, SGLang's page
    /// size; llama.cpp reuses any prefix token by token.
    pub fn default_block_size(self) -> usize {
        match self {
            Engine::Vllm => 16,
            Engine::Sglang | Engine::Llamacpp => 1,
        }
    }
}

/// One chat request as probe sends it.
#[derive(Debug, Clone)]
pub struct ChatRequest<'a> {
    pub model: &'a str,
    pub messages: &'a [Json],
    pub tools: Option<&'a Json>,
    pub kwargs: &'a Map<String, Json>,
    pub max_tokens: u32,
    pub seed: u64,
}

/// The `/v1/chat/completions` body: greedy (temperature 0, a fixed seed), not streamed, and
/// the engine's switch for token ids: `return_token_ids` (vLLM, SGLang), `logprobs` with one
/// top entry on llama-server, whose chat answer carries each sampled id there.
pub fn chat_body(engine: Engine, req: &ChatRequest) -> Json {
    let mut body = json!({
        "model": req.model,
        "messages": req.messages,
        "temperature": 0,
        "seed": req.seed,
        "max_tokens": req.max_tokens,
        "stream": false,
    });
    if let Some(tools) = req.tools {
        body["tools"] = tools.clone();
    }
    if !req.kwargs.is_empty() {
        body["chat_template_kwargs"] = Json::Object(req.kwargs.clone());
    }
    match engine {
        Engine::Vllm | Engine::Sglang => body["return_token_ids"] = Json::Bool(true),
        Engine::Llamacpp => {
            // Every sampled id is in `__verbose.tokens` (return_tokens + verbose); logprobs
            // entries skip tokens that end inside a UTF-8 character, so they are the fallback
            // of servers without `__verbose`, used only when they count every token.
            body["return_tokens"] = Json::Bool(true);
            body["verbose"] = Json::Bool(true);
            body["logprobs"] = Json::Bool(true);
            body["top_logprobs"] = json!(1);
            body["cache_prompt"] = Json::Bool(true);
        }
    }
    body
}

/// What one chat answer says.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub content: String,
    /// `reasoning_content` (SGLang, llama.cpp, older vLLM) or `reasoning` (vLLM).
    pub reasoning: Option<String>,
    pub has_tool_calls: bool,
    pub finish_reason: Option<String>,
    /// The sampled ids, when the engine returned them.
    pub generated_ids: Option<Vec<u32>>,
    pub prompt_tokens: usize,
    /// `None` when the answer has no cached-token field at all.
    pub cached_tokens: Option<usize>,
    /// The field the cached count came from.
    pub cached_field: Option<&'static str>,
    /// The prompt ids the server tokenized, when it returned them (vLLM, SGLang).
    pub prompt_ids: Option<Vec<u32>>,
    /// The served model the answer names.
    pub model: Option<String>,
}

/// Token lists longer than this are refused (no prompt or reply here is near it).
pub const MAX_IDS: usize = 4 << 20;

fn bad(endpoint: &str, why: String) -> ProbeError {
    ProbeError::Protocol {
        endpoint: endpoint.to_string(),
        why,
    }
}

fn count(v: &Json, endpoint: &str, field: &str) -> Result<usize, ProbeError> {
    v.as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n <= MAX_IDS)
        .ok_or_else(|| bad(endpoint, format!("{field} is {v}, not a token count")))
}

/// A list of token ids (each within u32).
pub fn ids(v: &Json, endpoint: &str, field: &str) -> Result<Vec<u32>, ProbeError> {
    let list = v
        .as_array()
        .ok_or_else(|| bad(endpoint, format!("{field} is not a list of token ids")))?;
    if list.len() > MAX_IDS {
        return Err(bad(
            endpoint,
            format!("{field} has more than {MAX_IDS} ids"),
        ));
    }
    list.iter()
        .map(|x| {
            x.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| bad(endpoint, format!("{field} holds {x}, not a token id")))
        })
        .collect()
}

fn text(v: Option<&Json>) -> Option<String> {
    v.and_then(Json::as_str).map(str::to_string)
}

/// The first choice of a chat answer, with the usage fields.
pub fn parse_chat(engine: Engine, answer: &Answer) -> Result<Reply, ProbeError> {
    const EP: &str = "/v1/chat/completions";
    let body = &answer.body;
    let choice = body
        .get("choices")
        .and_then(Json::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| bad(EP, "the answer has no choices".into()))?;
    let message = choice
        .get("message")
        .ok_or_else(|| bad(EP, "the first choice has no message".into()))?;
    let content = match message.get("content") {
        None | Some(Json::Null) => String::new(),
        Some(Json::String(s)) => s.clone(),
        Some(other) => return Err(bad(EP, format!("message.content is {other}"))),
    };
    let reasoning = text(message.get("reasoning_content"))
        .or_else(|| text(message.get("reasoning")))
        .filter(|r| !r.is_empty());
    let has_tool_calls = message
        .get("tool_calls")
        .and_then(Json::as_array)
        .is_some_and(|a| !a.is_empty());
    let usage = body.get("usage").filter(|u| u.is_object()).ok_or_else(|| {
        bad(
            EP,
            "the answer has no usage (prompt and cached token counts)".into(),
        )
    })?;
    let prompt_tokens = count(
        usage
            .get("prompt_tokens")
            .ok_or_else(|| bad(EP, "usage has no prompt_tokens".into()))?,
        EP,
        "usage.prompt_tokens",
    )?;
    let mut cached_field = None;
    let mut cached_tokens = None;
    if let Some(v) = usage
        .pointer("/prompt_tokens_details/cached_tokens")
        .filter(|v| !v.is_null())
    {
        cached_tokens = Some(count(v, EP, "usage.prompt_tokens_details.cached_tokens")?);
        cached_field = Some("usage.prompt_tokens_details.cached_tokens");
    } else if let Some(v) = body.pointer("/timings/cache_n").filter(|v| !v.is_null()) {
        cached_tokens = Some(count(v, EP, "timings.cache_n")?);
        cached_field = Some("timings.cache_n");
    }
    if cached_tokens.is_some_and(|c| c > prompt_tokens) {
        return Err(bad(
            EP,
            format!(
                "{} cached tokens of a {prompt_tokens}-token prompt",
                cached_tokens.unwrap_or(0)
            ),
        ));
    }
    let (generated_ids, prompt_ids) = match engine {
        Engine::Vllm => (
            choice
                .get("token_ids")
                .filter(|v| !v.is_null())
                .map(|v| ids(v, EP, "choices[0].token_ids"))
                .transpose()?,
            body.get("prompt_token_ids")
                .or_else(|| choice.get("prompt_token_ids"))
                .filter(|v| !v.is_null())
                .map(|v| ids(v, EP, "prompt_token_ids"))
                .transpose()?,
        ),
        // 0.5.23 answers `return_token_ids` with `response_token_ids`; `token_ids` is main's.
        Engine::Sglang => (
            match choice.get("response_token_ids").filter(|v| !v.is_null()) {
                Some(v) => Some(ids(v, EP, "choices[0].response_token_ids")?),
                None => choice
                    .get("token_ids")
                    .filter(|v| !v.is_null())
                    .map(|v| ids(v, EP, "choices[0].token_ids"))
                    .transpose()?,
            },
            choice
                .get("prompt_token_ids")
                .or_else(|| body.get("prompt_token_ids"))
                .filter(|v| !v.is_null())
                .map(|v| ids(v, EP, "choices[0].prompt_token_ids"))
                .transpose()?,
        ),
        Engine::Llamacpp => {
            let verbose = body
                .pointer("/__verbose/tokens")
                .filter(|v| v.as_array().is_some_and(|a| !a.is_empty()))
                .map(|v| ids(v, EP, "__verbose.tokens"))
                .transpose()?;
            let from_logprobs = match choice.pointer("/logprobs/content") {
                Some(Json::Array(list)) => {
                    if list.len() > MAX_IDS {
                        return Err(bad(EP, "logprobs.content is too long".into()));
                    }
                    let ids: Result<Vec<u32>, ProbeError> = list
                        .iter()
                        .map(|entry| {
                            entry
                                .get("id")
                                .and_then(Json::as_u64)
                                .and_then(|n| u32::try_from(n).ok())
                                .ok_or_else(|| {
                                    bad(EP, "a logprobs.content entry has no token id".into())
                                })
                        })
                        .collect();
                    Some(ids?)
                }
                _ => None,
            };
            // Without `__verbose`, the logprobs ids only when none is missing.
            let decoded = usage
                .get("completion_tokens")
                .and_then(Json::as_u64)
                .and_then(|n| usize::try_from(n).ok());
            let sampled =
                verbose.or_else(|| from_logprobs.filter(|l| decoded.is_none_or(|n| n == l.len())));
            (sampled, None)
        }
    };
    if let Some(p) = &prompt_ids
        && p.len() != prompt_tokens
    {
        return Err(bad(
            EP,
            format!(
                "usage.prompt_tokens is {prompt_tokens} but the answer lists {} prompt ids",
                p.len()
            ),
        ));
    }
    Ok(Reply {
        content,
        reasoning,
        has_tool_calls,
        finish_reason: text(choice.get("finish_reason")),
        generated_ids,
        prompt_tokens,
        cached_tokens,
        cached_field,
        prompt_ids,
        model: text(body.get("model")),
    })
}

/// llama-server's `/apply-template` answer: the rendered prompt text.
pub fn parse_applied_template(answer: &Answer) -> Result<String, ProbeError> {
    text(answer.body.get("prompt"))
        .ok_or_else(|| bad("/apply-template", "the answer has no prompt text".into()))
}

/// llama-server's `/tokenize` answer: `{"tokens": [ids]}`.
pub fn parse_tokenized(answer: &Answer) -> Result<Vec<u32>, ProbeError> {
    let tokens = answer
        .body
        .get("tokens")
        .ok_or_else(|| bad("/tokenize", "the answer has no tokens".into()))?;
    ids(tokens, "/tokenize", "tokens")
}

/// `/v1/models`: the first model's id and the engine its `owned_by` names.
pub fn parse_models(answer: &Answer) -> (Option<String>, Option<Engine>) {
    let first = answer
        .body
        .get("data")
        .and_then(Json::as_array)
        .and_then(|d| d.first());
    let id = first.and_then(|m| text(m.get("id")));
    let engine = first
        .and_then(|m| m.get("owned_by"))
        .and_then(Json::as_str)
        .and_then(Engine::from_owner);
    (id, engine)
}

/// The KV block size in vLLM's Prometheus `/metrics`: the `block_size` label of
/// `vllm:cache_config_info` (an info gauge whose labels are the cache config). The value is the
/// server's word: one outside the block sizes kvaudit takes is read as the server not saying.
pub fn metrics_block_size(text: &str) -> Option<usize> {
    cache_config_label(text, "block_size")
        .filter(|b| (1..=crate::align::MAX_BLOCK_SIZE).contains(b))
}

/// The number of KV blocks vLLM's pool has, from its `/metrics`: the `num_gpu_blocks` label of
/// `vllm:cache_config_info`.
pub fn metrics_gpu_blocks(text: &str) -> Option<usize> {
    cache_config_label(text, "num_gpu_blocks").filter(|&n| n > 0)
}

/// A whole-number label of `vllm:cache_config_info`.
fn cache_config_label(text: &str, name: &str) -> Option<usize> {
    let line = text
        .lines()
        .find(|l| l.starts_with("vllm:cache_config_info{"))?;
    let labels = &line["vllm:cache_config_info{".len()..line.rfind('}')?];
    labels.split(',').find_map(|pair| {
        let (key, value) = pair.trim().split_once('=')?;
        (key == name)
            .then(|| value.strip_prefix('"')?.strip_suffix('"')?.parse().ok())
            .flatten()
    })
}

/// What SGLang's `/server_info` says of itself.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct SglangInfo {
    pub page_size: Option<usize>,
    /// Tokens its KV pool holds (`max_total_num_tokens`, the scheduler's).
    pub pool_tokens: Option<u64>,
    pub version: Option<String>,
}

/// SGLang's `/server_info`: its `page_size` (the KV granularity of its radix cache), its
/// pool's `max_total_num_tokens` and `version`; values out of range or of another type are
/// left out.
pub fn sglang_server_info(body: &Json) -> SglangInfo {
    SglangInfo {
        pool_tokens: body
            .get("max_total_num_tokens")
            .and_then(Json::as_u64)
            .filter(|&n| n > 0),
        page_size: body
            .get("page_size")
            .and_then(Json::as_u64)
            .and_then(|n| usize::try_from(n).ok())
            .filter(|b| (1..=crate::align::MAX_BLOCK_SIZE).contains(b)),
        version: body
            .get("version")
            .and_then(Json::as_str)
            .filter(|v| v.len() <= 64 && v.chars().all(|c| c.is_ascii_graphic()))
            .map(str::to_string),
    }
}

#[cfg(test)]
mod metrics_tests {
    use super::{metrics_block_size, metrics_gpu_blocks};

    #[test]
    fn the_pool_size_is_read_from_the_cache_config_labels() {
        // vLLM 0.32 with --block-size 32 --num-gpu-blocks-override 48 (labels abridged; the
        // other *_block_size labels must not be taken for block_size).
        let text = "vllm:cache_config_info{_block_size_resolved=\"True\",block_size=\"32\",effective_attention_block_size=\"32\",hash_block_size=\"None\",mamba_block_size=\"None\",num_cpu_blocks=\"None\",num_gpu_blocks=\"48\",num_gpu_blocks_override=\"48\",user_specified_block_size=\"True\"} 1.0\n";
        assert_eq!(metrics_block_size(text), Some(32));
        assert_eq!(metrics_gpu_blocks(text), Some(48));
        assert_eq!(
            metrics_gpu_blocks("vllm:cache_config_info{num_gpu_blocks=\"None\"} 1.0"),
            None
        );
        assert_eq!(
            metrics_gpu_blocks("vllm:cache_config_info{num_gpu_blocks=\"0\"} 1.0"),
            None
        );
    }

    #[test]
    fn block_size_is_read_from_the_cache_config_labels() {
        // As vLLM 0.32 prints it (labels abridged).
        let text = "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n\
            # TYPE vllm:cache_config_info gauge\n\
            vllm:cache_config_info{block_size=\"32\",cache_dtype=\"auto\",enable_prefix_caching=\"True\"} 1.0\n";
        assert_eq!(metrics_block_size(text), Some(32));
        assert_eq!(metrics_block_size("vllm:num_requests_running 0.0\n"), None);
        assert_eq!(
            metrics_block_size("vllm:cache_config_info{block_size=\"0\"} 1.0"),
            None
        );
        assert_eq!(
            metrics_block_size("vllm:cache_config_info{block_size=\"x\"} 1.0"),
            None
        );
        assert_eq!(
            metrics_block_size("vllm:cache_config_info{block_size=\"65537\"} 1.0"),
            None
        );
    }
}
