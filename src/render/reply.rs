//! From a conversation to its prompts and generations: what the decode server held after each
//! assistant turn, and what the next prompt is.

use minijinja::Value;
use serde_json::{Map, Value as Json};

use super::conversation::{Clock, Conversation, entry, field};
use super::error::RenderError;
use super::reply_format::{
    ReplyFormat, derive_generated, extract_reasoning, strip_prefilled_opener, tool_call_generation,
};
use super::resend::{clean, history_message};
use super::server::{Request, ServerError, ServerProfile};
use super::{ChatRenderer, RequestError};

/// One generation: the prompt it answered and what the model produced after it.
#[derive(Debug, Clone)]
pub struct Turn {
    /// The rendered prompt P_k (with the generation prompt).
    pub prompt: String,
    /// The text generated after P_k, without the stop token.
    pub generated: String,
    /// Sampled ids when the conversation gives them.
    pub generated_ids: Option<Vec<u32>>,
    /// The reply stopped at max_tokens (`finish_reason: "length"`): its last sampled token was
    /// never fed back, so its KV was never computed.
    pub cut: bool,
    /// The reasoning text the reply carries, if any.
    pub reasoning: Option<String>,
    pub format: ReplyFormat,
    /// The reply gave neither its generated text nor its reasoning, and the model's format
    /// has a reasoning block: what it generated was derived from that format (e.g. an empty
    /// think block before the content).
    pub derived: bool,
}

/// Every prompt of a conversation and the generations between them.
#[derive(Debug, Clone)]
pub struct TurnPlan {
    pub turns: Vec<Turn>,
    /// `prompts[k]` is P_{k+1}: the prompt after generation k (0-based), when there is one.
    pub next_prompts: Vec<Option<String>>,
    /// The next prompt rendered at the held prompt's time, when the two times differ (so the
    /// aligner can tell a date change from a real rewrite).
    pub next_at_held_time: Vec<Option<String>>,
    /// The next prompt rendered with the held prompt's kwargs and tools, when the two
    /// requests differ (so the aligner can tell a per-request change from a real rewrite, and
    /// price keeping the previous request's kwargs and tools).
    pub next_with_held_request: Vec<Option<String>>,
    /// The system message text, if the conversation has one.
    pub system: Option<String>,
    /// Every message as the client sends it, replies as history (what routers that key on
    /// the request read).
    pub history: Vec<Json>,
    /// How many of `history`'s messages each prompt was rendered from (prompt k is
    /// `history[..request_messages[k]]`).
    pub request_messages: Vec<usize>,
    /// The first request the server refuses, when one after the first is: the plan stops
    /// before it, as the server serves the requests before it and answers that one with an
    /// error.
    pub refused: Option<Refused>,
}

/// A request the server profile refuses (vLLM's and SGLang's request validation).
#[derive(Debug, Clone, thiserror::Error)]
#[error("request {request}")]
pub struct Refused {
    /// 1-based: the request of prompt `request`.
    pub request: usize,
    #[source]
    pub source: ServerError,
}

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("{0}")]
    Shape(String),
    #[error("rendering prompt {prompt}")]
    Render {
        prompt: usize,
        #[source]
        source: RenderError,
    },
    #[error("prompt {prompt}")]
    Server {
        prompt: usize,
        #[source]
        source: ServerError,
    },
    #[error(
        "its prompts add up to more than {limit} bytes of text by prompt {prompt}: every turn \
         re-renders the whole history, so audit a shorter conversation (or split it)"
    )]
    TooLarge { prompt: usize, limit: usize },
}

/// The most text all prompts of one conversation may add up to. Every prompt repeats the
/// history before it, so the work (render, tokenize, align) grows with the square of the
/// conversation; this bounds it to well under a minute and a few hundred MB.
pub const MAX_TOTAL_PROMPT_BYTES: usize = 128 << 20;

