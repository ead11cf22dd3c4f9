#!/usr/bin/env bash
# Install SGLang for the live SGLang tests (tests/sglang_live.rs), once per version, into a
# virtual environment cached outside the repository: prints the environment's directory.
#
# SGLang on PyPI is built for CUDA and pins GPU-only packages; its CPU path needs none of them.
# So: PyPI's torch (it runs on the CPU), sglang without dependencies, then sglang's own
# requirements minus the GPU-only ones, and torchvision pinned to that torch (start-up imports
# it). The two CPU ops start-up imports from `sgl_kernel` (no CPU build is published) come from a
# small module of the tests' own (tests/sglang/sgl_kernel), put on PYTHONPATH by the tests, not
# installed here. About 6 minutes and 7 GB the first time, nothing after.
set -euo pipefail
VERSION="${KVAUDIT_SGLANG_VERSION:-0.5.23}"
TORCH="${KVAUDIT_SGLANG_TORCH_VERSION:-2.14.1}"
CACHE="${KVAUDIT_SGLANG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvaudit-sglang}"
VENV="$CACHE/$VERSION"
# Built in place and marked complete last (a virtual environment cannot be moved); an unmarked
# one is a broken earlier attempt and is started again.
if [ -f "$VENV/.complete" ] && "$VENV/bin/python" -c "import sglang" >/dev/null 2>&1; then
    echo "$VENV"
    exit 0
fi
rm -rf "$VENV"
mkdir -p "$CACHE"
python3 -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
"${PIP[@]}" "torch==$TORCH" >&2
TORCHVISION="$("$VENV/bin/python" - "$TORCH" <<'PY'
import sys
# torchvision's minor follows torch's: 2.N pairs with 0.(N+15).
major, minor = sys.argv[1].split(".")[:2]
print(f"0.{int(minor) + 15}.*")
PY
)"
"${PIP[@]}" "torch==$TORCH" "torchvision==$TORCHVISION" >&2
"${PIP[@]}" --no-deps "sglang==$VERSION" >&2
"$VENV/bin/python" - "$VENV/requirements.txt" <<'PY'
import sys
from importlib.metadata import distribution

# Installed above, or built for CUDA only (their import or their ops need libcuda).
SKIP = {
    "torch", "torchvision", "torchaudio", "torchcodec", "timm",
    "sglang-kernel", "flashinfer-python", "flash-attn-4", "sgl-deep-ep", "sgl-deep-gemm",
    "sgl-flash-mla", "tilelang", "quack-kernels", "humming-kernels", "nvidia-cutlass-dsl",
    "nvidia-mathdx", "nvshmem4py-cu13", "cuda-python", "torch-memory-saver",
}
keep = []
for req in distribution("sglang").requires or []:
    if "extra ==" in req:
        continue
    name = req.split(";")[0].strip()
    for sep in "<>=!~[ ":
        name = name.split(sep)[0]
    if name.lower().replace("_", "-") not in SKIP:
        keep.append(req)
open(sys.argv[1], "w").write("\n".join(keep) + "\n")
PY
"${PIP[@]}" "torch==$TORCH" -r "$VENV/requirements.txt" >&2
"$VENV/bin/python" -c "import sglang" >&2
touch "$VENV/.complete"
echo "$VENV"
