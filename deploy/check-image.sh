#!/usr/bin/env bash
# Builds deploy/Dockerfile and checks that the image works, without a Docker engine: buildah
# builds it with chroot isolation (no daemon, no cgroups), and the checks run the image's own
# files as its own user.
#
# The Dockerfile's three base images come from Docker Hub. Where that registry cannot be reached
# (GITFLEET_IMAGE_BASES=standin, the default), they are stood in for by images built here and
# tagged with the names the Dockerfile uses: Debian bookworm from Debian's packages (debootstrap)
# for debian:bookworm-slim, that plus gcc, make and this machine's Rust toolchain for
# rust:1.95-bookworm, and that plus this machine's Go for golang:1.26-bookworm (which builds
# kustomize and helm from the Go module proxy). GITFLEET_IMAGE_BASES=pull uses the real ones.
#
#   bash deploy/check-image.sh               # needs root (or buildah's rootless setup)
#   bash deploy/check-image.sh --build-only  # builds the image, checks nothing
#
# What it checks, in the built image:
#   - the entrypoint is gitfleet, running as uid 65532 with HOME on the cache volume;
#   - git, ssh and the CA certificates are there (gix's ssh:// and https:// remotes), and
#     kustomize and helm (Kustomize folders and Helm releases of the fleet);
#   - `gitfleet run --once` follows a repository (the sample fleet) and rolls it out to simulated
#     members served by the image's own `gitfleet sim`, with its state on a mounted volume.
set -euo pipefail
cd "$(dirname "$0")/.."

build_only=false
case "${1:-}" in
  "") ;;
  --build-only) build_only=true ;;
  *) echo "usage: bash deploy/check-image.sh [--build-only]" >&2; exit 2 ;;
esac

bases=${GITFLEET_IMAGE_BASES:-standin}
tag=${GITFLEET_IMAGE_TAG:-localhost/gitfleet:check}
cache=${GITFLEET_IMAGE_CACHE:-$HOME/.cache/gitfleet/image}
rust_image=docker.io/library/rust:1.95-bookworm
debian_image=docker.io/library/debian:bookworm-slim
go_image=docker.io/library/golang:1.26-bookworm

say() { printf "check-image: %s %s\n" "$(date +%T)" "$*" >&2; }
fail() { say "FAILED: $*"; exit 1; }

