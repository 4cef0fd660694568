#!/bin/sh
# Copies the migrations of a recorded release out of git into test/fixtures/upgrade/<version>/,
# the schema test/e2e/upgrade.test.ts builds its "database of the previous release" with.
# usage: scripts/extract-release-migrations.sh [COMMIT VERSION]   (default: a39f984 v0.1.0)
set -eu
commit=${1:-a39f984}
version=${2:-v0.1.0}
root=$(git rev-parse --show-toplevel)
for backend in sqlite postgres; do
  dest="$root/test/fixtures/upgrade/$version/$backend"
  rm -rf "$dest"
  mkdir -p "$dest"
  git -C "$root" ls-tree --name-only "$commit" "migrations/$backend/" | while read -r path; do
    git -C "$root" show "$commit:$path" > "$dest/$(basename "$path")"
  done
done
echo "test/fixtures/upgrade/$version: $(ls "$root/test/fixtures/upgrade/$version/sqlite" | wc -l) migrations per backend from $commit"
