// What test/sandbox-attacks.test.ts runs inside a sandbox: an agent that tries every way out of its rollout it can
// spell, one that plants start-up hooks for the grader's runtimes, and the verifier that would run them.

/** HTTP statuses (and curl's 000: no answer, the connection refused or reset) that count as refused. */
export const REFUSED = new Set(["000", "400", "401", "403", "404", "405"]);

/**
 * The agent: every target below in every spelling of a path that leaves /r/{own id}/, plus direct routes, upstream
 * admin routes and the gateway's other ports. Prints `probe NAME CODE` per try, one legitimate call
 * (`legit CODE`), and `probes N` at the end so that a cut log is noticed. Reads VICTIM (another rollout's id) and
 * GATEWAY_PORT (the gateway's port on the host) from its environment; ATTACK_ORIGIN and ATTACK_HTTP_ONLY run its
 * HTTP tries from outside a sandbox, straight at a gateway.
 */
export const ATTACK_AGENT = String.raw`
P=${"${"}ATTACK_ORIGIN:-http://127.0.0.1:8700}
I=$RLGATE_ROLLOUT_ID
V=$VICTIM
n=0
FINISH='{"reward":1,"status":"ok"}'
CREATE='{"group":"fix-add","task":"fix-add","harness":"forged"}'
CHAT='{"model":"Qwen/Qwen3-8B","messages":[{"role":"user","content":"hi"}],"max_tokens":4}'
LORA='{"lora_name":"x","lora_path":"/tmp/x"}'
# probe NAME METHOD BODY PATH [curl options…]
probe() {
  local name=$1 method=$2 body=$3 path=$4; shift 4
  local data=()
  [ -n "$body" ] && data=(-H 'content-type: application/json' --data-binary "$body")
  code=$(curl -s --path-as-is --max-time 5 -o /dev/null -w '%{http_code}' -X "$method" "${"${"}data[@]}" "$@" "$P$path" 2>/dev/null)
  echo "probe $name ${"${"}code:-000}"
  n=$((n + 1))
}
# Every spelling of a path two segments above /r/{id}/, then TARGET.
spellings() {
  local t=$1
  echo "dotdot /r/$I/../../$t"
  echo "v1-dotdot /r/$I/v1/../../../$t"
  echo "pct /r/$I/%2e%2e/%2e%2e/$t"
  echo "pct-upper /r/$I/%2E%2e/%2e%2E/$t"
  echo "pct-half /r/$I/.%2e/%2e./$t"
  echo "enc-slash /r/$I/..%2f..%2f${"${"}t//\//%2f}"
  echo "enc-slash-upper /r/$I/..%2F..%2F${"${"}t//\//%2F}"
  echo "enc-backslash /r/$I/..%5c..%5c${"${"}t//\//%5c}"
  echo "backslash /r/$I/..\\..\\${"${"}t//\//\\}"
  echo "double-slash /r/$I//../../$t"
  echo "leading-double-slash //r/$I/../../$t"
  echo "double-pct /r/$I/%252e%252e/%252e%252e/$t"
  echo "dot /r/$I/./../../$t"
  echo "semicolon /r/$I/..;/..;/$t"
  echo "nul /r/$I/%00/../../$t"
  echo "overlong-utf8 /r/$I/%c0%ae%c0%ae/%c0%ae%c0%ae/$t"
  echo "fullwidth /r/$I/%ef%bc%8e%ef%bc%8e/%ef%bc%8e%ef%bc%8e/$t"
  echo "direct /$t"
  echo "under-prefix /r/$I/$t"
}
# target NAME METHOD BODY PATH: every spelling, and the absolute form of the request target.
target() {
  local name=$1 method=$2 body=$3 t=$4
  while read -r how path; do probe "$name:$how" "$method" "$body" "$path"; done < <(spellings "$t")
  probe "$name:absolute-form" "$method" "$body" / --request-target "http://127.0.0.1:8700/$t"
  probe "$name:absolute-form-prefixed" "$method" "$body" / --request-target "http://127.0.0.1:8700/r/$I/../../$t"
}
echo "legit $(curl -s -o /dev/null -w '%{http_code}' -H 'content-type: application/json' --data-binary "$CHAT" "$P/r/$I/v1/chat/completions")"
target finish-own POST "$FINISH" "api/rollouts/$I/finish"
target finish-other POST "$FINISH" "api/rollouts/$V/finish"
target create POST "$CREATE" "api/rollouts"
target list GET "" "api/rollouts"
target read-other GET "" "api/rollouts/$V"
target calls-other GET "" "api/rollouts/$V/calls"
target events GET "" "api/events"
target metrics GET "" "metrics"
target ui GET "" "ui"
target chat-other POST "$CHAT" "r/$V/v1/chat/completions"
target lora-own POST "$LORA" "r/$I/v1/load_lora_adapter"
# Its own route naming another rollout in a header: the bridge drops the header, the call is its own.
echo "legit-header $(curl -s -o /dev/null -w '%{http_code}' -H 'content-type: application/json' -H "x-rlgate-rollout: $V" --data-binary "$CHAT" "$P/r/$I/v1/chat/completions")"
probe header-other-root POST "$CHAT" "/v1/chat/completions" -H "x-rlgate-rollout: $V"
for route in v1/load_lora_adapter v1/unload_lora_adapter sleep wake_up reset_prefix_cache collective_rpc start_profile pause resume update_weights; do
  probe "admin:$route" POST "$LORA" "/r/$I/$route"
  probe "admin-dot:$route" POST "$LORA" "/r/$I/v1/../$route"
done
probe grpc-h2c POST "" "/rlgate.v1.TrajectoryService/StreamTrajectories" --http2-prior-knowledge -H 'content-type: application/grpc'
probe grpc-h2c-prefixed POST "" "/r/$I/rlgate.v1.TrajectoryService/StreamTrajectories" --http2-prior-knowledge -H 'content-type: application/grpc'
[ -n "$ATTACK_HTTP_ONLY" ] && { echo "probes $n"; exit 0; }
for port in $GATEWAY_PORT $GRPC_PORT; do
  if timeout 3 bash -c "echo > /dev/tcp/127.0.0.1/$port" 2>/dev/null; then echo "probe tcp:$port 200"; else echo "probe tcp:$port 000"; fi
  n=$((n + 1))
done
for f in /rlgate /rlgate/tests /rlgate/image /run/rlgate/result; do
  if [ -e "$f" ]; then echo "probe file:$f 200"; else echo "probe file:$f 000"; fi
  n=$((n + 1))
done
# What it was given: its environment, and every file in its home.
env | sed 's/^/env /'
find "$HOME" -type f -exec cat {} + 2>/dev/null | sed 's/^/home-file /'
echo "probes $n"
`;

