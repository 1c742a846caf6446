import { readFile } from 'node:fs/promises';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import formats from 'ajv-formats';
import { parse, parseAllDocuments } from 'yaml';

/**
 * The vendored schemas (test/fixtures/k8s/SOURCE.md), compiled with ajv. Each kind is compiled
 * once per test file, and only when asked for: the InferenceService CRD takes seconds.
 */

const FIXTURES = new URL('../../../test/fixtures/k8s/', import.meta.url);

type Schema = { [key: string]: unknown };

export const KINDS = {
  ClusterServingRuntime: {
    crd: 'kserve/serving.kserve.io_clusterservingruntimes.yaml',
    apiVersion: 'serving.kserve.io/v1alpha1',
  },
  InferenceService: { crd: 'kserve/serving.kserve.io_inferenceservices.yaml', apiVersion: 'serving.kserve.io/v1beta1' },
  Deployment: { json: 'kubernetes/deployment-apps-v1.json' },
  Service: { json: 'kubernetes/service-v1.json' },
  HorizontalPodAutoscaler: { json: 'kubernetes/horizontalpodautoscaler-autoscaling-v2.json' },
  Job: { json: 'kubernetes/job-batch-v1.json' },
  ScaledObject: { json: 'keda/scaledobject-keda-v1alpha1.json' },
} as const;

export type Kind = keyof typeof KINDS;

// Unoptimized code compiles the InferenceService CRD in a third of the time and validates a few objects as fast.
const ajv = new Ajv({ strict: false, allErrors: true, code: { optimize: false } });
formats.default(ajv);
const compiled = new Map<Kind, Promise<ValidateFunction>>();
let objectMeta: Promise<Schema> | undefined;

async function readJson(path: string): Promise<Schema> {
  return JSON.parse(await readFile(new URL(path, FIXTURES), 'utf8')) as Schema;
}

/** Kubernetes 1.30's ObjectMeta, strict, from the Deployment schema: what every kind's metadata must be. */
function kubernetesObjectMeta(): Promise<Schema> {
  objectMeta ??= readJson(KINDS.Deployment.json).then(
    (deployment) => (deployment.properties as Schema).metadata as Schema,
  );
  return objectMeta;
}

/**
 * Where a CRD lists `properties` but says nothing of others, the API server prunes unknown
 * keys without a word; here they fail instead, so that a misspelt key is caught.
 */
export function closeObjects(schema: unknown): void {
  if (Array.isArray(schema)) {
    for (const item of schema) closeObjects(item);
    return;
  }
  if (typeof schema !== 'object' || schema === null) return;
  const node = schema as Schema;
  if (
    node.properties !== undefined &&
    node.additionalProperties === undefined &&
    node['x-kubernetes-preserve-unknown-fields'] !== true
  ) {
    node.additionalProperties = false;
  }
  for (const [key, value] of Object.entries(node)) {
    // `properties` maps names to schemas; a property may itself be named like a keyword.
    if (key === 'properties' && typeof value === 'object' && value !== null) {
      for (const property of Object.values(value)) closeObjects(property);
    } else if (typeof value === 'object') {
      closeObjects(value);
    }
  }
}

async function loadSchema(kind: Kind): Promise<Schema> {
  const source = KINDS[kind];
  if ('crd' in source) {
    const crd = parse(await readFile(new URL(source.crd, FIXTURES), 'utf8')) as {
      spec: { versions: { name: string; schema: { openAPIV3Schema: Schema } }[] };
    };
    const schema = crd.spec.versions[0]?.schema.openAPIV3Schema as Schema;
    closeObjects(schema);
    const properties = schema.properties as Schema;
    properties.apiVersion = { const: source.apiVersion };
    properties.kind = { const: kind };
    properties.metadata = await kubernetesObjectMeta();
    schema.required = ['apiVersion', 'kind', 'metadata', 'spec'];
    return schema;
  }
  const schema = await readJson(source.json);
  // `http://json-schema.org/schema#` is no meta-schema ajv knows; the schemas are draft-07.
  delete schema.$schema;
  if (kind === 'ScaledObject') (schema.properties as Schema).metadata = await kubernetesObjectMeta();
  return schema;
}

export function validatorFor(kind: Kind): Promise<ValidateFunction> {
  let validator = compiled.get(kind);
  if (validator === undefined) {
    validator = loadSchema(kind).then((schema) => ajv.compile(schema));
    compiled.set(kind, validator);
  }
  return validator;
}

/** The schema's complaints about one object, picked by its kind: `/path: message` each, none when valid. */
export async function schemaProblems(object: unknown): Promise<string[]> {
  const kind = (object as { kind?: unknown }).kind;
  if (typeof kind !== 'string' || !(kind in KINDS)) return [`unexpected kind ${String(kind)}`];
  const validate = await validatorFor(kind as Kind);
  return validate(object) ? [] : (validate.errors ?? []).map(describeError);
}

function describeError(error: ErrorObject): string {
  const extra =
    error.keyword === 'additionalProperties'
      ? ` (${String((error.params as { additionalProperty: string }).additionalProperty)})`
      : '';
  return `${error.instancePath || '/'}: ${error.message ?? error.keyword}${extra}`;
}

/** Every document of a multi-document YAML text, as plain objects; a YAML error throws. */
export function parseDocuments(text: string): unknown[] {
  return parseAllDocuments(text).map((document) => {
    const [error] = document.errors;
    if (error !== undefined) throw error;
    return document.toJS() as unknown;
  });
}