/// Kwargs and reply handling shared by every conversation of one run.
#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    pub reply_format: Option<ReplyFormat>,
    /// Extra template kwargs (`--template-kwarg`), over the conversation's own.
    pub kwargs: Map<String, Json>,
    /// Stop strings beyond the template's own markers (generation_config.json's eos ids).
    pub extra_stops: Vec<String>,
    /// Whose message preprocessing turns each request into the template's inputs.
    pub server: ServerProfile,
    /// The server's default template kwargs (below the request's own).
    pub server_kwargs: Map<String, Json>,
    /// `--kwargs-turn`: from prompt N (1-based) on, these kwargs over all others but
    /// `override_kwargs` (a client setting changed at request N and kept).
    pub kwargs_from_prompt: Vec<(usize, Map<String, Json>)>,
    /// Kwargs over everything else, on every prompt (a remedy under evaluation).
    pub override_kwargs: Map<String, Json>,
}

impl PlanOptions {
    /// The kwargs prompt `index` (0-based) is requested with: the conversation's, its
    /// per-prompt ones, `--template-kwarg`, `--kwargs-turn`, then the override.
    pub fn kwargs_at(&self, conv: &Conversation, index: usize) -> Map<String, Json> {
        let mut kwargs = conv.kwargs_at(index);
        let from_flags = self
            .kwargs_from_prompt
            .iter()
            .filter(|(n, _)| *n <= index + 1)
            .map(|(_, m)| m);
        for layer in std::iter::once(&self.kwargs)
            .chain(from_flags)
            .chain(std::iter::once(&self.override_kwargs))
        {
            for (k, v) in layer {
                kwargs.insert(k.clone(), v.clone());
            }
        }
        kwargs
    }

    /// Whether prompts `a` and `b` (0-based) are requested with other kwargs or tools.
    pub fn request_differs(&self, conv: &Conversation, a: usize, b: usize) -> bool {
        self.kwargs_at(conv, a) != self.kwargs_at(conv, b) || conv.tools_at(a) != conv.tools_at(b)
    }
}

/// The messages a prompt is rendered from, with their template values when they are at hand
/// (see [`ChatRenderer::render_converted`]).
#[derive(Clone, Copy)]
struct Messages<'a> {
    json: &'a [Json],
    values: Option<&'a [Value]>,
}

/// A conversation's history as [`plan_turns`] builds it: each message converted to a template
/// value once as it is added, not again for every prompt that repeats it.
#[derive(Default)]
struct History {
    messages: Vec<Json>,
    values: Vec<Value>,
}

impl History {
    fn push(&mut self, message: Json) {
        self.values.push(super::message_value(&message));
        self.messages.push(message);
    }

    fn len(&self) -> usize {
        self.messages.len()
    }

    fn all(&self) -> Messages<'_> {
        self.prefix(self.len())
    }

    /// The first `n` messages.
    fn prefix(&self, n: usize) -> Messages<'_> {
        Messages {
            json: &self.messages[..n],
            values: Some(&self.values[..n]),
        }
    }
}

