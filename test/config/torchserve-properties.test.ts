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

test("TorchServe's TLS: certificate_file and private_key_file serve https addresses, on every port; a keystore is refused with how to convert it", () => {
  const { config, warnings } = serverConfigOfProperties(
    parseProperties(
      [
        'inference_address=https://0.0.0.0:8443',
        'management_address=https://0.0.0.0:8444',
        'metrics_address=http://0.0.0.0:8445',
        'private_key_file=/etc/ts/key.pem',
        'certificate_file=/etc/ts/cert.pem',
      ].join('\n'),
    ),
  );
  assert.deepEqual(config, {
    port: 8443,
    management_port: 8444,
    metrics_port: 8445,
    host: '0.0.0.0',
    tls: { key: '/etc/ts/key.pem', cert: '/etc/ts/cert.pem' },
  });
  assert.deepEqual(warnings, ['metrics_address: served over https too: TLS is on every port or none (gRPC too)']);

  const unused = serverConfigOfProperties(
    parseProperties('inference_address=http://127.0.0.1:8080\ncertificate_file=c.pem\nprivate_key_file=k.pem'),
  );
  assert.equal(unused.config.tls, undefined);
  assert.deepEqual(unused.warnings, ['certificate_file and private_key_file are not used: no address is https']);

  assert.throws(
    () => serverConfigOfProperties(parseProperties('inference_address=https://127.0.0.1:8443')),
    (error: Error & { code?: string }) =>
      error.code === 'BS_ERR_USAGE' &&
      error.message ===
        'config.properties: inference_address is https: give certificate_file and private_key_file (PEM)',
  );
  for (const key of ['keystore=ks.p12', 'keystore_pass=changeit', 'keystore_type=PKCS12']) {
    assert.throws(
      () => serverConfigOfProperties(parseProperties(`inference_address=https://127.0.0.1:8443\n${key}`)),
      (error: Error & { code?: string }) =>
        error.code === 'BS_ERR_USAGE' &&
        error.message.startsWith(
          `config.properties: ${key.split('=')[0]}: a Java keystore is not read; convert it to PEM`,
        ) &&
        !error.message.includes('\n'),
      key,
    );
  }
});
