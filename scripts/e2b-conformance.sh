#!/bin/bash
# E2B's own JS SDK tests (packages/js-sdk/tests/sandbox in E2B's repository) against an agentvm, with
# vitest: the measure of decisions section 17. The npm package `e2b` ships no tests, so this takes a
# checkout of E2B's repository (git clone https://github.com/e2b-dev/E2B).
#
#   scripts/e2b-conformance.sh /path/to/E2B [vitest filter...]
#   scripts/e2b-conformance.sh --serve /path/to/E2B [vitest filter...]
#
# With --serve (as root) the script runs everything in a network
# namespace of its own with nothing but loopback (`unshare -n`): its own `agentvm serve` (a new data
# dir under the work dir, AGENTVM_IMAGE_DIR as set), a tenant with a card and an e2b-format key made
# through the admin API, the TLS front and the tests. The sandboxes' egress then cannot leave this
# machine whatever a test asks. E2B_DOMAIN defaults to e2b.localhost:8443 there. At the end it stops
# the server and every QEMU it left (by the pids in its data dir).
#
# Environment: AGENTVM_URL (default http://127.0.0.1:8080), E2B_API_KEY (an agentvm key in E2B's
# format: POST /v1/api/keys with {"format": "e2b", "scope": "readwrite"}; its tenant needs a card or
# credits). The tests run one file at a time (each test makes a sandbox, a VM), in a copy of the SDK
# under $E2B_CONFORMANCE_DIR (default a new temporary directory) whose packages come from the npm registry.
# The summary (files, tests passed and failed) is the last lines; the JSON report is left in the copy.
#
# With E2B_DOMAIN set, the SDK is configured as E2B's users configure it, by the domain alone (no
# E2B_API_URL, no E2B_SANDBOX_URL): `https://api.{domain}` and `https://{port}-{sandbox id}.{domain}`,
# the server started with AGENTVM_PREVIEW_DOMAIN={domain} and AGENTVM_PREVIEW_SCHEME=https. The domain
# needs wildcard DNS and TLS; one under `.localhost` (e.g. `e2b.localhost:8443`) gets both here, on
# loopback: a certificate for `*.{domain}` that the tests trust, a TLS front on the domain's port that
# passes the bytes to AGENTVM_URL, and its names resolved to 127.0.0.1 in the tests (as browsers do).
set -euo pipefail

serve=''
if [ "${1:-}" = --serve ]; then serve=1; shift; fi
checkout=${1:?usage: scripts/e2b-conformance.sh [--serve] /path/to/E2B-checkout [vitest filter...]}
shift
sdk="$checkout/packages/js-sdk"
[ -d "$sdk/tests/sandbox" ] || { echo "no packages/js-sdk/tests/sandbox under $checkout" >&2; exit 2; }
work=${E2B_CONFORMANCE_DIR:-$(mktemp -d /tmp/e2b-conformance.XXXXXX)}
cleanup=()
trap 'for c in "${cleanup[@]}"; do eval "$c" || true; done' EXIT