pub fn plan_turns(
    conv: &Conversation,
    renderer: &ChatRenderer,
    clock: &Clock,
    options: &PlanOptions,
) -> Result<TurnPlan, PlanError> {
    let msgs = &conv.messages;
    let assistant_at: Vec<usize> = msgs
        .iter()
        .enumerate()
        .filter(|(_, m)| role(m) == "assistant")
        .map(|(i, _)| i)
        .collect();
    if assistant_at.is_empty() {
        return Err(PlanError::Shape(
            "the conversation has no assistant message, so nothing was generated to compare".into(),
        ));
    }
    if assistant_at[0] == 0 {
        return Err(PlanError::Shape(
            "the conversation starts with an assistant message: there is no prompt it answers"
                .into(),
        ));
    }
    let last = *assistant_at.last().unwrap_or(&0);
    let has_final = msgs[last + 1..]
        .iter()
        .any(|m| matches!(role(m), "user" | "tool" | "ipython" | "function"));
    if assistant_at.len() == 1 && !has_final {
        return Err(PlanError::Shape(
            "nothing follows the only assistant message: add the next user or tool message".into(),
        ));
    }

    // Refuse before any work when the history's text alone, repeated in every prompt, is over
    // the bound (a template can drop text, so this counts only message contents).
    let mut history_bytes = 0usize;
    let mut estimate = 0usize;
    for (i, m) in msgs.iter().enumerate() {
        if role(m) == "assistant" {
            estimate = estimate.saturating_add(history_bytes);
            if estimate > MAX_TOTAL_PROMPT_BYTES {
                let prompt = msgs[..i].iter().filter(|m| role(m) == "assistant").count() + 1;
                return Err(PlanError::TooLarge {
                    prompt,
                    limit: MAX_TOTAL_PROMPT_BYTES,
                });
            }
        }
        let content = field(m, "content")
            .and_then(Json::as_str)
            .map_or(0, str::len);
        history_bytes = history_bytes.saturating_add(content);
    }

    let format = options
        .reply_format
        .unwrap_or_else(|| renderer.reply_format());
    let mut stops = renderer.stops().to_vec();
    for s in &options.extra_stops {
        if !s.is_empty() && !stops.contains(s) {
            stops.push(s.clone());
        }
    }
    let rendered_bytes = std::cell::Cell::new(0usize);
    // Prompt `at` rendered with the kwargs and tools of request `req`.
    let render_as = |history: Messages, agp: bool, at: usize, req: usize, clock: &Clock| {
        let kwargs = options.kwargs_at(conv, req);
        let request = Request {
            messages: history.json,
            tools: conv.tools_at(req),
            documents: conv.documents.as_ref(),
            kwargs: &kwargs,
            server_kwargs: &options.server_kwargs,
            add_generation_prompt: agp,
            // Without the generation prompt kvaudit renders the reply turn itself.
            reply: !agp,
        };
        let text = renderer
            .render_converted(options.server, &request, history.values, clock.at(at))
            .map_err(|e| match e {
                RequestError::Render(source) => PlanError::Render {
                    prompt: at + 1,
                    source,
                },
                RequestError::Server(source) => PlanError::Server {
                    prompt: at + 1,
                    source,
                },
            })?;
        let total = rendered_bytes.get().saturating_add(text.len());
        if total > MAX_TOTAL_PROMPT_BYTES {
            return Err(PlanError::TooLarge {
                prompt: at + 1,
                limit: MAX_TOTAL_PROMPT_BYTES,
            });
        }
        rendered_bytes.set(total);
        Ok(text)
    };
    let render = |history: Messages, agp: bool, at: usize, clock: &Clock| {
        render_as(history, agp, at, at, clock)
    };

    let mut history = History::default();
    let mut turns: Vec<Turn> = Vec::new();
    let mut prompts: Vec<String> = Vec::new();
    // How much of `history` each prompt was rendered from.
    let mut prompt_history: Vec<usize> = Vec::new();
    let mut refused = None;
    // A server refuses one request, not the conversation: the requests before it are served.
    // Only the first request refused fails the plan (there is nothing before it).
    let refusal = |e: PlanError, request: usize| match e {
        PlanError::Server { source, .. } if request > 1 => Ok(Refused { request, source }),
        e => Err(e),
    };
    for msg in msgs {
        if role(msg) != "assistant" {
            history.push(clean(msg));
            continue;
        }
        let k = turns.len();
        let prompt = match render(history.all(), true, k, clock) {
            Ok(p) => p,
            Err(e) => {
                refused = Some(refusal(e, k + 1)?);
                break;
            }
        };
        let none = Map::new();
        let obj = msg.as_object().unwrap_or(&none);
        let content = entry(obj, "content")
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_string();
        let given_reasoning = ["reasoning_content", "thinking", "reasoning"]
            .iter()
            .find_map(|k| entry(obj, k).and_then(Json::as_str))
            .map(str::to_string);
        let has_tool_calls = calls_tools(obj);

        let (generated, reasoning) =
            if let Some(text) = entry(obj, "generated").and_then(Json::as_str) {
                (text.to_string(), extract_reasoning(format, &prompt, text))
            } else if has_tool_calls {
                // The model's tool call is what the template renders for it as the last message.
                let thinking_off = prompt.trim_end().ends_with("</think>");
                let sent_reasoning = given_reasoning
                    .as_deref()
                    .filter(|_| format != ReplyFormat::Plain && !thinking_off);
                let mut with_call = history.messages.clone();
                with_call.push(history_message(
                    obj,
                    conv.resend,
                    options.server,
                    None,
                    sent_reasoning,
                ));
                let with_call = Messages {
                    json: &with_call,
                    values: None,
                };
                // The call is history in the next request: a server that refuses it refuses
                // request k + 2, and this turn's reply never reaches a prompt.
                let rendered = match render(with_call, false, k, clock) {
                    Ok(r) => r,
                    Err(e) => {
                        refused = Some(refusal(e, k + 2)?);
                        prompts.push(if k == 0 {
                            String::new()
                        } else {
                            prompt.clone()
                        });
                        prompt_history.push(history.len());
                        turns.push(Turn {
                            prompt,
                            generated: String::new(),
                            generated_ids: None,
                            cut: false,
                            reasoning: None,
                            format,
                            derived: false,
                        });
                        break;
                    }
                };
                tool_call_generation(
                    format,
                    &prompt,
                    &rendered,
                    &stops,
                    given_reasoning.as_deref(),
                )
            } else if given_reasoning.is_none() && content.contains("</think>") {
                // Content carries the raw reply, think block included.
                let text = strip_prefilled_opener(&prompt, &content);
                let reasoning = extract_reasoning(format, &prompt, &text);
                (text, reasoning)
            } else {
                derive_generated(format, &prompt, &content, given_reasoning.as_deref())
            };
        let generated_ids = entry(obj, "generated_ids")
            .and_then(Json::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_u64().map(|v| v as u32))
                    .collect::<Vec<u32>>()
            });
        let cut = entry(obj, "finish_reason").and_then(Json::as_str) == Some("length");
        let derived = format != ReplyFormat::Plain
            && entry(obj, "generated").is_none()
            && !has_tool_calls
            && given_reasoning.is_none()
            && !content.contains("</think>");
        history.push(history_message(
            obj,
            conv.resend,
            options.server,
            Some(&generated),
            reasoning.as_deref(),
        ));
        // Prompt k is also the next prompt of turn k - 1; the first is no turn's next.
        prompts.push(if k == 0 {
            String::new()
        } else {
            prompt.clone()
        });
        turns.push(Turn {
            prompt,
            generated,
            generated_ids,
            cut,
            reasoning,
            format,
            derived,
        });
        prompt_history.push(history.len() - 1);
    }
    if has_final && refused.is_none() {
        match render(history.all(), true, turns.len(), clock) {
            Ok(p) => {
                prompts.push(p);
                prompt_history.push(history.len());
            }
            Err(e) => refused = Some(refusal(e, turns.len() + 1)?),
        }
    }

    let mut next_prompts = Vec::with_capacity(turns.len());
    let mut next_at_held_time = Vec::with_capacity(turns.len());
    let mut next_with_held_request = Vec::with_capacity(turns.len());
    for k in 0..turns.len() {
        next_with_held_request.push(match prompts.get(k + 1) {
            Some(_) if options.request_differs(conv, k, k + 1) => Some(render_as(
                history.prefix(prompt_history[k + 1]),
                true,
                k + 1,
                k,
                clock,
            )?),
            _ => None,
        });
        // Moved out, not copied: prompt k + 1 is read only here (its turn has its own copy).
        let next = prompts.get_mut(k + 1).map(std::mem::take);
        let rerender = match &next {
            Some(_) if clock.at(k) != clock.at(k + 1) => {
                let frozen = Clock::Fixed(clock.at(k));
                Some(render(
                    history.prefix(prompt_history[k + 1]),
                    true,
                    k + 1,
                    &frozen,
                )?)
            }
            _ => None,
        };
        next_prompts.push(next);
        next_at_held_time.push(rerender);
    }
    let system = msgs
        .iter()
        .find(|m| role(m) == "system")
        .and_then(|m| field(m, "content"))
        .and_then(Json::as_str)
        .map(str::to_string);
    Ok(TurnPlan {
        turns,
        next_prompts,
        next_at_held_time,
        next_with_held_request,
        system,
        history: history.messages,
        request_messages: prompt_history,
        refused,
    })
}

