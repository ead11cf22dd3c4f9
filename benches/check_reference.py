#!/usr/bin/env python3
"""The work of `kvaudit check` over several models (built-in probe set) done with transformers,
in one process: load each tokenizer, render each prompt, derive the reply, tokenize, align
(the probe of benches/diff_turns_reference.py, once per model). It does less than the gate (no
date-rollover render, no findings), which favours it."""
import sys

from transformers import AutoTokenizer

from diff_turns_reference import probe_rows

for model in sys.argv[1:]:
    tok = AutoTokenizer.from_pretrained(model)
    for held, nxt, lcp, _ in probe_rows(tok):
        print(model, held, nxt, lcp)
