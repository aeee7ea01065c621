#!/usr/bin/env bash
# Builds the local control plane used by the tests (no kubelet, no containers):
#   etcd, kube-apiserver, kube-scheduler and helm, from the Go modules pinned in
#   tools/k8s/{etcd,kubernetes,helm}/go.mod (versions in tools/k8s/versions.env);
#   promtool (tools/k8s/prometheus/go.mod), which checks the chart's alerting rules; and
#   the ServiceMonitor and PrometheusRule CRDs of the prometheus-operator module (a
#   directory crds/, copied from the module the Go module proxy serves).
#
# Binaries go to a cache OUTSIDE the clone, keyed by version:
#   ${STICKYPACK_K8S_CACHE:-$HOME/.cache/stickypack/k8s}/<component>-<version>/<binary>
# and a directory of symlinks to all of them,
#   <cache>/bin-kubernetes-<v>-etcd-<v>-helm-<v>-prometheus-<v>-operator-<v>/
# whose path is the only thing printed on stdout (logs go to stderr).
# stickypack.testing.controlplane.binaries_dir() computes the same path.
#
# A component is rebuilt only when its stamp file is missing or names other inputs
# (version, build recipe, go.mod/go.sum): binaries are built under a temporary name and
# moved into place, and the stamp is written last, so a half-built binary is never used.
# With everything in place this takes well under a second.
#
# Usage: tools/k8s/build.sh                  build what is missing, print the bin dir
#        tools/k8s/build.sh --print-bin-dir  print the bin dir, build nothing
#        tools/k8s/build.sh --force          rebuild everything
# Works from an empty Go module cache (downloads from the Go module proxy).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=/dev/null
source "$here/versions.env"

# Bump when the build flags below change, so cached binaries are rebuilt.
RECIPE=2

cache="${STICKYPACK_K8S_CACHE:-$HOME/.cache/stickypack/k8s}"
# A value from a CI file is not tilde-expanded by a shell; Python's binaries_dir() expands it.
case "$cache" in "~") cache="$HOME" ;; "~/"*) cache="$HOME/${cache#"~/"}" ;; esac
bin_dir="$cache/bin-kubernetes-$K8S_VERSION-etcd-$ETCD_VERSION-helm-$HELM_VERSION"
bin_dir+="-prometheus-$PROMETHEUS_VERSION-operator-$PROMETHEUS_OPERATOR_VERSION"

force=0
case "${1:-}" in
  --print-bin-dir) echo "$bin_dir"; exit 0 ;;
  --force) force=1 ;;
  "") ;;
  *) echo "usage: $0 [--print-bin-dir|--force]" >&2; exit 2 ;;
esac

log() { echo "build.sh: $*" >&2; }

# component version module-dir binaries...
components=(
  "kubernetes $K8S_VERSION kubernetes kube-apiserver kube-scheduler"
  "etcd $ETCD_VERSION etcd etcd"
  "helm $HELM_VERSION helm helm"
  "prometheus $PROMETHEUS_VERSION prometheus promtool"
)
# The CRDs: <cache>/prometheus-operator-<v>/ (with a stamp), linked as <bin_dir>/crds.
crds_dir="$cache/prometheus-operator-$PROMETHEUS_OPERATOR_VERSION"
crd_files=(monitoring.coreos.com_servicemonitors.yaml monitoring.coreos.com_prometheusrules.yaml)
crds_stamp="prometheus-operator $PROMETHEUS_OPERATOR_VERSION ${crd_files[*]}"

stamp_text() { # component version module-dir
  local sum
  sum="$(cat "$here/$3/go.mod" "$here/$3/go.sum" | sha256sum | cut -c1-16)"
  echo "$1 $2 recipe=$RECIPE modsum=$sum"
}

is_built() { # component version module-dir binaries...
  local dest="$cache/$1-$2" b
  [[ $force == 0 && -f "$dest/.stamp" ]] || return 1
  [[ "$(cat "$dest/.stamp")" == "$(stamp_text "$1" "$2" "$3")" ]] || return 1
  for b in "${@:4}"; do [[ -x "$dest/$b" ]] || return 1; done
}

