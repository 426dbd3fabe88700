#!/usr/bin/env bash
# Browser end-to-end test of dsh-prompt-rewind against the real `dsh web` (DSH CLI 0.1.0-rc.8),
# driven in headless Debian Chromium through playwright-core, with a scripted model.
# Installs what it needs on a fresh machine (idempotent), runs the client unit tests, then
# tests/web/e2e.mjs with Node 24 in two scenarios (full, and degraded DSH client plugins).
#   scripts/test-web.sh            exit 0 = every assertion passed
# Environment:
#   DSH_WEB_TGZ     use this packed plugin tarball instead of running `npm pack` at the repo root
#   DSH_WEB_REUSE_BUILD=1  rebuild only lib/client.js and pack the lib/index.js + native/ addon already
#                   built (npm pack --ignore-scripts); the default `npm pack` runs the full package build
#   DSH_WEB_RUN     run directory (default: a fresh temp dir, removed when every scenario passed);
#                   keeps DSH_HOME, workspace, logs (its home/ and ws/ are emptied at the start of a run)
#   DSH_WEB_SHOTS   screenshot directory (default: artifacts/web)
#   CHROMIUM        browser binary (default: chromium on PATH, installed with apt-get when missing)
#   DSH_WEB_SCENARIOS  which scenarios to run (default: "full degraded crash git"; e.g. "git" alone)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WEB="$ROOT/tests/web"
RUN=${DSH_WEB_RUN:-$(mktemp -d -t dsh-rewind-web-XXXXXX)}
OWN_RUN=0; [ -n "${DSH_WEB_RUN:-}" ] || OWN_RUN=1
SHOTS=${DSH_WEB_SHOTS:-$ROOT/artifacts/web}
say() { printf '[test-web] %s\n' "$*"; }
mkdir -p "$RUN" "$SHOTS"

# 1. Node 24 (DSH needs it); scripts/setup-node.sh prints its path last.
NODE=$("$ROOT/scripts/setup-node.sh" | tail -n1)
say "node $("$NODE" --version)"

# 1b. The browser half's unit tests (typecheck, pure modules under node --test), before anything heavier.
(cd "$ROOT/client" && { [ -d node_modules/esbuild ] || npm ci --no-audit --no-fund --loglevel=error; } && PATH="$(dirname "$NODE"):$PATH" npm test --silent) >"$RUN/client-unit.log" 2>&1 \
  || { cat "$RUN/client-unit.log"; say "client unit tests failed"; exit 1; }
say "client unit tests: $(grep -E '^(ℹ|#) (pass|fail) ' "$RUN/client-unit.log" | tr '\n' ' ')"

# 2. Chromium from Debian.
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
APT_UPDATED=0
apt_install() {
  if [ "$APT_UPDATED" = 0 ]; then $SUDO apt-get update -qq >/dev/null; APT_UPDATED=1; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}
CHROMIUM=${CHROMIUM:-$(command -v chromium || true)}
if [ -z "$CHROMIUM" ] || [ ! -x "$CHROMIUM" ]; then
  say "installing chromium (apt-get)"
  apt_install chromium
  CHROMIUM=$(command -v chromium)
fi
export CHROMIUM
# CJK fonts, so the zh-CN / ja screenshots are readable (the assertions read the DOM, not pixels).
if command -v fc-list >/dev/null && ! fc-list 2>/dev/null | grep -i 'Noto Sans CJK' >/dev/null; then
  say "installing fonts-noto-cjk (apt-get)"
  apt_install fonts-noto-cjk || say "fonts-noto-cjk not installed; CJK screenshots will show boxes"
fi
say "browser $("$CHROMIUM" --version 2>/dev/null | head -1)"

# 3. The DSH CLI 0.1.0-rc.8 with the HMR guard applied by pnpm patchedDependencies
#    (scripts/setup-dsh-cli.sh prints a wrapper running it under Node 24 with a pnpm >= 10 shim on PATH).
DSH=$("$ROOT/scripts/setup-dsh-cli.sh" | tail -n1)
[ -x "$DSH" ] || { say "scripts/setup-dsh-cli.sh did not print an executable ($DSH)"; exit 1; }
dsh() { "$DSH" "$@"; }
say "dsh $(dsh --version)"

# 4. playwright-core for the driver (tests/web/package-lock.json).
if [ ! -d "$WEB/node_modules/playwright-core" ]; then
  (cd "$WEB" && npm ci --no-audit --no-fund --loglevel=error)
fi

