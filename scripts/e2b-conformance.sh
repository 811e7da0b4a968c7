#!/bin/bash
# E2B's own JS SDK tests (packages/js-sdk/tests/sandbox in E2B's repository) against an agentvm, with
# vitest: the measure of decisions section 17. The npm package `e2b` ships no tests, so this takes a
# checkout of E2B's repository (git clone https://github.com/e2b-dev/E2B).
#
#   scripts/e2b-conformance.sh /path/to/E2B [vitest filter...]
#
# Environment: AGENTVM_URL (default http://127.0.0.1:8080), E2B_API_KEY (an agentvm key in E2B's
# format: POST /v1/api/keys with {"format": "e2b", "scope": "readwrite"}; its tenant needs a card or
# credits). The tests run one file at a time (each test makes a sandbox, a VM), in a copy of the SDK
# under $E2B_CONFORMANCE_DIR (default a new temporary directory) whose packages come from the npm registry.
# The summary (files, tests passed and failed) is the last lines; the JSON report is left in the copy.
set -euo pipefail

checkout=${1:?usage: scripts/e2b-conformance.sh /path/to/E2B-checkout [vitest filter...]}
shift
sdk="$checkout/packages/js-sdk"
[ -d "$sdk/tests/sandbox" ] || { echo "no packages/js-sdk/tests/sandbox under $checkout" >&2; exit 2; }
: "${E2B_API_KEY:?set E2B_API_KEY to an e2b-format agentvm key}"
base=${AGENTVM_URL:-http://127.0.0.1:8080}
base=${base%/}
work=${E2B_CONFORMANCE_DIR:-$(mktemp -d /tmp/e2b-conformance.XXXXXX)}

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

export E2B_API_URL="$base/e2b" E2B_SANDBOX_URL="$base/e2b/sandbox" E2B_API_KEY
cd "$work"
status=0
npx vitest run --config vitest.agentvm.config.mts --reporter=default --reporter=json --outputFile=report.json "$@" || status=$?
node -e '
const r = JSON.parse(require("node:fs").readFileSync("report.json", "utf8"));
console.log(`e2b conformance: ${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests + r.numTodoTests} skipped (of ${r.numTotalTests}; ${r.numTotalTestSuites} suites)`);
' || true
echo "report: $work/report.json" >&2
exit $status
