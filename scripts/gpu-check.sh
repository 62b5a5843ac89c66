#!/usr/bin/env bash
# The GPU check, one run on a machine with an NVIDIA GPU. It runs the CUDA ops' and the GPU
# forward pass's tests against the CPU, ll3 itself on the GPU (greedy text against the CPU, also
# split with the CPU (-ngl), and with each switch of code no GPU has run yet: LL3_CUDA_GRAPHS,
# LL3_CUDA_Q5Q6, --host-weights pinned; `ll3 serve` under `ll3 bench-serve`, whose streams must
# equal the non-streamed answers, plain and with the switches on), the op benchmark and the
# runner benchmark on the llama3.1-8b shape (pp512, tg128, decode GB/s against the copy and read
# bandwidths, aggregate decode at 1, 8, 32 and 128 sequences, graphs on and off, an -ngl sweep),
# then compute-sanitizer over the op tests, and prints its table last. Every stage has its own time
# limit, and its log goes to $OUT (or build-gpu/) as it runs, so a run cut short still reports.
#
#   scripts/gpu-check.sh --prepare   on the development machine, after scripts/build.sh: copies
#                                    GoogleTest's sources and nlohmann-json's headers, the CUDA
#                                    binaries of build/ (stripped) and the shared mixed-type model
#                                    to .gpu-deps/ (git-ignored, about 50 MB)
#   scripts/gpu-check.sh [TYPES]     on the GPU machine (carry .gpu-deps); TYPES for the runner
#                                    benchmark (default q4_k,q8_0,bf16,f16)
#
# The prepared binaries run as they are when the GPU machine's libraries take them (cudart is
# linked statically, cuBLAS opened at run time); otherwise the script builds the kernels-only
# configuration there (LL3_KERNELS_ONLY: no server or tokenizer, so the ll3 stages skip).
set -uo pipefail
cd "$(dirname "$0")/.."
deps=.gpu-deps
if [ "${1:-}" = "--prepare" ]; then
  set -e
  rm -rf $deps && mkdir -p $deps/json $deps/bin $deps/models && cp -r /usr/src/googletest $deps/ &&
    cp -r /usr/include/nlohmann $deps/json/
  for f in build/tests/test_cuda build/ll3-cuda-bench build/ll3-cuda-runner-bench build/ll3; do
    [ -x "$f" ] && strip -o "$deps/bin/$(basename "$f")" "$f"
  done
  tar czf $deps/bin.tgz -C $deps bin && rm -r $deps/bin  # a third of the size: the carry limit is 64 MiB
  shared=${LL3_SHARED:-../shared}
  cp "$shared/models/small-llama32-mixed.gguf" $deps/models/
  python3 -c "import json,sys; sys.stdout.write(json.load(open('$shared/models/golden/small-llama32-mixed/P3.json'))['text'])" \
    > $deps/models/P3.txt
  grep -qx "/$deps/" .git/info/exclude 2>/dev/null || echo "/$deps/" >> .git/info/exclude
  echo "gpu-check: $deps ready ($(du -sh $deps | cut -f1)); carry $deps"
  exit 0
fi
logs=${OUT:-build-gpu}
mkdir -p "$logs"
summary=()
stage() {  # stage NAME SECONDS COMMAND...: runs it with a time limit, log in $logs/NAME.log
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  summary+=("| $name | $rc$([ $rc = 124 ] && echo ' (time limit)') | $((SECONDS - t0)) s |")
  return $rc
}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader || true

mkdir -p build-gpu/prepared && tar xzf $deps/bin.tgz -C build-gpu/prepared 2> /dev/null
bin=build-gpu/prepared/bin
if ! "$bin/test_cuda" --gtest_list_tests > /dev/null 2>&1; then
  echo "gpu-check: the prepared binaries do not run here; building the kernels-only configuration"
  ldd "$bin/test_cuda" 2>&1 | grep -i "not found"
  generator=()
  command -v ninja > /dev/null && generator=(-G Ninja)
  stage configure 120 cmake -S . -B build-gpu "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DLL3_KERNELS_ONLY=ON \
    -DLL3_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLL3_GTEST_SOURCE="$PWD/$deps/googletest" \
    -DLL3_JSON_INCLUDE="$PWD/$deps/json" || { tail -30 "$logs/configure.log"; exit 1; }
  stage build 400 cmake --build build-gpu -j"$(nproc)" || { grep -E "error" -A3 "$logs/build.log" | head -60; exit 1; }
  bin=build-gpu
  cp build-gpu/tests/test_cuda build-gpu/ 2> /dev/null
fi
"$bin/ll3" --version 2> /dev/null | tail -1

stage tests 150 "$bin/test_cuda"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|Expected|Which is|error" "$logs/tests.log" | head -60