/** A start-up hook's body for each runtime: it says it ran, then ends its process with success. */
const PY_HOOK = `import os, sys; sys.stdout.write("HOOK RAN " + __name__ + "\\n"); sys.stdout.flush(); os._exit(0)`;

/**
 * The agent that plants hooks: in its HOME (the grader's HOME used to be /tmp: there too), in the workspace, in git's
 * config. It leaves calc.py unfixed (reward 0) and shows each hook live in its own sandbox (`agent-…` lines).
 */
export const HOOK_AGENT = String.raw`
hook='${PY_HOOK}'
for home in "$HOME" /tmp; do
  site=$(HOME=$home python3 -c 'import site; print(site.getusersitepackages())')
  mkdir -p "$site" && echo "$hook" > "$site/usercustomize.py"
  for rc in .bashrc .profile .bash_profile; do echo 'echo HOOK RAN shell rc; exit 0' > "$home/$rc"; done
  printf 'rlgate-hook=planted\nnode-options=--require /workspace/hook.js\n' > "$home/.npmrc"
done
echo "$hook" > sitecustomize.py
echo "$hook" > usercustomize.py
mkdir -p sub/sitecustomize && echo "$hook" > sub/sitecustomize/__init__.py
echo "import os; print('HOOK RAN pth'); os._exit(0)" > hook.pth
printf 'import os\nprint("HOOK RAN conftest")\nos._exit(0)\n' > conftest.py
printf '[pytest]\naddopts = -p hookplugin\n' > pytest.ini
echo "$hook" > hookplugin.py
for rc in .bashrc .profile .bash_profile .envrc; do echo 'echo HOOK RAN shell rc; exit 0' > "$rc"; done
printf 'rlgate-hook=planted\nnode-options=--require /workspace/hook.js\n' > .npmrc
echo 'console.log("HOOK RAN node"); process.exit(0)' > hook.js
git config core.fsmonitor 'echo HOOK RAN git-fsmonitor >&2; false'
printf '#!/bin/sh\necho HOOK RAN git-hook\n' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout
mkdir -p tests && echo "$hook" > tests/sitecustomize.py
# Live here: each runtime runs what was planted (a hook that exits 0 turns a failure into a pass).
python3 -c 'raise SystemExit(3)'; echo "agent-python=$?"
PYTHONPATH=. python3 -S -c 'import sitecustomize' >/dev/null; echo "agent-workspace-site=$?"
bash -lc 'exit 3' >/dev/null; echo "agent-login-shell=$?"
echo "agent-npmrc=$(npm config get rlgate-hook 2>/dev/null)"
git status --short >/dev/null 2>/tmp/git.err; grep -q 'HOOK RAN git-fsmonitor' /tmp/git.err && echo "agent-git-fsmonitor=ran"
# A folder searchable but not listable hides its files from a search, not from npm opening its .npmrc by name.
mkdir -p sub && echo '{}' > sub/package.json && echo 'rlgate-hook=planted' > sub/.npmrc && chmod 0311 sub
echo "agent-npmrc-hidden=$(cd sub && npm config get rlgate-hook 2>/dev/null)"
`;

/**
 * A verifier that passes (exit 0) when any runtime's run passes — each would fail on its own while calc.py is not
 * fixed — so that one hook that ran is a forged reward. It prints what it started from: HOME and /tmp (empty), the
 * variables a runtime reads at start-up (none), what npm read from rc files.
 */
export const HOOK_VERIFIER = String.raw`
echo "home=$(ls -A "$HOME" | wc -l) tmp=$(ls -A /tmp | wc -l)"
env | grep -E '^(PYTHON[A-Z]*|NODE_OPTIONS|NODE_PATH|BASH_ENV|ENV|LD_[A-Z_]*|GIT_[A-Z_]*)=' | sed 's/^/startup-env /'
PYTHONPATH=. python3 tests/test_add.py; py=$?
if python3 -c 'import pytest' 2>/dev/null; then python3 -m pytest -q -p no:cacheprovider tests/test_add.py; pt=$?; else pt=absent; fi
bash -lc 'exit 1'; sh=$?
node -e 'process.exit(1)'; nd=$?
npmrc=$(npm config get rlgate-hook 2>/dev/null)
hidden=$(cd sub 2>/dev/null && npm config get rlgate-hook 2>/dev/null)
git status --short >/dev/null
echo "verifier python=$py pytest=$pt login-shell=$sh node=$nd npmrc=$npmrc npmrc-hidden=$hidden"
[ $py = 0 ] || [ "$pt" = 0 ] || [ $sh = 0 ] || [ $nd = 0 ]
`;
