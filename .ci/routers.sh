#!/usr/bin/env bash
# Install the three real routers that tests/routers/*.py run, once per set of versions, into a
# virtual environment cached outside the repository; prints the environment's directory.
#
#   ai-dynamo-runtime  NVIDIA Dynamo's native runtime: `python -m dynamo.indexer` (the standalone
#                      KV indexer); its Python side needs pydantic and uvloop
#   vllm-router        vllm-project's router (`vllm-router` command)
#   smg                the SGLang model gateway (`smg` command)
#   pyzmq, msgpack     the scripts' own publisher of vLLM KV events
#
# The three router packages resolve together (pip check is clean), so one environment holds them
# all. About 250 MB and a minute the first time, nothing after.
set -euo pipefail
DYNAMO="${KVAUDIT_DYNAMO_VERSION:-1.6.1}"
VLLM_ROUTER="${KVAUDIT_VLLM_ROUTER_VERSION:-0.1.17}"
SMG="${KVAUDIT_SMG_VERSION:-1.13.0}"
CACHE="${KVAUDIT_ROUTERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvaudit-routers}"
VENV="$CACHE/dynamo-$DYNAMO+vllm-router-$VLLM_ROUTER+smg-$SMG"
CHECK='import dynamo.llm, zmq, msgpack, pydantic, uvloop'
# A virtual environment cannot be moved (its scripts name its path), so it is built in place and
# marked complete last; an unmarked one is a broken earlier attempt and is started again.
if [ -f "$VENV/.complete" ] && "$VENV/bin/python" -c "$CHECK" >/dev/null 2>&1 \
    && [ -x "$VENV/bin/vllm-router" ] && [ -x "$VENV/bin/smg" ]; then
    echo "$VENV"
    exit 0
fi
rm -rf "$VENV"
mkdir -p "$CACHE"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    "ai-dynamo-runtime==$DYNAMO" pydantic uvloop \
    "vllm-router==$VLLM_ROUTER" \
    "smg==$SMG" \
    "pyzmq==27.3.0" "msgpack==1.2.4" >&2
"$VENV/bin/python" -m pip check >&2
"$VENV/bin/python" -c "$CHECK" >&2
"$VENV/bin/vllm-router" --help >/dev/null
"$VENV/bin/smg" --help >/dev/null
touch "$VENV/.complete"
echo "$VENV"
