import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import protobuf from 'protobufjs';
import { parseTextFormat, writeTextFormat, type TextMessage } from '../../src/config/text-format.js';
import { parseTritonConfig, tritonConfigType } from '../../src/config/triton-model-config.js';
import { ConfigInvalidError } from '../../src/core/errors.js';

const INTEGERS: Record<string, [bigint, bigint]> = {
  int32: [-(2n ** 31n), 2n ** 31n - 1n],
  uint32: [0n, 2n ** 32n - 1n],
  int64: [-(2n ** 63n), 2n ** 63n - 1n],
  uint64: [0n, 2n ** 64n - 1n],
};

/** A 64-bit value as the reader gives it: a number while it is exact, else its decimal string. */
const asRead = (value: bigint): number | string =>
  Number.isSafeInteger(Number(value)) ? Number(value) : value.toString();

function scalarArbitrary(type: string, enumType: protobuf.Enum | undefined): fc.Arbitrary<unknown> {
  if (enumType) return fc.constantFrom(...Object.keys(enumType.values));
  if (type === 'bool') return fc.boolean();
  if (type === 'string') return fc.string({ unit: 'grapheme', maxLength: 12 });
  if (type === 'float') return fc.float();
  if (type === 'double') return fc.double();
  const range = INTEGERS[type];
  assert.ok(range, `a scalar type the test knows: ${type}`);
  return fc.bigInt(range[0], range[1]).map(asRead);
}

/** Any message of `type`: each field maybe set, at most one of each oneof, lists and maps of up to 3. */
function messageArbitrary(type: protobuf.Type, depth = 0): fc.Arbitrary<TextMessage> {
  const fields: Record<string, fc.Arbitrary<unknown>> = {};
  for (const field of type.fieldsArray) {
    field.resolve();
    const resolved = field.resolvedType;
    if (resolved instanceof protobuf.Type && depth >= 5) continue;
    const value =
      resolved instanceof protobuf.Type
        ? messageArbitrary(resolved, depth + 1)
        : scalarArbitrary(field.type, resolved instanceof protobuf.Enum ? resolved : undefined);
    if (field.map) {
      const keyType = (field as unknown as protobuf.MapField).keyType;
      const key = scalarArbitrary(keyType, undefined).map(String);
      fields[field.name] = fc.dictionary(key, value, { maxKeys: 3 });
    } else fields[field.name] = field.repeated ? fc.array(value, { maxLength: 3 }) : value;
  }
  return fc.record(fields, { requiredKeys: [] }).map((message) => {
    for (const oneof of type.oneofsArray) {
      for (const name of oneof.oneof.filter((member) => member in message).slice(1)) delete message[name];
    }
    return message;
  });
}

/** protobufjs's JSON of a message: the form both sides are compared in. */
function protobufJson(type: protobuf.Type, message: TextMessage): Record<string, unknown> {
  return type.toObject(type.fromObject(message), { longs: String, enums: String });
}

test('config.pbtxt text round-trips through protobufjs: write, read back, same JSON, for any ModelConfig', () => {
  const type = tritonConfigType();
  fc.assert(
    fc.property(messageArbitrary(type), (message) => {
      const text = writeTextFormat(type, message);
      const read = parseTextFormat(type, text, 'generated.pbtxt');
      assert.deepEqual(protobufJson(type, read), protobufJson(type, message), text);
      // And as bytes: the message protobufjs encodes is the same.
      assert.deepEqual(type.encode(type.fromObject(read)).finish(), type.encode(type.fromObject(message)).finish());
    }),
    { numRuns: 200 },
  );
});

test('the forms Triton configs are written in all read: <> and {}, optional colons, lists, separators, comments, escapes', () => {
  const config = parseTritonConfig(
    [
      '# Triton config',
      'name: "m" platform: \'onnxruntime_onnx\'; max_batch_size: 0x10,',
      'input [ { name: "in" "put" data_type: 11 dims: [ -1, 3 ] } ]',
      'input < name: "second\\t\\101\\x42\\u00e9" data_type: TYPE_INT64 dims: 2 dims: 5 >',
      'dynamic_batching: { preferred_batch_size: [4, 8] max_queue_delay_microseconds: 18446744073709551615 }',
      'parameters [ { key: "a" value { string_value: "1" } }, { key: "b", value: { string_value: "2" } } ]',
      'response_cache { enable: True }',
    ].join('\n'),
    'config.pbtxt',
  );
  assert.equal(config.max_batch_size, 16);
  const inputs = config.input as TextMessage[];
  assert.deepEqual(inputs[0], { name: 'input', data_type: 'TYPE_FP32', dims: [-1, 3] });
  assert.deepEqual(inputs[1], { name: 'second\tABé', data_type: 'TYPE_INT64', dims: [2, 5] });
  assert.deepEqual(config.dynamic_batching, {
    preferred_batch_size: [4, 8],
    max_queue_delay_microseconds: '18446744073709551615',
  });
  assert.deepEqual(config.parameters, { a: { string_value: '1' }, b: { string_value: '2' } });
  assert.deepEqual(config.response_cache, { enable: true });
});

test('a mistake names its line and field', () => {
  const problem = (text: string): string => {
    try {
      parseTritonConfig(text, 'models/m/config.pbtxt');
    } catch (error) {
      assert.ok(error instanceof ConfigInvalidError);
      return error.problems[0] ?? '';
    }
    assert.fail(`read: ${text}`);
  };
  const config = 'name: "m"\nmax_batch_size: 8\ninput [\n  { name: "x" data_type: TYPE_FP32 dims: [ 4 ] },\n';
  assert.equal(
    problem(`${config}  { name: "y" data_type: TYPE_FLOAT dims: [ 4 ] }\n]`),
    'line 5: input[1].data_type: expected one of TYPE_INVALID, TYPE_BOOL, TYPE_UINT8, TYPE_UINT16, TYPE_UINT32, TYPE_UINT64, TYPE_INT8, TYPE_INT16, TYPE_INT32, TYPE_INT64, TYPE_FP16, TYPE_FP32, TYPE_FP64, TYPE_STRING, TYPE_BF16, got "TYPE_FLOAT"',
  );
  assert.equal(problem('max_batch_size: 8\nmax_batch_sizes: 4'), 'line 2: ModelConfig has no field "max_batch_sizes"');
  assert.equal(
    problem('dynamic_batching {\n  max_queue_delay_microseconds: -1\n}'),
    'line 2: dynamic_batching.max_queue_delay_microseconds: -1 is out of range for uint64 (0 to 18446744073709551615)',
  );
  assert.equal(
    problem('max_batch_size: 1\n\nmax_batch_size: 2'),
    'line 3: max_batch_size: set twice, and it is not a repeated field',
  );
  assert.equal(
    problem('dynamic_batching { }\nsequence_batching { }'),
    'line 2: sequence_batching: "dynamic_batching" is set already, and only one of dynamic_batching, sequence_batching, ensemble_scheduling may be',
  );
  assert.equal(problem('name: "m\n"'), 'line 1: unterminated string');
  assert.equal(
    problem('input [ { name: "x" }'),
    'line 1: input: expected "," or "]" in the list, got the end of the file',
  );
  assert.equal(
    problem('version_policy { latest { num_versions 2 } }'),
    'line 1: version_policy.latest.num_versions: expected ":" after the field name',
  );
  assert.equal(problem('max_batch_size: 1.5'), 'line 1: max_batch_size: expected an integer, got "1.5"');
});
