#!/usr/bin/env python3
"""The work of `kvaudit diff-turns --model DIR` done with transformers: load the tokenizer,
render each prompt, derive the reply, tokenize, align. One process per run, as a user would
run it; the benchmark times the whole process.

    diff_turns_reference.py DIR                      # the built-in probe (benches/diff_turns.py)
    diff_turns_reference.py DIR --conversation FILE  # one conversation (benches/long_conversations.py)

With --conversation, every prompt is rendered and tokenized once (prompt i+1 is both the next
prompt of transition i and the held prompt of transition i+1), each reply is its `generated`
text encoded, and a JSON object with [held, next, common prefix] per transition is printed."""
import json
import sys

from transformers import AutoTokenizer

Q = "What is the difference between a process and a thread?"
R = "The user asks about processes versus threads. I should contrast memory isolation, creation cost and how they share data."
A = "A process is an independent program with its own memory space, while a thread is a unit of execution inside a process. Threads of the same process share memory, so they are cheaper to create but need synchronization."
FOLLOW_UPS = [
    "Thanks, makes sense.",
    "Could you also explain how this changes when the two threads run on multiple CPU cores?",
    "That helps a lot. I am building a small web crawler that downloads a few thousand pages and parses them. Should I use threads, processes, or asyncio for that, and how would the answer change if parsing each page took a noticeable amount of CPU time each?",
]


def common_prefix(held, nxt):
    return next((i for i, (x, y) in enumerate(zip(held, nxt)) if x != y), min(len(held), len(nxt)))


def probe_rows(tok):
    """Held, next, common prefix and uncached tokens at B=16 and 64 of each probe follow-up."""
    for f in FOLLOW_UPS:
        first = [{"role": "user", "content": Q}]
        p1 = tok.apply_chat_template(first, tokenize=False, add_generation_prompt=True)
        reply = A if p1.rstrip().endswith("</think>") else f"<think>\n{R}\n</think>\n\n{A}"
        held = tok(p1, add_special_tokens=False)["input_ids"] + tok(reply, add_special_tokens=False)["input_ids"]
        second = first + [{"role": "assistant", "content": A}, {"role": "user", "content": f}]
        nxt = tok(tok.apply_chat_template(second, tokenize=False, add_generation_prompt=True), add_special_tokens=False)["input_ids"]
        lcp = common_prefix(held, nxt)
        yield len(held), len(nxt), lcp, [len(nxt) - (min(lcp, len(held)) // b) * b for b in (16, 64)]


def conversation(tok, path):
    with open(path, encoding="utf-8") as f:
        messages = json.load(f)["messages"]
    history, replies, cuts = [], [], []
    for m in messages:
        if m["role"] == "assistant":
            cuts.append(len(history))
            replies.append(m["generated"])
        history.append({"role": m["role"], "content": m["content"]})
    cuts.append(len(history))

    def prompt(n):
        text = tok.apply_chat_template(history[:n], tokenize=False, add_generation_prompt=True)
        return text, tok(text, add_special_tokens=False)["input_ids"]

    transitions = []
    text, ids = prompt(cuts[0])
    for k, reply in enumerate(replies):
        held = ids + tok(reply, add_special_tokens=False)["input_ids"]
        text, ids = prompt(cuts[k + 1])
        transitions.append([len(held), len(ids), common_prefix(held, ids)])
    print(json.dumps({"transitions": transitions, "last_prompt_bytes": len(text.encode())}))


def main():
    tok = AutoTokenizer.from_pretrained(sys.argv[1])
    if len(sys.argv) == 4 and sys.argv[2] == "--conversation":
        conversation(tok, sys.argv[3])
    else:
        for held, nxt, lcp, uncached in probe_rows(tok):
            print(held, nxt, lcp, uncached)


if __name__ == "__main__":
    main()