/// Whether an assistant message calls tools: its reply is then the call the template renders
/// for it, cut at the model's stop tokens.
fn calls_tools(obj: &Map<String, Json>) -> bool {
    entry(obj, "tool_calls")
        .and_then(Json::as_array)
        .is_some_and(|a| !a.is_empty())
}

/// Whether [`plan_turns`] needs the texts of the model's stop tokens (its `extra_stops`) for a
/// conversation: only where a reply is a tool call.
pub fn needs_stop_tokens(conv: &Conversation) -> bool {
    conv.messages
        .iter()
        .any(|m| role(m) == "assistant" && m.as_object().is_some_and(calls_tools))
}

/// Whether a conversation is a single request: no assistant message, so there is one prompt
/// to render and nothing generated (`render` shows it; diff-turns has nothing to compare).
pub fn is_single_request(conv: &Conversation) -> bool {
    !conv.messages.iter().any(|m| role(m) == "assistant")
}

/// The one prompt of a conversation without an assistant message: every message, the
/// generation prompt, the same kwargs and clock as `plan_turns` would use for its first prompt.
pub fn render_single_request(
    conv: &Conversation,
    renderer: &ChatRenderer,
    clock: &Clock,
    options: &PlanOptions,
) -> Result<String, PlanError> {
    if !is_single_request(conv) {
        return Err(PlanError::Shape(
            "the conversation has assistant messages: plan its turns instead".into(),
        ));
    }
    if conv.messages.is_empty() {
        return Err(PlanError::Shape(
            "the conversation has no messages, so there is no prompt to render".into(),
        ));
    }
    let kwargs = options.kwargs_at(conv, 0);
    let history: Vec<Json> = conv.messages.iter().map(clean).collect();
    // Through the server profile, as plan_turns renders: a single request is a request too.
    let request = Request {
        messages: &history,
        tools: conv.tools_at(0),
        documents: conv.documents.as_ref(),
        kwargs: &kwargs,
        server_kwargs: &options.server_kwargs,
        add_generation_prompt: true,
        reply: false,
    };
    let text = renderer
        .render_request(options.server, &request, clock.at(0))
        .map_err(|e| match e {
            RequestError::Render(source) => PlanError::Render { prompt: 1, source },
            RequestError::Server(source) => PlanError::Server { prompt: 1, source },
        })?;
    if text.len() > MAX_TOTAL_PROMPT_BYTES {
        return Err(PlanError::TooLarge {
            prompt: 1,
            limit: MAX_TOTAL_PROMPT_BYTES,
        });
    }
    Ok(text)
}

