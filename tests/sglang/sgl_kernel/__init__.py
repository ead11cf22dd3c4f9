"""kvaudit's stand-in for `sgl_kernel` in the live SGLang tests (tests/sglang_live.rs).

PyPI's `sglang-kernel` is a CUDA build and no CPU build of `sgl_kernel` is published. With
SGLANG_USE_CPU_ENGINE=1, SGLang's start-up imports two CPU ops from it; on the
`--attention-backend torch_native` path the tests use, neither is called. This module gives
those names so start-up succeeds, and records every call in the file KVAUDIT_SGL_KERNEL_LOG
names: the tests assert that file stays empty, so every step of every request ran SGLang's own
code. Any other name is a function that raises when called.
"""

import os

import torch


def _called(name):
    log = os.environ.get("KVAUDIT_SGL_KERNEL_LOG")
    if log:
        with open(log, "a") as f:
            f.write(name + "\n")


def assign_req_to_token_pool_cpu(
    req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc, row_len
):
    """Request i's slots [start, end) are the next end - start entries of out_cache_loc."""
    _called("assign_req_to_token_pool_cpu")
    at = 0
    for i in range(req_pool_indices.numel()):
        start, end = int(start_offset[i]), int(end_offset[i])
        req_to_token[int(req_pool_indices[i]), start:end] = out_cache_loc[at : at + end - start]
        at += end - start


def copy_all_layer_kv_cache_cpu(data_ptrs, strides, tgt_loc, src_loc):
    _called("copy_all_layer_kv_cache_cpu")
    raise NotImplementedError("kvaudit's sgl_kernel stand-in does not copy KV")


def __getattr__(name):
    if name.startswith("_"):
        raise AttributeError(name)

    def missing(*args, **kwargs):
        _called(name)
        raise NotImplementedError(f"kvaudit's sgl_kernel stand-in has no {name}")

    return missing


# Unused import kept for parity with the real module's import-time torch dependency.
_ = torch
