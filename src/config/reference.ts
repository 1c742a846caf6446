import { formatDuration, type FieldSpec } from './schema-kit.js';
import { modelConfigSchema } from './model-config.js';

/**
 * A reference page rendered from a schema, so the docs can never drift from what validation
 * accepts (a test compares docs/ with these).
 */
export function renderSchemaReference(schema: FieldSpec, title: string, intro: readonly string[]): string {
  const rows: string[] = [];
  collectRows(schema, '', rows);
  return [
    `# ${title}`,
    '',
    '<!-- Generated from the schema by `npm run docs`; do not edit by hand. -->',
    '',
    ...intro,
    '',
    '| key | type | default | description |',
    '| --- | --- | --- | --- |',
    ...rows,
    '',
  ].join('\n');
}

export function renderModelConfigReference(): string {
  return renderSchemaReference(modelConfigSchema, 'model-config.yaml reference', [
    'Every archive holds one `model-config.yaml` (JSON is accepted too). Every key is optional;',
    'unknown keys are errors. `pack` fills in `inputs`, `outputs` and `max_batch_size` from the',
    'model when they are left out, and stores the completed config in the archive.',
    'Durations take microseconds (an integer) or a string such as `250us`, `5ms`, `1.5s`.',
  ]);
}

function collectRows(spec: FieldSpec, path: string, rows: string[]): void {
  if (spec.kind === 'object') {
    if (path !== '') rows.push(row(path, spec));
    for (const [key, field] of Object.entries(spec.fields))
      collectRows(field, path === '' ? key : `${path}.${key}`, rows);
    return;
  }
  rows.push(row(path, spec));
  if (spec.kind === 'array' && spec.items.kind === 'object') collectRows(spec.items, `${path}[]`, rows);
  if (spec.kind === 'map' && spec.values.kind === 'object') collectRows(spec.values, `${path}.<${spec.keyHint}>`, rows);
}

function row(path: string, spec: FieldSpec): string {
  const defaultValue = 'default' in spec && spec.default !== undefined ? `\`${JSON.stringify(spec.default)}\`` : '—';
  return `| \`${path}\` | ${typeName(spec)} | ${defaultValue} | ${spec.description.replaceAll('|', '\\|')} |`;
}

function typeName(spec: FieldSpec): string {
  switch (spec.kind) {
    case 'enum':
      return spec.values.map((value) => `\`${value}\``).join(' \\| ');
    case 'array':
      return spec.items.kind === 'object' ? 'list of mappings' : `list of ${typeName(spec.items)}`;
    case 'object':
      return 'mapping';
    case 'map':
      return `mapping of ${spec.keyHint} → ${spec.values.kind === 'object' ? 'mapping' : typeName(spec.values)}`;
    case 'duration':
      return `duration${bounds(spec.min, spec.max, formatDuration)}`;
    case 'integer':
    case 'number':
      return `${spec.kind}${bounds(spec.min, spec.max, String)}`;
    default:
      return spec.kind;
  }
}

/** The range validation enforces, shown beside the type so the limits are documented where the keys are. */
function bounds(min: number | undefined, max: number | undefined, format: (value: number) => string): string {
  if (min !== undefined && max !== undefined) return ` ${format(min)}–${format(max)}`;
  if (min !== undefined) return ` ≥ ${format(min)}`;
  return max === undefined ? '' : ` ≤ ${format(max)}`;
}
