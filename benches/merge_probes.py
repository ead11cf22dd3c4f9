#!/usr/bin/env python3
"""How many probes a hit in the prepared merge table takes, with the slot taken from the
product's top bits (prepared::table_slot, format v05) and from bits 17 up (v04).

    python3 benches/merge_probes.py [MODEL_DIR ...]   (default: ../shared/models/qwen3-8b)

The table is laid out as prepare() lays it (merge keys left id << 32 | right id, 2x the
merges rounded up to a power of two, linear probing); the mean is over all merges.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
M64 = (1 << 64) - 1
PHI = 0x9E3779B97F4A7C15


def mean_probes(keys, slot):
    size = max(16, 1 << (2 * len(keys) - 1).bit_length())
    mask = size - 1
    table = [False] * size
    probes = 0
    for k in keys:
        at, n = slot(k, mask), 1
        while table[at]:
            at, n = (at + 1) & mask, n + 1
        table[at] = True
        probes += n
    return size, probes / len(keys)


def main():
    dirs = sys.argv[1:] or [os.path.join(HERE, "..", "..", "shared", "models", "qwen3-8b")]
    top = lambda k, mask: ((k * PHI) & M64) >> (64 - mask.bit_length())
    mid = lambda k, mask: (((k * PHI) & M64) >> 17) & mask
    for d in dirs:
        model = json.load(open(os.path.join(d, "tokenizer.json"), encoding="utf-8"))["model"]
        vocab = model["vocab"]
        keys = []
        for m in model["merges"]:
            a, b = m if isinstance(m, list) else m.split(" ", 1)
            keys.append(vocab[a] << 32 | vocab[b])
        keys = list(dict.fromkeys(keys))
        size, new = mean_probes(keys, top)
        _, old = mean_probes(keys, mid)
        print(f"{os.path.basename(os.path.normpath(d))}: {len(keys)} merges, {size} slots; "
              f"mean probes per hit: top bits (v05) {new:.2f}, bits 17 up (v04) {old:.2f}")


if __name__ == "__main__":
    main()
