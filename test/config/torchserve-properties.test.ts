import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseProperties, serverConfigOfProperties } from '../../src/config/torchserve-properties.js';

test("config.properties parses as Java's properties: = or :, comments, continued lines", () => {
  const parsed = parseProperties(
    ['# a comment', '! another', 'a=1', 'b : two words ', 'c=first,\\', '   second', 'flag', ''].join('\n'),
  );
  assert.deepEqual(Object.fromEntries(parsed), { a: '1', b: 'two words', c: 'first,second', flag: '' });
});

test("TorchServe's keys map onto server.yaml; the rest are named, with where batchserve does them", () => {
  const { config, warnings } = serverConfigOfProperties(
    parseProperties(
      [
        'inference_address=http://0.0.0.0:8085',
        'management_address=http://0.0.0.0:8086',
        'metrics_address=http://127.0.0.1:8087',
        'grpc_inference_port=7070',
        'model_store=/models',
        'load_models=resnet.mar,squeeze=squeezenet_v1.1.mar',
        'max_request_size=6553500',
        'enable_token_authorization=true',
        'token_expiration_min=30',
        'default_workers_per_model=2',
        'cors_allowed_origin=*',
      ].join('\n'),
    ),
  );
  assert.deepEqual(config, {
    port: 8085,
    management_port: 8086,
    metrics_port: 8087,
    grpc_port: 7070,
    model_store: '/models',
    models: ['resnet=/models/resnet.mar', 'squeeze=/models/squeezenet_v1.1.mar'],
    max_request_size: 6553500,
    host: '0.0.0.0',
    auth: { mode: 'torchserve', key_expiration: '1800s' },
  });
  assert.deepEqual(warnings, [
    "metrics_address: every API binds to one host, 0.0.0.0 (the inference address's); not 127.0.0.1",
    "default_workers_per_model is not read: it is each archive's instances in its model-config.yaml (or PUT /models/{m}?min_worker=)",
    'cors_allowed_origin is not used by batchserve',
  ]);
  assert.deepEqual(
    serverConfigOfProperties(parseProperties('load_models=all\ndisable_token_authorization=true')).config,
    {
      models: ['all'],
      auth: { enabled: false },
    },
  );
  assert.throws(
    () => serverConfigOfProperties(parseProperties('inference_address=8080')),
    /inference_address: expected an address such as http:\/\/127.0.0.1:8080, got "8080"/,
  );
});
