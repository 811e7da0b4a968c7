#!/usr/bin/env bash
# The whole test suite: on the embedded PGlite and on a throwaway PostgreSQL server started here
# (its own data dir and a loopback port; stopped and removed at the end). Ends with the ten slowest
# test files and the total wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
bash scripts/install-debs.sh
[ -d node_modules ] || npm ci

pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
pgdir=$(mktemp -d /tmp/agentvm-pg.XXXXXX)
golden=$(mktemp -d /tmp/agentvm-golden.XXXXXX)
chmod 711 "$golden" # each QEMU runs as a user of its own: it must reach its machine's directory below
times=$(mktemp -d /tmp/agentvm-times.XXXXXX)
golden_pid=
as_pg=()
if [ "$(id -u)" -eq 0 ]; then
  chown postgres: "$pgdir"
  as_pg=(runuser -u postgres --)
fi
port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
stop() {
  "${as_pg[@]}" "$pgbin/pg_ctl" -D "$pgdir/data" -m immediate stop >/dev/null 2>&1 || true
  # A run cut short while the golden snapshot is still being made: its server goes too.
  if [ -f "$golden/.server-pid" ] && [ ! -f "$golden/.ready" ] && [ ! -f "$golden/.failed" ]; then
    kill "$(cat "$golden/.server-pid")" 2>/dev/null || true
    wait "$golden_pid" 2>/dev/null || true
  fi
  rm -rf "$pgdir" "$golden" "$times"
}
trap stop EXIT
"${as_pg[@]}" "$pgbin/initdb" -D "$pgdir/data" -U postgres --auth=trust -E UTF8 >/dev/null
"${as_pg[@]}" "$pgbin/pg_ctl" -D "$pgdir/data" -l "$pgdir/log" -w \
  -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$pgdir -c fsync=off" start >/dev/null
# The guest image for the real-VM tests: built once, kept between runs outside the checkout
# (content-addressed: rebuilt only when an input changes).
export AGENTVM_TEST_IMAGE_DIR="${AGENTVM_TEST_IMAGE_DIR:-/var/cache/agentvm/images}"
mkdir -p "$AGENTVM_TEST_IMAGE_DIR"
node bin/agentvm.js image build --image-dir "$AGENTVM_TEST_IMAGE_DIR"

# The starter shape's golden snapshot, made once for the run by a server of its own while the types
# are checked; each real-VM test's server starts with it (test/helpers.ts seedSnapshots) instead of
# booting and saving a golden VM of its own. Marked .ready, or .failed (then each makes its own).
make_golden() {
  set +e
  local data="$golden/server" t0=$SECONDS key=
  AGENTVM_IMAGE_DIR="$AGENTVM_TEST_IMAGE_DIR" AGENTVM_IMAGE_BUILD=off AGENTVM_STANDBY_VMS=0 AGENTVM_STANDBY_BUILDERS=0 AGENTVM_LOG_LEVEL=info \
    DATABASE_URL= AGENTVM_ADMIN_TOKEN="avm_admin_golden_$RANDOM$RANDOM$RANDOM$RANDOM" \
    node bin/agentvm.js serve --port 0 --data-dir "$data" >"$golden/server.log" 2>&1 &
  local pid=$!
  echo "$pid" >"$golden/.server-pid"
  while [ -z "$key" ] && kill -0 "$pid" 2>/dev/null && [ $((SECONDS - t0)) -lt 900 ]; do
    sleep 1
    for d in "$data"/snapshots/*; do
      if [[ -f $d/meta.json && $d != *.work ]]; then key=$(basename "$d"); fi
    done
    if grep -q '"building a snapshot failed' "$golden/server.log"; then break; fi
  done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if [ -n "$key" ]; then
    mv "$data/snapshots/$key" "$golden/$key"
    # The server's folder goes before the mark: the tests copy every folder here once it is there.
    rm -rf "$data"
    touch "$golden/.ready"
    echo "golden snapshot $key for the run in $((SECONDS - t0)) s"
  else
    touch "$golden/.failed"
    echo "making the golden snapshot for the run failed (each real-VM test makes its own):"
    grep -v '"level":30' "$golden/server.log" | tail -n 20
    grep '"building a snapshot failed' "$golden/server.log" | cut -c1-2000
  fi
  rm -rf "$data"
}
make_golden >"$golden/make.log" 2>&1 &
golden_pid=$!
export AGENTVM_TEST_SNAPSHOT_DIR="$golden"

export AGENTVM_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres"
echo "PostgreSQL $("$pgbin/postgres" --version | awk '{print $3}') for the tests on 127.0.0.1:$port"
# Two files that boot VMs at a time (scripts/test-vm-slot.mjs): on two cores a VM file alone leaves
# a core mostly idle once the files without VMs are done; two at once took the run from 33 to 21-26 min.
export AGENTVM_TEST_VM_SLOTS="${AGENTVM_TEST_VM_SLOTS:-2}"
# No builder VM kept ready in each test's server (a VM more beside every test's, on two cores): the
# image tests that take one ask for it (test/images.test.ts); the others build with a builder started.
# Nor a standby VM of each image a test starts a VM of (test/images.test.ts asks for one).
export AGENTVM_STANDBY_BUILDERS="${AGENTVM_STANDBY_BUILDERS:-0}"
export AGENTVM_STANDBY_IMAGES="${AGENTVM_STANDBY_IMAGES:-0}"
status=0
AGENTVM_TEST_TIMES="$times/files.jsonl" npm test || status=$?
cat "$golden/make.log"
node scripts/test-report-summary.mjs $((SECONDS - started)) "$times/files.jsonl"
exit $status
