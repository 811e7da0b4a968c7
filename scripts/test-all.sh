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
times=$(mktemp -d /tmp/agentvm-times.XXXXXX)
as_pg=()
if [ "$(id -u)" -eq 0 ]; then
  chown postgres: "$pgdir"
  as_pg=(runuser -u postgres --)
fi
port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
stop() {
  "${as_pg[@]}" "$pgbin/pg_ctl" -D "$pgdir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$pgdir" "$times"
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

export AGENTVM_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres"
echo "PostgreSQL $("$pgbin/postgres" --version | awk '{print $3}') for the tests on 127.0.0.1:$port"
status=0
AGENTVM_TEST_TIMES="$times/files.jsonl" npm test || status=$?
node scripts/test-report-summary.mjs $((SECONDS - started)) "$times/files.jsonl"
exit $status