link_bin_dir() {
  local c name version mod rest b
  mkdir -p "$bin_dir"
  for c in "${components[@]}"; do
    read -r name version mod rest <<<"$c"
    for b in $rest; do
      [[ -L "$bin_dir/$b" ]] || ln -sfn "../$name-$version/$b" "$bin_dir/$b"
    done
  done
  [[ -L "$bin_dir/crds" ]] || ln -sfn "../${crds_dir##*/}" "$bin_dir/crds"
}

crds_fetched() {
  local f
  [[ $force == 0 && -f "$crds_dir/.stamp" && "$(cat "$crds_dir/.stamp")" == "$crds_stamp" ]] || return 1
  for f in "${crd_files[@]}"; do [[ -s "$crds_dir/$f" ]] || return 1; done
}

all_built() {
  local c
  for c in "${components[@]}"; do
    # shellcheck disable=SC2086
    is_built $c || return 1
  done
  for c in kube-apiserver kube-scheduler etcd helm promtool; do [[ -x "$bin_dir/$c" ]] || return 1; done
  crds_fetched && [[ -L "$bin_dir/crds" ]]
}

# Fast path: nothing to do.
if all_built; then echo "$bin_dir"; exit 0; fi

ldflags_for() { # component version
  local v="$2" flags="-s -w" major minor date pkg
  case "$1" in
    kubernetes)
      major="${v#v}"; major="${major%%.*}"
      minor="${v#v*.}"; minor="${minor%%.*}"
      # The release's publication time, as the build date (reproducible).
      local info
      info="$(cd "$here/kubernetes" && go mod download -json "k8s.io/kubernetes@$v" \
        | sed -n 's/^[[:space:]]*"Info": "\(.*\)",\{0,1\}$/\1/p')"
      date="$(sed -n 's/.*"Time": *"\([^"]*\)".*/\1/p' "$info" 2>/dev/null || true)"
      for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        flags+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
        [[ -n $date ]] && flags+=" -X $pkg.buildDate=$date"
      done ;;
    etcd)
      flags+=" -X go.etcd.io/etcd/api/v3/version.Version=${v#v}" ;;
    helm)
      flags+=" -X helm.sh/helm/${v%%.*}/internal/version.version=$v"
      flags+=" -X helm.sh/helm/${v%%.*}/internal/version.metadata=" ;;
    prometheus)
      flags+=" -X github.com/prometheus/common/version.Version=$v" ;;
  esac
  echo "$flags"
}

packages_for() { # component version -> "binary=package" pairs
  case "$1" in
    kubernetes) echo "kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver" \
                     "kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler" ;;
    etcd) echo "etcd=go.etcd.io/etcd/server/v3" ;;
    helm) echo "helm=helm.sh/helm/${2%%.*}/cmd/helm" ;;
    prometheus) echo "promtool=github.com/prometheus/prometheus/cmd/promtool" ;;
  esac
}

retried() { # what command...: the command, tried up to 4 times (5, 10, 15 s apart): cmd/go
  # does not retry a failed request, so one hiccup of the module proxy would otherwise fail
  # a cold build. The command's stdout is passed on; the log goes to stderr.
  local what="$1" attempt
  shift
  for attempt in 1 2 3 4; do
    if "$@"; then return 0; fi
    [[ $attempt == 4 ]] && break
    log "$what failed (attempt $attempt of 4); retrying"
    sleep $((attempt * 5))
  done
  log "could not $what (GOPROXY=$(go env GOPROXY))"
  return 1
}

go_in() { # module-dir go-args...: go, run in tools/k8s/<module-dir>
  local mod="$1"
  shift
  (cd "$here/$mod" && go "$@")
}

download_modules() { # module-dir
  retried "download the modules of tools/k8s/$1" go_in "$1" mod download
}

