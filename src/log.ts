import pino, { type Logger, type DestinationStream } from 'pino';

export type { Logger };

/** Paths that could hold a credential if anything ever logs a request or a body; pino censors them. */
const REDACT = [
  'req.headers.authorization',
  'headers.authorization',
  'authorization',
  'api_key',
  'key',
  'token',
  'card',
  '*.api_key',
  '*.key',
  '*.token',
];

const requestLoggers = new WeakMap<Logger, Logger>();

/**
 * An error as an object with type, message and stack (a string or other value is logged as a message).
 * A database error carries its query parameters; they stay out of the log.
 */
export function serializeErr(err: unknown): object {
  if (!(err instanceof Error)) return { type: typeof err, message: String(err) };
  return { ...pino.stdSerializers.err(err), params: undefined };
}

export function createLogger(level = 'info', destination?: DestinationStream): Logger {
  // Asynchronous writes: a request never waits for the log line to reach the terminal or the pipe.
  const dest = destination ?? pino.destination({ dest: 1, sync: false });
  const log = pino(
    {
      level,
      base: undefined,
      redact: { paths: REDACT, censor: '[redacted]' },
      serializers: { err: serializeErr },
    },
    dest,
  );
  // The per-request line has fixed fields (id, method, path, status, time) and never a secret, so it
  // skips the redaction pass, the largest cost of logging on the hot path.
  requestLoggers.set(log, pino({ level, base: undefined }, dest));
  return log;
}

/** The logger for the one line per request: same destination, no redaction pass (its fields are fixed). */
export function requestLogger(log: Logger): Logger {
  return requestLoggers.get(log) ?? log;
}