model=$deps/models/small-llama32-mixed.gguf
if [ -x "$bin/ll3" ] && [ -f "$model" ]; then
  # Greedy text of the P3 prompt on the GPU and on the CPU with float activations (the GPU's
  # arithmetic is float: F16 weights for the types it has no kernel for, F32 accumulation).
  # And split: the first layer on the CPU, the others on the GPU (-ngl 1 below the count); the
  # GPU with CUDA graphs and with the first layer's weights in pinned host memory, whose text
  # must be the GPU's byte for byte; Q5_K and Q6_K read in place by the tensor cores (LL3_CUDA_Q5Q6).
  below=$(($("$bin/ll3" run -m "$model" -p x -n 1 -ngl 0 2>&1 | sed -n 's/.*: \([0-9]*\) layers.*/\1/p' | head -1) - 1))
  for where in gpu cpu split graphs pinned q5k; do
    flags=(-ngl -1)
    [ $where = cpu ] && flags=(-ngl 0 --float-act)
    [ $where = split ] && flags=(-ngl "$below" --float-act)
    [ $where = pinned ] && flags=(-ngl "$below" --host-weights pinned)
    LL3_CUDA_GRAPHS=$([ $where = graphs ] && echo 1 || echo 0) LL3_CUDA_Q5Q6=$([ $where = q5k ] && echo 1 || echo 0) \
      stage "run-$where" 60 "$bin/ll3" run -m "$model" -f $deps/models/P3.txt --temp 0 -n 48 --ignore-eos "${flags[@]}"
  done
  grep -E "^ll3: (running|prompt|loaded)|CUDA graph|do not read" "$logs"/run-{gpu,split,graphs,pinned,q5k}.log
  python3 - "$logs"/run-{cpu,gpu,split,graphs,pinned,q5k}.log << 'EOF'
import sys
body = lambda f: b''.join(l for l in open(f, 'rb').read().splitlines(True) if not l.startswith(b'll3:'))
def agree(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
cpu, gpu, split, graphs, pinned, q5k = (body(f) for f in sys.argv[1:7])
for name, a in (('GPU', gpu), ('GPU + CPU split', split), ('GPU with Q5_K / Q6_K in place', q5k)):
    print(f"run: {name} and CPU (float activations) greedy text agree on {agree(a, cpu)} of {len(cpu)} bytes")
for name, a in (('with CUDA graphs', graphs), ('with pinned host weights', pinned)):
    print(f"run: GPU {name} and plain agree on {agree(a, gpu)} of {len(gpu)} bytes" + ("" if a == gpu else "  <-- MISMATCH"))
EOF
  # ll3 serve under bench-serve (every stream must equal its non-streamed answer), then again
  # with the GPU code not yet verified switched on (graphs pad steps: still no stream may differ).
  serve_bench() {  # NAME CLIENTS SECONDS [VAR=1 ...]
    local name=$1 clients=$2 seconds=$3 port=18089
    shift 3
    env "$@" "$bin/ll3" serve -m "$model" --port $port --max-seqs 128 > "$logs/$name-server.log" 2>&1 &
    local server=$!
    ready() {  # GET /health answers 200 once the model is loaded (curl may be missing there)
      exec 3<> "/dev/tcp/127.0.0.1/$port" && printf 'GET /health HTTP/1.0\r\n\r\n' >&3 && head -1 <&3 | grep -q " 200"
    }
    for _ in $(seq 120); do (ready) 2> /dev/null && break; sleep 0.5; done
    stage "$name" $((seconds + 80)) "$bin/ll3" bench-serve --url "http://127.0.0.1:$port" --clients "$clients" --requests 2 \
      --max-tokens 32 --duration "$seconds"
    cat "$logs/$name.log"
    kill $server 2> /dev/null
    wait $server 2> /dev/null
    grep -E "running on|not on the GPU|CUDA graph" "$logs/$name-server.log"
  }
  serve_bench bench-serve 1,16,64,128 30
  serve_bench bench-serve-next 1,16,64 20 LL3_CUDA_GRAPHS=1 LL3_CUDA_Q5Q6=1 LL3_CUDA_SPLIT_ATTN=1
fi

stage op-bench 90 "$bin/ll3-cuda-bench"
stage runner-bench 200 "$bin/ll3-cuda-runner-bench" /tmp "${1:-q4_k,q8_0,bf16,f16}"
if command -v compute-sanitizer > /dev/null; then
  stage memcheck 100 compute-sanitizer --tool memcheck --error-exitcode 3 "$bin/test_cuda" --gtest_filter='CudaOps.*'
  tail -5 "$logs/memcheck.log"
fi

echo
cat "$logs/op-bench.log"
cat "$logs/runner-bench.log"
echo
echo "| stage | exit | time |"
echo "|---|---|---|"
printf '%s\n' "${summary[@]}"
