#!/bin/sh
# Rebuilds the chat page (dist/index.html, committed; the ll3 build embeds it and needs no npm).
# Installs the locked packages first: npm ci, so the output is the same on every machine.
set -e
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
node build.mjs