need() {
  local missing=()
  for c in "$@"; do command -v "$c" >/dev/null || missing+=("$c"); done
  if ((${#missing[@]})); then
    say "installing ${missing[*]} from Debian's packages"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

have_image() { buildah inspect --type image "$1" >/dev/null 2>&1; }

# Whether image $1 holds the file $2 (a path from its root).
image_has() {
  local ctr mnt found=1
  ctr=$(buildah from --pull=never "$1") || return 1
  mnt=$(buildah mount "$ctr")
  [ -e "$mnt/$2" ] && found=0
  buildah umount "$ctr" >/dev/null
  buildah rm "$ctr" >/dev/null
  return "$found"
}

standin_bases() {
  need debootstrap
  if ! have_image "$debian_image"; then
    say "standing in for $debian_image: Debian bookworm from deb.debian.org (debootstrap)"
    local root
    root=$(mktemp -d)
    debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >/dev/null
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    local ctr mnt
    ctr=$(buildah from scratch)
    mnt=$(buildah mount "$ctr")
    cp -a "$root"/. "$mnt"/
    buildah umount "$ctr" >/dev/null
    buildah commit -q "$ctr" "$debian_image" >/dev/null
    buildah rm "$ctr" >/dev/null
    rm -rf "$root"
  fi
  # A stand-in made before the build needed make (jemalloc's C build) is made again; the real
  # image has make.
  if have_image "$rust_image" && ! image_has "$rust_image" usr/bin/make; then
    say "$rust_image has no make: making its stand-in again"
    buildah rmi "$rust_image" >/dev/null
  fi
  if ! have_image "$rust_image"; then
    local toolchain
    toolchain=$(rustc --print sysroot)
    say "standing in for $rust_image: $debian_image, gcc, and $(rustc --version) from $toolchain"
    local ctr
    ctr=$(buildah from --pull=never "$debian_image")
    buildah run --isolation chroot "$ctr" -- sh -c \
      'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libc6-dev make ca-certificates git >/dev/null 2>&1 && rm -rf /var/lib/apt/lists/*' \
      || fail "cannot install gcc, make and git in the stand-in for $rust_image"
    local mnt
    mnt=$(buildah mount "$ctr")
    mkdir -p "$mnt/usr/local/rust" "$mnt/usr/local/cargo"
    cp -a "$toolchain/bin" "$toolchain/lib" "$mnt/usr/local/rust/"
    # The certificate authorities this machine adds (a TLS-inspecting egress proxy's, here) are
    # trusted by the build stage too, or cargo cannot reach crates.io through it.
    if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
      cp /usr/local/share/ca-certificates/*.crt "$mnt/usr/local/share/ca-certificates/"
    fi
    buildah umount "$ctr" >/dev/null
    buildah run --isolation chroot "$ctr" -- update-ca-certificates >/dev/null 2>&1 \
      || fail "update-ca-certificates failed in the stand-in for $rust_image"
    # As the official image: cargo on PATH, CARGO_HOME in /usr/local/cargo.
    buildah config --env CARGO_HOME=/usr/local/cargo \
      --env PATH=/usr/local/cargo/bin:/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      "$ctr"
    buildah commit -q "$ctr" "$rust_image" >/dev/null
    buildah rm "$ctr" >/dev/null
  fi
  # GOPATH=/go as in the real image, where the Go caches are mounted (below).
  if have_image "$go_image" \
    && [[ $(buildah inspect --type image --format '{{.OCIv1.Config.Env}}' "$go_image") != *GOPATH=/go* ]]; then
    buildah rmi "$go_image" >/dev/null
  fi
  if ! have_image "$go_image"; then
    local goroot
    goroot=$(go env GOROOT)
    say "standing in for $go_image: $rust_image and $(go version) from $goroot"
    local ctr mnt
    ctr=$(buildah from --pull=never "$rust_image")
    mnt=$(buildah mount "$ctr")
    mkdir -p "$mnt/usr/local/go"
    cp -a "$goroot"/. "$mnt/usr/local/go/"
    buildah umount "$ctr" >/dev/null
    buildah config --env GOPATH=/go \
      --env PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      "$ctr"
    buildah commit -q "$ctr" "$go_image" >/dev/null
    buildah rm "$ctr" >/dev/null
  fi
}

need buildah kubectl
case "$bases" in
  standin) standin_bases; pull=(--pull=never) ;;
  pull) pull=() ;;
  *) say "GITFLEET_IMAGE_BASES is standin or pull, not $bases"; exit 2 ;;
esac

# Crates and the build's target folder live outside the image (bind mounts for the RUN steps),
# so a second build compiles only what changed. Go's module and build caches are this machine's
# own: kustomize and helm, built here as the Dockerfile builds them (CGO off, -trimpath, the same
# Go in the stand-in), are then not compiled a second time.
mkdir -p "$cache/registry" "$cache/target"
go_mounts=()
if command -v go >/dev/null; then
  gomodcache=$(go env GOMODCACHE)
  gocache=$(go env GOCACHE)
  mkdir -p "$gomodcache" "$gocache"
  go_mounts=(-v "$gomodcache:/go/pkg/mod" -v "$gocache:/root/.cache/go-build")
fi
say "building $tag from deploy/Dockerfile"
commit=$(git rev-parse HEAD)
buildah bud --isolation chroot "${pull[@]}" --layers --build-arg GITFLEET_COMMIT="$commit" \
  -v "$cache/registry:/usr/local/cargo/registry" -v "$cache/target:/src/target" "${go_mounts[@]}" \
  -f deploy/Dockerfile -t "$tag" . >"$cache/build.log" 2>&1 \
  || { tail -40 "$cache/build.log" >&2; say "the image did not build (log: $cache/build.log)"; exit 1; }
if $build_only; then
  say "built $tag (--build-only: not checked)"
  exit 0
fi

field() { buildah inspect --type image --format "{{$1}}" "$tag"; }
[[ $(field .OCIv1.Config.User) == 65532:65532 ]] || fail "the image runs as '$(field .OCIv1.Config.User)', not 65532:65532"
[[ $(field .OCIv1.Config.Entrypoint) == '[/usr/local/bin/gitfleet]' ]] || fail "entrypoint: $(field .OCIv1.Config.Entrypoint)"
[[ $(field .OCIv1.Config.Cmd) == '[run]' ]] || fail "command: $(field .OCIv1.Config.Cmd)"
[[ $(field .OCIv1.Config.Env) == *HOME=/var/cache/gitfleet* ]] || fail "HOME: $(field .OCIv1.Config.Env)"

ctr=$(buildah from --pull=never "$tag")
work=$(mktemp -d)
sim_pid=
cleanup() {
  # The simulator runs under buildah in a session of its own: the whole group goes.
  if [[ -n $sim_pid ]]; then
    kill -TERM -- "-$sim_pid" 2>/dev/null || true
    wait "$sim_pid" 2>/dev/null || true
  fi
  buildah rm "$ctr" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
# The volumes deploy/ mounts: the cache (HOME, the state) writable by the image's user.
mkdir -p "$work/cache" "$work/fleet"
chown 65532:65532 "$work/cache"
in_image() {
  buildah run --isolation chroot --user 65532:65532 \
    -v "$work/cache:/var/cache/gitfleet" -v "$work/fleet:/fleet:ro" "$ctr" -- "$@"
}
export -f in_image
export ctr work

version=$(in_image gitfleet --version) || fail "gitfleet --version"
[[ $version == *"commit $commit"* ]] || fail "the image's binary says '$version', not commit $commit"
git_version=$(in_image git --version) || fail "no git in the image"
ssh_version=$(in_image ssh -V 2>&1) || fail "no ssh client in the image"
kustomize_version=$(in_image kustomize version) || fail "no kustomize in the image"
helm_version=$(in_image helm version --template '{{ .Version }}') || fail "no helm in the image"
say "in the image: $version, $git_version, $ssh_version, kustomize $kustomize_version, helm $helm_version"
[[ $(in_image id -u) == 65532 ]] || fail "not running as 65532"
in_image test -s /etc/ssl/certs/ca-certificates.crt || fail "no CA certificates"

# The sample fleet as a repository, and its members served by the image's simulator.
cp -r examples/fleet-repo/. "$work/fleet/"
# Its `reports` placement is unhealthy on purpose (pods no node can hold): `--once` would wait
# for it to become available, up to its limit.
rm "$work/fleet/placements/reports.yaml"
git -C "$work/fleet" init -q -b main
git -C "$work/fleet" add -A
git -C "$work/fleet" -c user.name=check -c user.email=check@localhost commit -qm fleet
# The sample's flaky member fails one request in ten on purpose; here a failure is the image's.
sed 's/errorRate: .*/errorRate: 0/' examples/sim-fleet.yaml >"$work/cache/sim-fleet.yaml"
# The sample's SOPS-encrypted Secret opens with its demo key (kept outside the fleet folder).
cp examples/demo-age-key.txt "$work/cache/demo-age-key.txt"
chown -R 65532:65532 "$work/cache" "$work/fleet"
setsid bash -c 'in_image gitfleet sim --fleet /var/cache/gitfleet/sim-fleet.yaml \
  --kubeconfig-out /var/cache/gitfleet/kubeconfig' >"$work/sim.log" 2>&1 &
sim_pid=$!
for _ in $(seq 1 300); do [[ -s $work/cache/kubeconfig ]] && break; sleep 0.1; done
[[ -s $work/cache/kubeconfig ]] || { cat "$work/sim.log" >&2; fail "the simulator wrote no kubeconfig"; }

in_image gitfleet run --once --repo file:///fleet --kubeconfig /var/cache/gitfleet/kubeconfig \
  --state-dir /var/cache/gitfleet/state --listen 127.0.0.1:0 \
  --age-key-file /var/cache/gitfleet/demo-age-key.txt >"$work/run.log" 2>&1 \
  || { tail -30 "$work/run.log" >&2; fail "gitfleet run --once in the image"; }
[[ -s $work/cache/state/schedule.json ]] || fail "no state written to the volume"
steps=$(grep -c 'rollout step' "$work/run.log" || true)
((steps > 0)) || { cat "$work/run.log" >&2; fail "gitfleet run --once in the image took no rollout step"; }
# What the members hold, asked from outside the image with kubectl.
deployments=$(kubectl --kubeconfig "$work/cache/kubeconfig" --context eastus-prod-1 \
  get deployments -A --no-headers 2>&1 | wc -l)
((deployments > 0)) || fail "member eastus-prod-1 has no Deployment after the rollout"
say "gitfleet run --once in the image: the sample fleet rolled out ($steps rollout steps logged; member eastus-prod-1 holds $deployments Deployments), state on the volume"
say "ok: $tag"
