import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { prepareV2Request } from '../../src/protocol/prepared-request.js';
import { readBody } from '../../src/server/http.js';

/** One binary v2 body: a JSON header of `headerLength` bytes (padded with spaces), then 4 floats. */
function binaryBody(headerLength: number): Buffer {
  const json = '{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"parameters":{"binary_data_size":16}}]}';
  const header = Buffer.from(json.padEnd(headerLength, ' '));
  return Buffer.concat([header, Buffer.from(Float32Array.from([1, 2, 3, 4]).buffer)]);
}

const signature = {
  inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 4] }],
  outputs: [{ name: 'y', datatype: 'FP32', shape: [-1, 4] }],
  batching: true,
} as const;

test('a body is read into a buffer of its own with the binary data aligned, so its tensor is a view, not a copy', async (t) => {
  const bodies: Buffer[] = [];
  const server = createServer((req, res) => {
    const alignedAt = Number(req.headers['inference-header-content-length']);
    void readBody(req, 1 << 20, alignedAt).then((body) => {
      bodies.push(body);
      res.end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());
  const { port } = server.address() as AddressInfo;
  const send = async (body: Buffer, headerLength: number, chunked: boolean): Promise<void> => {
    const req = httpRequest({
      port,
      method: 'POST',
      headers: {
        'inference-header-content-length': String(headerLength),
        ...(chunked ? { 'transfer-encoding': 'chunked' } : { 'content-length': String(body.length) }),
      },
    });
    // Several writes, so the server sees the body in more than one chunk.
    for (let at = 0; at < body.length; at += 37) req.write(body.subarray(at, at + 37));
    req.end();
    const [res] = (await once(req, 'response')) as [NodeJS.ReadableStream];
    res.resume();
    await once(res, 'end');
  };
  for (const chunked of [false, true]) {
    for (const headerLength of [97, 98, 99, 100, 101, 102, 103, 104]) {
      const sent = binaryBody(headerLength);
      await send(sent, headerLength, chunked);
      const body = bodies.pop() as Buffer;
      const where = `header ${headerLength}, ${chunked ? 'chunked' : 'content-length'}`;
      assert.deepEqual(body, sent, where);
      assert.equal((body.byteOffset + headerLength) % 8, 0, `${where}: binary data starts aligned`);
      assert.equal(body.buffer.byteLength, body.byteOffset + body.length, `${where}: nothing else in the buffer`);
      const prepared = prepareV2Request(
        body,
        { headerLength: String(headerLength), binaryBody: true },
        { ...signature, inputs: [...signature.inputs], outputs: [...signature.outputs] },
      );
      const data = prepared.inputs.x?.data as Float32Array;
      assert.deepEqual(Array.from(data), [1, 2, 3, 4], where);
      assert.equal(data.buffer, body.buffer, `${where}: the tensor reads the body in place`);
    }
  }
});
