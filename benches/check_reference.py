#!/usr/bin/env python3
"""The work of `kvaudit check` over several models (built-in probe set) done with transformers,
in one process: load each tokenizer, render each prompt, derive the reply, tokenize, align.
It does less than the gate (no date-rollover render, no findings), which favours it."""
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

for model in sys.argv[1:]:
    tok = AutoTokenizer.from_pretrained(model)
    for f in FOLLOW_UPS:
        first = [{"role": "user", "content": Q}]
        p1 = tok.apply_chat_template(first, tokenize=False, add_generation_prompt=True)
        reply = A if p1.rstrip().endswith("</think>") else f"<think>\n{R}\n</think>\n\n{A}"
        held = tok(p1, add_special_tokens=False)["input_ids"] + tok(reply, add_special_tokens=False)["input_ids"]
        second = first + [{"role": "assistant", "content": A}, {"role": "user", "content": f}]
        nxt = tok(tok.apply_chat_template(second, tokenize=False, add_generation_prompt=True), add_special_tokens=False)["input_ids"]
        lcp = next((i for i, (x, y) in enumerate(zip(held, nxt)) if x != y), min(len(held), len(nxt)))
        print(model, len(held), len(nxt), lcp)
