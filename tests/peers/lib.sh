# What every peer build script shares (sourced, not run): where binaries go, the "no go: say so and
# exit 0" rule, the stamp cache, and the gentle Go settings.
#
#   peers_init <script dir> <what, for messages> <what skips without it>
#   peers_fresh <stamp name> <binary>... -- <file>...   true when every binary exists and the stamp of the
#                                                       files, this library and the Go version matches
#   peers_go_env                                        GOMAXPROCS=1 -p=1 unless PEERS_BUILD_JOBS says otherwise
#   peers_stamp <stamp name>                            records the stamp after a successful build
# Builds run under `nice -n 19`: the suite shares the machine with its developer.

peers_init() {
  here=$(cd "$1" && pwd)
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  bin="$root/tests/.cache/bin"
  mkdir -p "$bin"
  if ! command -v go >/dev/null 2>&1; then
    echo "go not found: not building $2 ($3 will skip)"
    exit 0
  fi
}

peers_fresh() {
  local stamp=$1 outputs=() files=()
  shift
  while [ "$1" != "--" ]; do outputs+=("$1"); shift; done
  shift
  files=("$@" "${BASH_SOURCE[0]}")
  want=$( { cat "${files[@]}"; go env GOVERSION GOOS GOARCH; } | sha256sum | cut -d' ' -f1)
  for out in "${outputs[@]}"; do [ -x "$out" ] || return 1; done
  [ "$(cat "$bin/.$stamp.sha256" 2>/dev/null)" = "$want" ]
}

peers_go_env() {
  jobs=${PEERS_BUILD_JOBS:-1}
  export GOMAXPROCS=$jobs GOFLAGS="-p=$jobs -buildvcs=false -mod=readonly" GOTOOLCHAIN=local CGO_ENABLED=0
}

peers_stamp() {
  echo "$want" > "$bin/.$1.sha256"
}