operator_module_dir() { # prints where the prometheus-operator module was unpacked
  local dir
  dir="$(go_in prometheus mod download -json \
    "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" \
    | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')" && [[ -d $dir ]] && echo "$dir"
}

check_runs() { # binary-path: a binary that does not print its version is no build
  local out args=(--version)
  [[ ${1##*/} == helm ]] && args=(version)
  out="$("$1" "${args[@]}" 2>&1)" || { log "$1 does not run: $out"; exit 1; }
  log "${1##*/}: ${out%%$'\n'*}"
}

build_component() { # component version module-dir binaries...
  local name="$1" version="$2" mod="$3" dest="$cache/$1-$2" tmp ldflags pair b start
  local -a pkgs=()
  if is_built "$@"; then return 0; fi
  start=$SECONDS
  mkdir -p "$dest"
  rm -f "$dest/.stamp"
  rm -rf "$dest"/.build.*  # left by a build killed with SIGKILL (we hold the lock)
  tmp="$(mktemp -d "$dest/.build.XXXXXX")"
  # shellcheck disable=SC2064
  trap "rm -rf '$tmp'" EXIT
  download_modules "$mod"
  ldflags="$(ldflags_for "$name" "$version")"
  for pair in $(packages_for "$name" "$version"); do pkgs+=("${pair#*=}"); done
  log "building $name $version (${pkgs[*]}) ..."
  if [[ $name == etcd ]]; then
    # The etcd main package is go.etcd.io/etcd/server/v3, whose default binary name
    # would be "server": name it explicitly.
    (cd "$here/$mod" && CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "$ldflags" -o "$tmp/etcd" "${pkgs[@]}")
  else
    # One go build for several binaries compiles their shared packages once.
    (cd "$here/$mod" && CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}")
  fi
  for b in "${@:4}"; do mv -f "$tmp/$b" "$dest/$b"; done
  # Before the stamp: a build whose binary does not run must not count as done next time.
  for b in "${@:4}"; do check_runs "$dest/$b"; done
  stamp_text "$name" "$version" "$mod" >"$tmp/.stamp"
  mv -f "$tmp/.stamp" "$dest/.stamp"
  rm -rf "$tmp"
  trap - EXIT
  log "built $name $version in $((SECONDS - start)) s -> $dest"
}

command -v go >/dev/null || { log "needs the Go toolchain (go) on PATH"; exit 1; }
mkdir -p "$cache"
# One build at a time per cache (a second caller waits, then finds everything built).
exec 9>"$cache/.build.lock"
command -v flock >/dev/null && flock 9

fetch_crds() { # the CRD files of the prometheus-operator module, copied out of it
  local dir tmp f
  if crds_fetched; then return 0; fi
  dir="$(retried "download prometheus-operator $PROMETHEUS_OPERATOR_VERSION" operator_module_dir)" || exit 1
  mkdir -p "$crds_dir"
  rm -f "$crds_dir/.stamp"
  rm -rf "$crds_dir"/.fetch.*  # left by a fetch killed with SIGKILL (we hold the lock)
  tmp="$(mktemp -d "$crds_dir/.fetch.XXXXXX")"
  # shellcheck disable=SC2064
  trap "rm -rf '$tmp'" EXIT
  for f in "${crd_files[@]}"; do
    cp "$dir/example/prometheus-operator-crd/$f" "$tmp/$f"
    mv -f "$tmp/$f" "$crds_dir/$f"
  done
  echo "$crds_stamp" >"$tmp/.stamp"
  mv -f "$tmp/.stamp" "$crds_dir/.stamp"
  rm -rf "$tmp"
  trap - EXIT
  log "fetched the prometheus-operator $PROMETHEUS_OPERATOR_VERSION CRDs -> $crds_dir"
}

for c in "${components[@]}"; do
  # shellcheck disable=SC2086
  build_component $c
done
fetch_crds
link_bin_dir
echo "$bin_dir"
