// A stand-in for an OpenTelemetry collector, to see batchserve's traces without one: it takes
// OTLP/HTTP JSON at /v1/traces (what `serve --otlp-endpoint http://localhost:PORT` sends) and
// prints one line per span: its name, trace, span and parent ids, and its attributes.
// Usage: node examples/tracing/print-spans.js --port 4318
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { port: { type: 'string', default: '4318' } } });

const valueOf = (value) => value.stringValue ?? value.intValue ?? value.doubleValue ?? value.boolValue;

createServer((req, res) => {
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    for (const { scopeSpans } of body.resourceSpans ?? []) {
      for (const { spans } of scopeSpans) {
        for (const span of spans) {
          const attributes = (span.attributes ?? []).map(({ key, value }) => `${key}=${valueOf(value)}`);
          console.log(
            `${span.name}  trace ${span.traceId}  span ${span.spanId}  parent ${span.parentSpanId || '-'}` +
              `${span.links?.length ? `  links ${span.links.length}` : ''}  ${attributes.join(' ')}`,
          );
        }
      }
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
}).listen(Number(values.port), '127.0.0.1');
