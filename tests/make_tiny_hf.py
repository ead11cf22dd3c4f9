#!/usr/bin/env python3
"""Write a tiny random-weight Hugging Face model directory for the live vLLM tests.

It carries a reference model's real tokenizer.json, tokenizer_config.json and chat template, so
vLLM renders and tokenizes exactly as it would for the real model, and seeded random weights for
a 2-layer, width-64 model of the same family, so it generates noise quickly on a CPU. The same
seed writes the same weights.

    python make_tiny_hf.py qwen3 ../shared/models/qwen3-8b OUT [--seed 0]
    python make_tiny_hf.py llama ../shared/models/llama-3.1-8b-instruct OUT

Runs in the vLLM environment (.ci/vllm.sh), which has torch and transformers. vLLM's CPU
attention needs a head size it has kernels for: 64 works, 16 does not ("Unsupported CPU
attention configuration"), hence 2 heads of 64 on a width of 64.
"""

import argparse
import json
import os
import shutil
import sys

LAYERS = 2
WIDTH = 64
HEADS = 2
KV_HEADS = 1
HEAD_DIM = 64
FFN = 128
CONTEXT = 4096
FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def vocab_size(model_dir):
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    ids = list(tok["model"]["vocab"].values()) + [t["id"] for t in tok.get("added_tokens", [])]
    # vLLM pads the embedding to a multiple of 64 in any case; writing it so keeps the shapes equal.
    return (max(ids) + 1 + 63) // 64 * 64


def special_id(model_dir, name):
    """The id of the tokenizer_config's `name` token (bos_token, eos_token), or None."""
    with open(os.path.join(model_dir, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    token = config.get(name)
    if isinstance(token, dict):
        token = token.get("content")
    if token is None:
        return None
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    for added in tok.get("added_tokens", []):
        if added["content"] == token:
            return added["id"]
    return tok["model"]["vocab"].get(token)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("family", choices=["qwen3", "llama"])
    parser.add_argument("source", help="a reference model directory (../shared/models/...)")
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

    common = dict(
        vocab_size=vocab_size(args.source),
        hidden_size=WIDTH,
        intermediate_size=FFN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        max_position_embeddings=CONTEXT,
        tie_word_embeddings=True,
        bos_token_id=special_id(args.source, "bos_token"),
        eos_token_id=special_id(args.source, "eos_token"),
    )
    if args.family == "qwen3":
        config, model_class = Qwen3Config(**common), Qwen3ForCausalLM
    else:
        config, model_class = LlamaConfig(**common), LlamaForCausalLM
    config.dtype = "float32"
    torch.manual_seed(args.seed)
    model = model_class(config)

    tmp = args.out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    for name in FILES:
        path = os.path.join(args.source, name)
        if os.path.isfile(path):
            # copyfile, not copy: the reference files are read-only and the copies must not be.
            shutil.copyfile(path, os.path.join(tmp, name))
    shutil.rmtree(args.out, ignore_errors=True)
    os.rename(tmp, args.out)


if __name__ == "__main__":
    sys.exit(main())
