//! The conversations kvaudit writes itself: the seed write-up's probe and the quick form
//! (`--user`, `--reply`, `--follow-up`).

use serde_json::{Value as Json, json};

use crate::render::{Conversation, ResendMode};

/// The seed write-up's probe: one short question and answer, then three follow-ups of
/// growing length (a five-token thanks, a one-line and a three-line question).
pub const PROBE_QUESTION: &str = "What is the difference between a process and a thread?";
pub const PROBE_REASONING: &str = "The user asks about processes versus threads. I should contrast memory isolation, creation cost and how they share data.";
pub const PROBE_ANSWER: &str = "A process is an independent program with its own memory space, while a thread is a unit of execution inside a process. Threads of the same process share memory, so they are cheaper to create but need synchronization.";
pub const PROBE_FOLLOW_UPS: [(&str, &str); 3] = [
    ("probe:thanks", "Thanks, makes sense."),
    (
        "probe:one-line",
        "Could you also explain how this changes when the two threads run on multiple CPU cores?",
    ),
    (
        "probe:three-line",
        "That helps a lot. I am building a small web crawler that downloads a few thousand pages and parses them. Should I use threads, processes, or asyncio for that, and how would the answer change if parsing each page took a noticeable amount of CPU time each?",
    ),
];

/// One question, one reply, one follow-up: the quick form of a conversation.
pub struct QuickTurn<'a> {
    pub source: String,
    pub system: Option<&'a str>,
    pub user: &'a str,
    pub reply: &'a str,
    pub reasoning: Option<&'a str>,
    pub follow_up: &'a str,
    pub resend: ResendMode,
}

pub fn quick_conversation(q: &QuickTurn) -> Conversation {
    let mut messages: Vec<Json> = Vec::new();
    if let Some(s) = q.system {
        messages.push(json!({"role": "system", "content": s}));
    }
    messages.push(json!({"role": "user", "content": q.user}));
    let mut reply = json!({"role": "assistant", "content": q.reply});
    if let Some(r) = q.reasoning {
        reply["reasoning_content"] = Json::String(r.to_string());
    }
    messages.push(reply);
    messages.push(json!({"role": "user", "content": q.follow_up}));
    Conversation::of_messages(&q.source, messages, q.resend)
}

pub fn probe_conversations(system: Option<&str>, resend: ResendMode) -> Vec<Conversation> {
    PROBE_FOLLOW_UPS
        .iter()
        .map(|(name, follow_up)| {
            quick_conversation(&QuickTurn {
                source: name.to_string(),
                system,
                user: PROBE_QUESTION,
                reply: PROBE_ANSWER,
                reasoning: Some(PROBE_REASONING),
                follow_up,
                resend,
            })
        })
        .collect()
}
