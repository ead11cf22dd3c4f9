#!/usr/bin/env python3
"""How many probes a lookup in the prepared merge table takes, with the slot taken from the
product's top bits (prepared::table_slot, format v05) and from bits 17 up (v04), at the table
sizes of format v06 (2x the merges rounded up to a power of two) and v07 (1.5x).

    python3 benches/merge_probes.py [MODEL_DIR ...]   (default: ../shared/models/qwen3-8b)

The table is laid out as prepare() lays it (merge keys left id << 32 | right id, linear
probing, 16-byte slots: four to a 64-byte cache line). A hit is averaged over all merges; a
miss (a pair that does not merge, which most lookups of a word's pairs are) over 200,000
pairs of random ids, with the cache lines it reads.
"""
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
M64 = (1 << 64) - 1
PHI = 0x9E3779B97F4A7C15


def layout(keys, slot, factor):
    size = max(16, 1 << (int(len(keys) * factor) - 1).bit_length())
    mask = size - 1
    table = [False] * size
    probes = 0
    for k in keys:
        at, n = slot(k, mask), 1
        while table[at]:
            at, n = (at + 1) & mask, n + 1
        table[at] = True
        probes += n
    return table, size, probes / len(keys)


def misses(table, slot, n_ids, rng):
    mask = len(table) - 1
    probes = lines = 0
    for _ in range(200_000):
        at = slot(rng.randrange(n_ids) << 32 | rng.randrange(n_ids), mask)
        first, n = at, 1
        while table[at]:
            at, n = (at + 1) & mask, n + 1
        probes += n
        lines += (first % 4 + n - 1) // 4 + 1
    return probes / 200_000, lines / 200_000


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
        name = os.path.basename(os.path.normpath(d))
        _, size, old = layout(keys, mid, 2)
        print(f"{name}: {len(keys)} merges; bits 17 up (v04), {size} slots: {old:.2f} probes per hit")
        for version, factor in (("v06", 2), ("v07", 1.5)):
            table, size, hit = layout(keys, top, factor)
            miss, lines = misses(table, top, len(vocab), random.Random(1))
            print(f"  top bits, {version}: {size} slots ({size * 16 >> 20} MiB), "
                  f"{len(keys) / size:.2f} full: {hit:.2f} probes per hit, "
                  f"{miss:.2f} per miss ({lines:.2f} cache lines)")


if __name__ == "__main__":
    main()
