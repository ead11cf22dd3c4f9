#!/usr/bin/env python3
"""Write a tiny GGUF carrying a real model's tokenizer, for the live llama-server tests.

By default a qwen3-architecture model with Qwen3-8B's real tokenizer (tokenizer.json: 151,669
tokens, byte-level BPE, the `qwen2` pre-tokenizer) and chat template (tokenizer_config.json),
so llama-server tokenizes and templates exactly as it would for the real model, and seeded
random weights for a 2-layer, width-64 model, so it generates noise quickly on a CPU (about
84 MB, loads in under a second). The same seed writes the same file.

    python3 tests/make_tiny_gguf.py ../shared/models/qwen3-8b OUT.gguf [--seed 0]

--vocab-only leaves the tensors out (the tokenizer and templates are all kvaudit reads of a
GGUF); --all-templates writes a model's named templates too.

Another reference model's tokenizer goes into a llama-architecture model, with the
pre-tokenizer name llama.cpp's converter gives that tokenizer (llama.cpp picks its split
regex by that name):

    python3 tests/make_tiny_gguf.py ../shared/models/llama-3.1-8b-instruct OUT.gguf \
        --arch llama --pre llama-bpe
"""

import argparse
import json
import os
import sys

import numpy as np

try:
    import gguf
except ImportError:  # pragma: no cover - said plainly to whoever runs it without the package
    sys.exit("make_tiny_gguf.py needs the `gguf` package (pip install -r tests/requirements.txt)")

LAYERS = 2
WIDTH = 64
HEADS = 4
KV_HEADS = 2
HEAD_DIM = WIDTH // HEADS
FFN = 128
CONTEXT = 4096


def tokenizer_fields(model_dir):
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    with open(os.path.join(model_dir, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    if tok["model"]["type"] != "BPE":
        sys.exit("expected a BPE tokenizer.json")
    vocab = dict(tok["model"]["vocab"])
    special = {}
    for added in tok.get("added_tokens", []):
        vocab[added["content"]] = added["id"]
        special[added["id"]] = added["special"]
    size = max(vocab.values()) + 1
    tokens = [None] * size
    for text, i in vocab.items():
        tokens[i] = text
    missing = [i for i, t in enumerate(tokens) if t is None]
    if missing:
        sys.exit(f"token ids without a token: {missing[:5]}")
    # llama.cpp's types: 1 normal, 3 control (special added tokens), 4 user-defined (the
    # non-special added tokens, such as <think>, matched in text like transformers does).
    types = [
        3 if special.get(i) else 4 if i in special else 1
        for i in range(size)
    ]
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    ids = {t: i for i, t in enumerate(tokens)}
    return tokens, types, merges, ids, config


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chat-template-file", help="embed this template instead of the model's")
    ap.add_argument("--arch", choices=["qwen3", "llama"], default="qwen3")
    ap.add_argument("--pre", default="qwen2", help="tokenizer.ggml.pre (llama.cpp's split)")
    ap.add_argument("--vocab-only", action="store_true",
                    help="the tokenizer and templates only, no tensors (what kvaudit reads)")
    ap.add_argument("--all-templates", action="store_true",
                    help="named templates too (tokenizer.chat_template.NAME), not the default only")
    args = ap.parse_args()

    tokens, types, merges, ids, config = tokenizer_fields(args.model_dir)
    template = config.get("chat_template")
    jinja = os.path.join(args.model_dir, "chat_template.jinja")
    if template is None and os.path.isfile(jinja):
        args.chat_template_file = args.chat_template_file or jinja
    if args.chat_template_file:
        with open(args.chat_template_file, encoding="utf-8") as f:
            template = f.read()

    tmp = args.out + ".part"
    w = gguf.GGUFWriter(tmp, args.arch)
    w.add_name(f"kvaudit-tiny-{args.arch}")
    w.add_context_length(CONTEXT)
    w.add_embedding_length(WIDTH)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)

    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(args.pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    def token_text(value):
        # tokenizer_config.json spells a special token as text or as an AddedToken object.
        return value.get("content") if isinstance(value, dict) else value

    eos = ids[token_text(config["eos_token"])]
    w.add_eos_token_id(eos)
    w.add_eot_token_id(eos)
    if token_text(config.get("pad_token")) in ids:
        w.add_pad_token_id(ids[token_text(config["pad_token"])])
    bos = token_text(config.get("bos_token"))
    if bos in ids:
        w.add_bos_token_id(ids[bos])
    elif "<|endoftext|>" in ids:
        # Qwen3 has no BOS; llama.cpp's qwen2 vocabulary would otherwise add <|endoftext|>.
        w.add_bos_token_id(ids["<|endoftext|>"])
    w.add_add_bos_token(bool(config.get("add_bos_token", False)))
    if isinstance(template, list) and not args.all_templates:
        # Named templates: the default one is the model's chat template.
        template = {t["name"]: t["template"] for t in template}.get("default", "")
    if template:
        w.add_chat_template(template)
    if args.vocab_only:
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.close()
        os.replace(tmp, args.out)
        return

    rng = np.random.default_rng(args.seed)

    def tensor(name, *shape, scale=0.02):
        # gguf takes numpy's row-major shape (ne reversed).
        w.add_tensor(name, (rng.standard_normal(shape) * scale).astype(np.float32))

    def ones(name, n):
        w.add_tensor(name, np.ones(n, dtype=np.float32))

    vocab = len(tokens)
    tensor("token_embd.weight", vocab, WIDTH)
    for b in range(LAYERS):
        p = f"blk.{b}."
        ones(p + "attn_norm.weight", WIDTH)
        tensor(p + "attn_q.weight", HEADS * HEAD_DIM, WIDTH)
        tensor(p + "attn_k.weight", KV_HEADS * HEAD_DIM, WIDTH)
        tensor(p + "attn_v.weight", KV_HEADS * HEAD_DIM, WIDTH)
        tensor(p + "attn_output.weight", WIDTH, HEADS * HEAD_DIM)
        if args.arch == "qwen3":
            ones(p + "attn_q_norm.weight", HEAD_DIM)
            ones(p + "attn_k_norm.weight", HEAD_DIM)
        ones(p + "ffn_norm.weight", WIDTH)
        tensor(p + "ffn_gate.weight", FFN, WIDTH)
        tensor(p + "ffn_up.weight", FFN, WIDTH)
        tensor(p + "ffn_down.weight", WIDTH, FFN)
    ones("output_norm.weight", WIDTH)
    tensor("output.weight", vocab, WIDTH, scale=1.0)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