fn role(m: &Json) -> &str {
    field(m, "role").and_then(Json::as_str).unwrap_or("")
}

/// Strings that end a generated turn: the eos token and the turn-end markers the template writes.
pub(super) fn stop_strings(renderer: &ChatRenderer) -> Vec<String> {
    let mut stops: Vec<String> = Vec::new();
    if let Some(eos) = renderer.special_token("eos_token") {
        stops.push(eos.to_string());
    }
    const MARKERS: [&str; 10] = [
        "<|im_end|>",
        "<|eot_id|>",
        "<|eom_id|>",
        "<|return|>",
        "<|call|>",
        "<|user|>",
        "<|observation|>",
        "<｜end▁of▁sentence｜>",
        "[e~[",
        "</s>",
    ];
    for m in MARKERS {
        if renderer.source().contains(m) && !stops.iter().any(|s| s == m) {
            stops.push(m.to_string());
        }
    }
    stops.retain(|s| !s.is_empty());
    stops
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kwargs_layers_apply_in_order() {
        let conv = Conversation::from_json_text(
            r#"{"messages": [], "template_kwargs": {"k": "file"},
                "template_kwargs_per_prompt": [{}, {"k": "per_prompt"}]}"#,
            "c",
        )
        .unwrap();
        let map = |v: serde_json::Value| v.as_object().cloned().unwrap();
        let mut options = PlanOptions::default();
        assert_eq!(options.kwargs_at(&conv, 1)["k"], "per_prompt");
        options.kwargs = map(serde_json::json!({"k": "flag"}));
        assert_eq!(options.kwargs_at(&conv, 0)["k"], "flag");
        options.kwargs_from_prompt = vec![(2, map(serde_json::json!({"k": "turn"})))];
        assert_eq!(options.kwargs_at(&conv, 0)["k"], "flag");
        assert_eq!(options.kwargs_at(&conv, 1)["k"], "turn");
        assert_eq!(options.kwargs_at(&conv, 9)["k"], "turn");
        assert!(options.request_differs(&conv, 0, 1));
        assert!(!options.request_differs(&conv, 1, 2));
        options.override_kwargs = map(serde_json::json!({"k": "remedy"}));
        assert!(!options.request_differs(&conv, 0, 1));
    }
}
