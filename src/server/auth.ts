import { createHash, timingSafeEqual } from 'node:crypto';
import { UnauthorizedError } from '../core/errors.js';
import type { Route } from './http.js';

/**
 * Wraps a route so it runs only for `Authorization: Bearer <token>` (401 otherwise); with no
 * token (`--no-auth`) the route is open. Used by the management API and by the v2 repository
 * extension's load and unload on the inference port.
 */
export function authenticated(token: string | undefined, handle: Route['handle']): Route['handle'] {
  if (token === undefined) return handle;
  const expected = digest(token);
  return async (req, res, params, url) => {
    const header = req.headers.authorization ?? '';
    const presented = /^Bearer (.+)$/i.exec(header)?.[1];
    if (!presented || !timingSafeEqual(digest(presented), expected)) {
      throw new UnauthorizedError(
        presented
          ? 'the bearer token is wrong'
          : 'this route needs "Authorization: Bearer <token>" (the management token)',
      );
    }
    await handle(req, res, params, url);
  };
}

/** Hashing first makes the comparison constant-time whatever the presented length. */
const digest = (value: string): Buffer => createHash('sha256').update(value).digest();