# The SDK's sources and tests, and its runtime dependencies with what the tests import.
mkdir -p "$work"
cp -r "$sdk/src" "$sdk/tests" "$sdk/tsconfig.json" "$work/"
node - "$sdk/package.json" "$work/package.json" <<'EOF'
const fs = require('node:fs');
const [from, to] = process.argv.slice(2);
const pkg = JSON.parse(fs.readFileSync(from, 'utf8'));
const dev = pkg.devDependencies ?? {};
const want = ['vitest', 'msw', 'dotenv', 'error-stack-parser-es'];
const devDependencies = Object.fromEntries(want.filter((n) => dev[n]).map((n) => [n, dev[n]]));
fs.writeFileSync(to, JSON.stringify({ name: 'e2b-conformance', private: true, type: 'module', version: pkg.version, dependencies: pkg.dependencies, devDependencies }, null, 2));
EOF
if [ ! -d "$work/node_modules/vitest" ]; then
  (cd "$work" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
fi
cat > "$work/vitest.agentvm.config.mts" <<'EOF'
import { defineConfig } from 'vitest/config'
export default defineConfig({
  test: {
    include: ['tests/sandbox/**/*.test.ts'],
    environment: 'node',
    globals: false,
    isolate: true,
    // A sandbox is a microVM: under emulation its start and its commands are slower than E2B's cloud.
    testTimeout: 300_000,
    hookTimeout: 300_000,
    fileParallelism: false,
    setupFiles: ['tests/globalFetchFallback.setup.ts'],
    deps: { interopDefault: true },
  },
})
EOF

# The SDK and its dependencies are in place (from the registry): now the server, if the script runs one.
if [ -n "$serve" ]; then
  if [ -z "${AGENTVM_CONFORMANCE_NETNS:-}" ]; then
    # The same script again, alone with a loopback of its own.
    export AGENTVM_CONFORMANCE_NETNS=1 E2B_CONFORMANCE_DIR="$work"
    exec unshare -n bash -c 'ip link set lo up && exec bash "$0" --serve "$@"' "$0" "$checkout" "$@"
  fi
  root=$(cd "$(dirname "$0")/.." && pwd)
  export E2B_DOMAIN=${E2B_DOMAIN:-e2b.localhost:8443}
  export AGENTVM_PREVIEW_DOMAIN=$E2B_DOMAIN AGENTVM_PREVIEW_SCHEME=https
  export AGENTVM_ADMIN_TOKEN="avm_admin_$(openssl rand -hex 16)"
  data="$work/server"
  rm -rf "$data" && mkdir -p "$data"
  node "$root/bin/agentvm.js" serve --port 8080 --data-dir "$data/data" > "$data/server.log" 2>&1 &
  server=$!
  # The server first, then what it leaves running: VMs outlive their server by design.
  cleanup+=("kill $server; wait $server" 'for f in $(find "$data" -name qemu.pid); do kill "$(cat "$f")" 2>/dev/null; done')
  for _ in $(seq 1 240); do curl -sf http://127.0.0.1:8080/readyz > /dev/null && break; sleep 0.5; done
  admin=(-sf -H "authorization: Bearer $AGENTVM_ADMIN_TOKEN" -H 'content-type: application/json')
  field() { node -e 'let d="";process.stdin.on("data",c=>d+=c).on("end",()=>console.log(JSON.parse(d)[process.argv[1]]))' "$1"; }
  tenant=$(curl "${admin[@]}" -X POST http://127.0.0.1:8080/v1/admin/tenants -d '{"email":"e2b-conformance@example.com"}')
  tid=$(field tenant_id <<< "$tenant")
  curl "${admin[@]}" -X PUT "http://127.0.0.1:8080/v1/admin/tenants/$tid/card" -d '{"brand":"visa","last4":"4242"}' > /dev/null
  E2B_API_KEY=$(curl -sf -X POST http://127.0.0.1:8080/v1/api/keys -H "authorization: Bearer $(field api_key <<< "$tenant")" \
    -H 'content-type: application/json' -d '{"format":"e2b","scope":"readwrite"}' | field key)
  export E2B_API_KEY AGENTVM_URL=http://127.0.0.1:8080
  echo "server: $data (its log: $data/server.log)" >&2
fi
: "${E2B_API_KEY:?set E2B_API_KEY to an e2b-format agentvm key}"
base=${AGENTVM_URL:-http://127.0.0.1:8080}
base=${base%/}
export E2B_API_KEY
setup=''
if [ -z "${E2B_DOMAIN:-}" ]; then
  export E2B_API_URL="$base/e2b" E2B_SANDBOX_URL="$base/e2b/sandbox"
else
  unset E2B_API_URL E2B_SANDBOX_URL
  name=${E2B_DOMAIN%:*}
  if [[ "$name" == *.localhost ]]; then
    port=${E2B_DOMAIN##*:}
    [ "$port" != "$E2B_DOMAIN" ] || port=443
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=$name" \
      -addext "subjectAltName=DNS:$name,DNS:*.$name" -keyout "$work/tls.key" -out "$work/tls.crt" 2>/dev/null
    export NODE_EXTRA_CA_CERTS="$work/tls.crt"
    upstream=${base#*://}
    upstream=${upstream%%/*}
    node - "$work/tls.key" "$work/tls.crt" "$port" "$upstream" <<'FRONT' &
const fs = require('node:fs'), net = require('node:net'), tls = require('node:tls');
const [key, cert, port, upstream] = process.argv.slice(2);
const m = /^(.*?)(?::(\d+))?$/.exec(upstream);
tls.createServer({ key: fs.readFileSync(key), cert: fs.readFileSync(cert) }, (s) => {
  const u = net.connect(Number(m[2] ?? 80), m[1]);
  s.pipe(u).pipe(s);
  s.on('error', () => u.destroy());
  u.on('error', () => s.destroy());
}).listen(Number(port), '127.0.0.1');
FRONT
    cleanup=("kill $! 2>/dev/null" "${cleanup[@]}")
    cat > "$work/tests/agentvm.dns.setup.ts" <<DNS
import dns from 'node:dns'
// Wildcard DNS for $name on loopback (a name under .localhost is this machine).
const lookup = dns.lookup
;(dns as any).lookup = function (host: string, opts: any, cb: any) {
  if (typeof opts === 'function') [cb, opts] = [opts, {}]
  if (typeof opts === 'number') opts = { family: opts }
  const h = host.toLowerCase()
  if (h !== '$name' && !h.endsWith('.$name')) return lookup.call(this, host, opts, cb)
  if (opts?.all) return process.nextTick(cb, null, [{ address: '127.0.0.1', family: 4 }])
  process.nextTick(cb, null, '127.0.0.1', 4)
}
DNS
    setup=", 'tests/agentvm.dns.setup.ts'"
  fi
fi
sed -i "s#'tests/globalFetchFallback.setup.ts'\]#'tests/globalFetchFallback.setup.ts'$setup]#" "$work/vitest.agentvm.config.mts"
cd "$work"
status=0
npx vitest run --config vitest.agentvm.config.mts --reporter=default --reporter=json --outputFile=report.json "$@" || status=$?
node -e '
const r = JSON.parse(require("node:fs").readFileSync("report.json", "utf8"));
console.log(`e2b conformance: ${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests + r.numTodoTests} skipped (of ${r.numTotalTests}; ${r.numTotalTestSuites} suites)`);
' || true
echo "report: $work/report.json" >&2
exit $status
