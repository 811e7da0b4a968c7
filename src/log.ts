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

export function createLogger(level = 'info', destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: undefined,
      redact: { paths: REDACT, censor: '[redacted]' },
      // A database error carries its query parameters; they stay out of the log.
      serializers: { err: (err: Error) => ({ ...pino.stdSerializers.err(err), params: undefined }) },
    },
    // Asynchronous writes: a request never waits for the log line to reach the terminal or the pipe.
    destination ?? pino.destination({ dest: 1, sync: false }),
  );
}
