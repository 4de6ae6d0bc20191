#!/usr/bin/env bash
# The published ACP agents the tests run through Recourse (Claude Code's and Codex's ACP
# adapters, Gemini CLI, Qwen Code), installed once per machine from npm at the versions
# scripts/agents/package.json pins (its package-lock.json fixes every dependency).
#
#   scripts/agents.sh install   install when missing (idempotent), then print the folder whose
#                               node_modules/.bin/ holds claude-agent-acp, codex-acp, gemini, qwen
#   scripts/agents.sh dir       print that folder (installed or not)
#
# The folder is ~/.cache/recourse/agents-<hash of the lock file>: a new pin is a new folder,
# and a folder counts as installed only once every agent answered `--version` (a marker file
# written last). Optional dependencies are left out (Codex's adapter gets only its linux-x64
# binary, named in package.json; Qwen's clipboard, audio and pty helpers, sharp), and no
# install script runs (they would try downloads that fail offline): about 510 MB.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/agents"

CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/recourse"
hash=$(sha256sum package.json package-lock.json | sha256sum | cut -c1-12)
DIR="$CACHE_DIR/agents-$hash"
BINS=(claude-agent-acp codex-acp gemini qwen)

installed() {
  [ -f "$DIR/.installed" ] || return 1
  local b
  for b in "${BINS[@]}"; do [ -x "$DIR/node_modules/.bin/$b" ] || return 1; done
}

# Every agent starts and says its version; Claude's adapter has no --version (it speaks ACP at
# once), so its package's own file says it.
check() {
  local bin="$DIR/node_modules/.bin"
  timeout 60 "$bin/gemini" --version </dev/null >/dev/null
  timeout 60 "$bin/qwen" --version </dev/null >/dev/null
  timeout 60 "$bin/codex-acp" --help </dev/null >/dev/null
  node -e 'require(process.argv[1])' "$DIR/node_modules/@zed-industries/claude-agent-acp/package.json"
  [ -f "$DIR/node_modules/@anthropic-ai/claude-agent-sdk/cli.js" ]
}

install() {
  if installed; then
    return 0
  fi
  command -v npm >/dev/null || { echo "npm not found: install Node.js and npm first" >&2; exit 1; }
  local t=$SECONDS tmp
  echo "installing the published ACP agents into $DIR (about 510 MB, once)" >&2
  mkdir -p "$CACHE_DIR"
  tmp=$(mktemp -d "$CACHE_DIR/agents-tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  cp package.json package-lock.json "$tmp/"
  # `npm install` against the lock (not `npm ci`: the lock names platform packages of Qwen's
  # optional clipboard helper that npm ci insists on even when optional ones are omitted).
  (cd "$tmp" && npm install --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error \
    --engine-strict=false >&2)
  cmp -s package-lock.json "$tmp/package-lock.json" || {
    echo "scripts/agents/package-lock.json does not match what npm resolved; update it" >&2
    exit 1
  }
  rm -rf "$DIR"
  mv "$tmp" "$DIR"
  trap - EXIT
  check || { echo "an installed agent does not start (see above)" >&2; exit 1; }
  date -u +%FT%TZ >"$DIR/.installed"
  echo "    agents installed in $(( SECONDS - t )) s" >&2
}

case "${1:-}" in
  install) install; echo "$DIR" ;;
  dir) echo "$DIR" ;;
  *) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
