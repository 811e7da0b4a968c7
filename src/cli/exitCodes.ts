/**
 * The exit codes of every `agentvm` command (customer and `admin`), one per kind of failure, so that
 * scripts can tell them apart. README.md ("The CLI and MCP") documents them: keep the two in step.
 */
export const EXIT = { ok: 0, usage: 2, auth: 3, invalid: 4, payment: 5, notFound: 6, unreachable: 7, conflict: 8, server: 9, closedOutput: 141 } as const;

/** HTTP status of an API error → exit code. Any status not here (429, 5xx) is the server's side. */
const EXIT_BY_STATUS: Readonly<Record<number, number>> = {
  400: EXIT.invalid,
  401: EXIT.auth,
  402: EXIT.payment,
  403: EXIT.auth,
  404: EXIT.notFound,
  405: EXIT.invalid,
  409: EXIT.conflict,
  413: EXIT.invalid,
  415: EXIT.invalid,
};

/** The exit code for an API error's HTTP status; with no status known, the server's side. */
export function exitCodeForStatus(status: number | undefined): number {
  return (status === undefined ? undefined : EXIT_BY_STATUS[status]) ?? EXIT.server;
}
