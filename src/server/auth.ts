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
  const check = bearerCheck(token);
  return async (req, res, params, url) => {
    check(req.headers.authorization);
    await handle(req, res, params, url);
  };
}

/**
 * Checks an `Authorization` value (an HTTP header, or gRPC `authorization` metadata) against
 * the token: throws UnauthorizedError unless it is `Bearer <token>`. No token: anything passes.
 */
export function bearerCheck(token: string | undefined): (authorization: string | undefined) => void {
  if (token === undefined) return () => undefined;
  const expected = digest(token);
  return (authorization) => {
    const presented = /^Bearer (.+)$/i.exec(authorization ?? '')?.[1];
    if (!presented || !timingSafeEqual(digest(presented), expected)) {
      throw new UnauthorizedError(
        presented
          ? 'the bearer token is wrong'
          : 'this call needs "Authorization: Bearer <token>" (the management token)',
      );
    }
  };
}

/** Hashing first makes the comparison constant-time whatever the presented length. */
const digest = (value: string): Buffer => createHash('sha256').update(value).digest();
