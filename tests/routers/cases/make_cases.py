#!/usr/bin/env python3
"""Write the two-turn cases for http_router.py (long-reply.json, short-reply.json).

The "rendering" is a toy chat template, one token per word: each message is [ROLE] + its words +
[END], and the prompt ends with the generation prompt [ASSISTANT]. Token ids: [USER] 1,
[ASSISTANT] 2, [END] 3; user words w0001.. -> 10001.., reply words r0001.. -> 20001..,
second-turn words u0001.. -> 30001... Every word is 5 characters, so the text smg keys on
(contents joined by one space) has a known length.

Turn 1: a 14-word user message -> 17 tokens (83 characters of text).
Turn 2: turn 1 + the assistant's reply (300 words, or 20) + a 3-word user message
        -> 324 tokens (1901 characters), or 44 tokens (221 characters).
The rendered turn 1 is a prefix of turn 2 (17 tokens, 83 characters); the reply is not credited
by these routers, so the match rate is 17/324 or 17/44 (vllm-router), 83/1901 or 83/221 (smg).
"""
import json
import os

USER, ASSISTANT, END = 1, 2, 3


def words(prefix, n):
    return [f"{prefix}{i:04d}" for i in range(1, n + 1)]


def token(word):
    return {"w": 10000, "r": 20000, "u": 30000}[word[0]] + int(word[1:])


def render(messages):
    ids = []
    for m in messages:
        ids += [USER if m["role"] == "user" else ASSISTANT] + [token(w) for w in m["content"].split()] + [END]
    return ids + [ASSISTANT]


def case(reply_words):
    t1 = [{"role": "user", "content": " ".join(words("w", 14))}]
    t2 = t1 + [
        {"role": "assistant", "content": " ".join(words("r", reply_words))},
        {"role": "user", "content": " ".join(words("u", 3))},
    ]
    return {"turns": [{"messages": m, "prompt_token_ids": render(m)} for m in (t1, t2)]}


here = os.path.dirname(os.path.abspath(__file__))
for name, n in (("long-reply", 300), ("short-reply", 20)):
    with open(os.path.join(here, name + ".json"), "w") as f:
        json.dump(case(n), f)
        f.write("\n")
