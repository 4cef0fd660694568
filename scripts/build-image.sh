#!/bin/sh
# Builds Gantry's image (the Dockerfile at the root) on the Docker engine DOCKER_HOST names,
# without a registry, and prints nothing but TAG. usage: scripts/build-image.sh TAG
#
# The base (NODE_IMAGE) is made here: `docker import` of a tarball of this machine's own node,
# the libraries it and the native modules load (as ldd lists them) and /bin/sh — tagged
# gantry-base:<hash of those files>, imported once per engine. The build context carries
# dist/ (`npm run build`) and the production node_modules of this checkout (built for this
# node), other platforms' onnxruntime binaries left out. docs/deploy.md#the-image.
set -eu
if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: scripts/build-image.sh TAG" >&2
  exit 2
fi
tag=$1
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ -f dist/src/cli/main.js ] || npm run build --silent >&2
[ -d node_modules ] || { echo "build-image: run npm ci first" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The production packages (top level; nested ones come with their parent).
npm ls --omit=dev --parseable --all 2>/dev/null | sed "s#^$root/##" |
  grep -E '^node_modules/(@[^/]+/)?[^/]+$' | sort -u > "$work/packages"

# 1. The base: node, the shared libraries (outside node_modules) of node and of every native
#    module, dash as /bin/sh.
node=$(readlink -f "$(command -v node)")
{
  echo "$node"
  echo /bin/dash
  xargs -a "$work/packages" -I{} find {} \( -name '*.node' -o -name '*.so' -o -name '*.so.*' \) -type f 2>/dev/null |
    grep -v -e '/darwin/' -e '/win32/' -e '/arm64/'
} > "$work/binaries"
while read -r bin; do ldd "$bin" 2>/dev/null || true; done < "$work/binaries" |
  sed -n 's#^[^/]*\(/[^ ]*\) (0x.*#\1#p' | grep -v node_modules | sort -u > "$work/libs"
mkdir -p "$work/extra/bin" "$work/extra/etc" "$work/extra/usr/bin" "$work/extra/tmp"
chmod 1777 "$work/extra/tmp"
ln -s dash "$work/extra/bin/sh"
[ "$node" = /usr/bin/node ] || ln -s "$node" "$work/extra/usr/bin/node"
printf 'root:x:0:0:root:/root:/bin/sh\n' > "$work/extra/etc/passwd"
printf 'root:x:0:\n' > "$work/extra/etc/group"
printf 'hosts: files dns\n' > "$work/extra/etc/nsswitch.conf"
base="gantry-base:$(cat "$work/libs" | xargs sha256sum "$node" /bin/dash "$0" | sha256sum | cut -c1-12)"
if ! docker image inspect "$base" >/dev/null 2>&1; then
  # -h stores the files links point to (the libraries are links; /bin and /lib are on merged-/usr).
  tar -h -cf "$work/base.tar" "$node" /bin/dash $(cat "$work/libs") 2>/dev/null
  tar -rf "$work/base.tar" -C "$work/extra" bin/sh etc tmp $( [ -L "$work/extra/usr/bin/node" ] && echo usr/bin/node)
  docker import --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' "$work/base.tar" "$base" >/dev/null
fi

# 2. The context: what the build stage would otherwise make (dist, production node_modules).
ctx="$work/context"
mkdir -p "$ctx"
cp Dockerfile package.json package-lock.json "$ctx/"
cp -r dist migrations "$ctx/"
tar -cf - --exclude='onnxruntime-node/bin/napi-v*/darwin' --exclude='onnxruntime-node/bin/napi-v*/win32' \
  --exclude='onnxruntime-node/bin/napi-v*/linux/arm64' -T "$work/packages" | tar -xf - -C "$ctx"
# Quiet unless it fails: then its output, on stderr.
if ! docker build -q --build-arg "NODE_IMAGE=$base" -t "$tag" "$ctx" > "$work/build.log" 2>&1; then
  cat "$work/build.log" >&2
  exit 1
fi
echo "$tag"
