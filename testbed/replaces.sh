#!/usr/bin/env bash
# Prints the `go mod edit` flags that pin every staging module of k8s.io/kubernetes to its published
# version. k8s.io/kubernetes replaces its staging modules with ./staging/... paths, which mean
# nothing outside its own repository; a module that imports it must replace each of them itself.
# The list is derived from that version's own go.mod, never typed by hand.
#
#   bash testbed/replaces.sh v1.37.2 | xargs go mod edit
set -euo pipefail
version="${1:?usage: replaces.sh KUBERNETES_VERSION (e.g. v1.37.2)}"
gomod="$(go mod download -json "k8s.io/kubernetes@${version}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
[ -n "$gomod" ] || { echo "replaces.sh: could not download k8s.io/kubernetes@${version}" >&2; exit 1; }
# Staging modules are published as v0.MINOR.PATCH for kubernetes v1.MINOR.PATCH.
staging_version="v0.${version#v1.}"
sed -n 's#^[[:space:]]*\([^[:space:]]*\) => \./staging/src/[^[:space:]]*$#\1#p' "$gomod" |
  while read -r module; do
    printf -- '-replace=%s=%s@%s\n' "$module" "$module" "$staging_version"
  done
