// Reads the ClusterServingRuntime's container for scripts/container-check.sh, one value a line:
// `args <model-name>` (with KServe's {{.Name}} filled in), `user` (uid:gid) or `probes`
// (port:path for the start-up, readiness and liveness probes).
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

const [file, what, modelName] = process.argv.slice(2);
const container = parse(readFileSync(file, 'utf8')).spec.containers[0];
if (what === 'args') {
  for (const arg of container.args) console.log(arg.replaceAll('{{.Name}}', modelName));
} else if (what === 'user') {
  console.log(`${container.securityContext.runAsUser}:${container.securityContext.runAsGroup}`);
} else if (what === 'probes') {
  for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe']) {
    const { port, path } = container[probe].httpGet;
    console.log(`${probe}:${port}${path}`);
  }
} else {
  throw new Error('usage: node scripts/container-runtime-args.js <runtime.yaml> args <model>|user|probes');
}
