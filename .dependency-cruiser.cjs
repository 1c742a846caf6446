/**
 * The folder order of src/ (docs/conventions): an import only goes down a floor or stays in
 * its own folder, and no two modules import each other, directly or round about. `npm test`
 * runs it (`npm run lint:deps`).
 */
const FLOORS = [
  ['core'],
  ['protocol', 'config', 'experiment'],
  ['handlers', 'batching'],
  ['runtime'],
  // Pipelines run steps on instances and handlers' module loading; the repository injects the models.
  ['pipeline'],
  // Packing checks a model with a session and its handler, so archives sit above both.
  ['archive'],
  ['metrics'],
  ['repository'],
  ['traffic', 'predict'],
  // Pack-time conversion: reads calibration .npy files (predict) and hands files to archive.
  ['optimize'],
  ['server'],
  // Manifests for Kubernetes and KServe: plain objects built from core and config only.
  ['bench', 'deploy'],
  ['cli'],
];

const floorOf = new Map(FLOORS.flatMap((folders, floor) => folders.map((folder) => [folder, floor])));
const above = (floor) => [...floorOf].filter(([, other]) => other > floor).map(([folder]) => folder);
const sameFloorOthers = (folder) =>
  [...floorOf].filter(([other, floor]) => floor === floorOf.get(folder) && other !== folder).map(([other]) => other);

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'Two modules that need each other are one concern split badly, or a type that belongs a floor lower.',
      from: { path: '^src/' },
      to: { circular: true },
    },
    ...[...floorOf].map(([folder, floor]) => ({
      name: `${folder}-imports-down`,
      severity: 'error',
      comment: `src/${folder} may import only from floors below it (and itself).`,
      from: { path: `^src/${folder}/` },
      to: { path: `^src/(${[...above(floor), ...sameFloorOthers(folder)].join('|')})/` },
    })),
    {
      name: 'deploy-imports-core-and-config-only',
      severity: 'error',
      comment: 'Manifests describe the server from outside, by its flags and routes; they never load its code.',
      from: { path: '^src/deploy/' },
      to: { path: '^src/', pathNot: '^src/(core|config|deploy)/' },
    },
    {
      name: 'root-files-are-ground-floor',
      severity: 'error',
      comment: 'src/*.ts files (the version) sit on the ground floor.',
      from: { path: '^src/[^/]+\\.ts$' },
      to: { path: '^src/[^/]+/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
