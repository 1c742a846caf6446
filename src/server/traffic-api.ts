import type { IncomingMessage } from 'node:http';
import { UsageError } from '../core/errors.js';
import type { TrafficControl } from '../traffic/traffic-control.js';
import { readBody, requireMediaType, sendJson, type Route } from './http.js';

const MODEL = '([^/]+)';
/** Traffic and canary documents are small; a megabyte is far beyond any of them. */
const BODY_LIMIT = 1024 * 1024;

/**
 * The management API's traffic routes: the split, sticky key and shadow of a model, and its
 * canary (start, status, rollback, promote). `batchserve canary` is a client of these.
 */
export function trafficRoutes(traffic: TrafficControl): Route[] {
  return [
    {
      method: 'GET',
      path: new RegExp(`^/models/${MODEL}/traffic$`),
      handle: async (_req, res, [name]) => sendJson(res, 200, traffic.view(name as string)),
    },
    {
      method: 'PUT',
      path: new RegExp(`^/models/${MODEL}/traffic$`),
      handle: async (req, res, [name]) =>
        sendJson(res, 200, await traffic.setTraffic(name as string, await jsonBody(req))),
    },
    {
      method: 'POST',
      path: new RegExp(`^/models/${MODEL}/canary$`),
      handle: async (req, res, [name]) =>
        sendJson(res, 201, await traffic.startCanary(name as string, await jsonBody(req))),
    },
    {
      method: 'GET',
      path: new RegExp(`^/models/${MODEL}/canary$`),
      handle: async (_req, res, [name]) => sendJson(res, 200, traffic.canaryStatus(name as string)),
    },
    {
      method: 'POST',
      path: new RegExp(`^/models/${MODEL}/canary/rollback$`),
      handle: async (_req, res, [name]) => sendJson(res, 200, await traffic.rollback(name as string)),
    },
    {
      method: 'POST',
      path: new RegExp(`^/models/${MODEL}/canary/promote$`),
      handle: async (_req, res, [name]) => sendJson(res, 200, await traffic.promote(name as string)),
    },
  ];
}

async function jsonBody(req: IncomingMessage): Promise<unknown> {
  requireMediaType(req, ['application/json']);
  const text = (await readBody(req, BODY_LIMIT)).toString('utf8');
  try {
    return JSON.parse(text === '' ? '{}' : text);
  } catch (error) {
    throw new UsageError(`the body is not JSON: ${(error as Error).message}`);
  }
}
