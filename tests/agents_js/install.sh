#!/usr/bin/env bash
# Installs the real agent CLIs tests/runs/real_agents.rs drives (versions pinned in package.json and
# package-lock.json) into tests/agents_js/node_modules. Node 20 and npm from its registry; nothing
# else is fetched here (the CLIs are pointed at a fake model server by the tests).
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v npm >/dev/null 2>&1; then
  echo "npm (Node 20) is missing: the real agent CLIs cannot be installed" >&2
  exit 1
fi
# package-lock.json lists the other platforms' optional binaries of opencode-ai and
# @teddyzhu/clipboard (a dependency of @qwen-code/qwen-code) by name, version, os, cpu and libc only:
# the registry this was locked against does not serve them, and npm skips them here anyway.
npm ci --no-audit --no-fund --loglevel=error