# 5. The plugin tarball (npm pack runs the package build, which runs client/build.mjs) and the scripted model.
mkdir -p "$RUN/pkgs"
rm -f "$RUN"/pkgs/*.tgz
if [ -n "${DSH_WEB_TGZ:-}" ]; then
  cp "$DSH_WEB_TGZ" "$RUN/pkgs/"
else
  (cd "$ROOT/client" && { [ -d node_modules/esbuild ] || npm ci --no-audit --no-fund --loglevel=error; })
  PACK_ARGS=()
  if [ "${DSH_WEB_REUSE_BUILD:-0}" = 1 ]; then
    node "$ROOT/client/build.mjs"
    PACK_ARGS=(--ignore-scripts)
  fi
  (cd "$ROOT" && npm pack --silent "${PACK_ARGS[@]}" --pack-destination "$RUN/pkgs" >"$RUN/pack.log" 2>&1) || { tail -40 "$RUN/pack.log"; say "npm pack failed"; exit 1; }
fi
(cd "$RUN/pkgs" && npm pack --silent "$WEB/scripted-llm" >/dev/null)
TGZ=$(ls "$RUN"/pkgs/dsh-prompt-rewind-[0-9]*.tgz | head -1)
tar -tzf "$TGZ" >"$RUN/tgz-files.txt"
grep -qx 'package/lib/client.js' "$RUN/tgz-files.txt" || { say "$TGZ has no lib/client.js"; exit 1; }
say "packages: $(cd "$RUN/pkgs" && ls *.tgz | tr '\n' ' ')"

# 6–8. One scenario = a fresh DSH_HOME and workspace with both packages in the web profile, `dsh web`
# booted on a free loopback port (own process group, stopped by PID), and one browser run.
WEB_PID=""
stop_web() {
  if [ -n "$WEB_PID" ] && kill -0 "$WEB_PID" 2>/dev/null; then
    kill -TERM "$WEB_PID" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$WEB_PID" 2>/dev/null || break; sleep 0.25; done
    kill -0 "$WEB_PID" 2>/dev/null && kill -KILL "$WEB_PID" 2>/dev/null || true
  fi
  WEB_PID=""
}
trap stop_web EXIT

# scenario <name> <e2e mode> [extra `dsh web` args…]; sets RC
scenario() {
  local name=$1 mode=$2; shift 2
  local dir="$RUN/$name"
  export DSH_HOME="$dir/home"
  local ws="$dir/ws"
  rm -rf "$dir"   # every scenario starts from an empty DSH home and workspace (also when DSH_WEB_RUN is reused)
  mkdir -p "$ws"
  dsh plugin --profile web add "$RUN"/pkgs/*.tgz >"$dir/plugin-add.log" 2>&1 || { cat "$dir/plugin-add.log"; exit 1; }
  grep -q '"dsh-prompt-rewind"' "$DSH_HOME/profiles/web/package.json" || { cat "$dir/plugin-add.log"; say "plugin not in the profile"; exit 1; }
  say "[$name] profile bundles: $("$NODE" -p "JSON.stringify(require('$DSH_HOME/profiles/web/package.json').dsh.profile.bundles)")"
  export DSH_REWIND_LLM_LOG="$dir/llm.jsonl"
  (cd "$ws" && exec setsid "$DSH" web "$@" --no-open --host 127.0.0.1 --port 0) >"$dir/web.log" 2>&1 &
  WEB_PID=$!
  local url=""
  for _ in $(seq 1 240); do
    url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$dir/web.log" | head -1 || true)
    [ -n "$url" ] && break
    kill -0 "$WEB_PID" 2>/dev/null || { cat "$dir/web.log"; say "dsh web exited"; exit 1; }
    sleep 0.25
  done
  [ -n "$url" ] || { cat "$dir/web.log"; say "no URL after 60 s"; exit 1; }
  say "[$name] dsh web at $url"
  curl -fsS "$url/" >"$dir/index.html"
  grep -q '/plugins/dsh-prompt-rewind/client.js' "$dir/index.html" || { say "the boot graph does not list the client bundle"; exit 1; }
  set +e
  E2E_MODE=$mode "$NODE" "$WEB/e2e.mjs" "$url/" "$ws" "$SHOTS" "$dir"
  RC=$?
  set -e
  stop_web
  say "[$name] browser run rc=$RC; logs in $dir (web.log, llm.jsonl, home/)"
}

# crash: `dsh web` with the plugin's crash seam set kills itself in the middle of a rewind
# (crash-setup), then starts again on the same DSH home and workspace without it (crash-banner).
boot_web() { # <dir> <ws> <log name>; sets WEB_PID and URL
  local dir=$1 ws=$2 log=$3
  (cd "$ws" && exec setsid "$DSH" web --no-open --host 127.0.0.1 --port 0) >"$dir/$log" 2>&1 &
  WEB_PID=$!
  URL=""
  for _ in $(seq 1 240); do
    URL=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$dir/$log" | head -1 || true)
    [ -n "$URL" ] && break
    kill -0 "$WEB_PID" 2>/dev/null || { cat "$dir/$log"; say "dsh web exited"; exit 1; }
    sleep 0.25
  done
  [ -n "$URL" ] || { cat "$dir/$log"; say "no URL after 60 s"; exit 1; }
}
crash_scenario() {
  local dir="$RUN/crash"
  export DSH_HOME="$dir/home"
  local ws="$dir/ws"
  rm -rf "$dir"
  mkdir -p "$ws"
  dsh plugin --profile web add "$RUN"/pkgs/*.tgz >"$dir/plugin-add.log" 2>&1 || { cat "$dir/plugin-add.log"; exit 1; }
  export DSH_REWIND_LLM_LOG="$dir/llm.jsonl"
  DSH_REWIND_CRASH=rewind:marker-durable boot_web "$dir" "$ws" web.log
  say "[crash] dsh web (crash seam rewind:marker-durable) at $URL"
  set +e
  E2E_MODE=crash-setup "$NODE" "$WEB/e2e.mjs" "$URL/" "$ws" "$SHOTS" "$dir"
  RC=$?
  set -e
  for _ in $(seq 1 40); do kill -0 "$WEB_PID" 2>/dev/null || break; sleep 0.25; done
  if kill -0 "$WEB_PID" 2>/dev/null; then say "[crash] dsh web is still running after the seam"; stop_web; RC=1; return; fi
  grep -q '@@rewind-crash rewind:marker-durable' "$dir/web.log" || { say "[crash] the seam was not reached"; RC=1; return; }
  WEB_PID=""
  [ "$RC" = 0 ] || return
  boot_web "$dir" "$ws" web-restart.log
  say "[crash] dsh web restarted at $URL"
  set +e
  E2E_MODE=crash-banner "$NODE" "$WEB/e2e.mjs" "$URL/" "$ws" "$SHOTS" "$dir"
  RC=$?
  set -e
  stop_web
  say "[crash] browser run rc=$RC; logs in $dir"
}

rm -f "$SHOTS"/*.png "$SHOTS"/*.html "$SHOTS"/*.json
SCENARIOS=${DSH_WEB_SCENARIOS:-full degraded crash git}
FULL_RC=0; DEGRADED_RC=0; CRASH_RC=0; GIT_RC=0
case " $SCENARIOS " in *" full "*)
scenario full full
FULL_RC=$RC;; esac
# The same plugin on a DSH web client without the command-UI and Plugins-settings plugins, disabled
# through a real `--patch` layer (with the two shipped plugins that require the command UI; DSH's web
# boot refuses entries that cannot activate). Only the picker and the Plugins-page card may go.
case " $SCENARIOS " in *" degraded "*)
printf -- '- id: %s\n  disabled: true\n' ui-commands ui-model-selection ui-permission ui-settings-plugins >"$RUN/degraded.patch.yml"
scenario degraded degraded --patch "$RUN/degraded.patch.yml"
DEGRADED_RC=$RC;; esac
case " $SCENARIOS " in *" crash "*)
crash_scenario
CRASH_RC=$RC;; esac
# git: the workspace is a git repository; the dialog's git line and its "Keep git as it is" box.
case " $SCENARIOS " in *" git "*)
scenario git git
GIT_RC=$RC;; esac
trap - EXIT
say "full rc=$FULL_RC, degraded rc=$DEGRADED_RC, crash rc=$CRASH_RC, git rc=$GIT_RC (scenarios: $SCENARIOS), ${SECONDS} s total; screenshots in $SHOTS"
if [ "$FULL_RC" = 0 ] && [ "$DEGRADED_RC" = 0 ] && [ "$CRASH_RC" = 0 ] && [ "$GIT_RC" = 0 ] && [ "$OWN_RUN" = 1 ]; then
  rm -rf "$RUN"
else
  say "run directory kept: $RUN"
fi
[ "$FULL_RC" != 0 ] && exit "$FULL_RC"
[ "$DEGRADED_RC" != 0 ] && exit "$DEGRADED_RC"
[ "$CRASH_RC" != 0 ] && exit "$CRASH_RC"
exit "$GIT_RC"
