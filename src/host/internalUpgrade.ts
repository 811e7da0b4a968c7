/**
 * The admission of a replica's HTTP upgrade on a host's internal endpoint (shells and ports alike): the
 * address not throttled, a live replica credential (a wrong one counts against the address). Answers
 * how to refuse from then on (every refusal carries this host's credential), or null once refused.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { DomainError } from '../domain/errors.ts';
import { refuseUpgrade } from '../http/errors.ts';
import { clientAddress, type FailureThrottle, throttledError } from '../throttle.ts';
import { HOST_CREDENTIAL_HEADER } from './internalContract.ts';
import type { InternalAuthority } from './internalAuth.ts';

export async function admitReplica(
  o: { authority: InternalAuthority; throttle: FailureThrottle },
  req: IncomingMessage,
  socket: Duplex,
  requestId: string,
): Promise<((err: DomainError) => void) | null> {
  const address = clientAddress({ incoming: req });
  const wait = o.throttle.wait(address);
  if (wait > 0) return (refuseUpgrade(socket, throttledError(wait), requestId), null);
  const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
  if (!(await o.authority.replica(token))) {
    if (token) o.throttle.fail(address);
    return (refuseUpgrade(socket, new DomainError('unauthorized', ''), requestId), null);
  }
  return (err) => refuseUpgrade(socket, new DomainError(err.code, err.message, err.hint, { ...err.headers, [HOST_CREDENTIAL_HEADER]: o.authority.credential }), requestId);
}
