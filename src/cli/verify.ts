import { failedChecksError, verifyArchive } from '../archive/verify.js';
import { createTable } from '../core/table.js';

export async function runVerify(location: string, options: { json: boolean; maxExpansion?: number }): Promise<void> {
  const limits = options.maxExpansion === undefined ? {} : { maxExpansion: options.maxExpansion };
  const report = await verifyArchive(location, { limits });
  if (options.json) {
    process.stdout.write(
      `${JSON.stringify({ location: report.location, ok: report.ok, files: report.files }, null, 2)}\n`,
    );
  } else {
    const table = createTable(['file', 'status', 'sha256']);
    for (const file of report.files) {
      table.push([file.path, file.status, (file.actualSha256 ?? file.expectedSha256 ?? '').slice(0, 16)]);
    }
    process.stdout.write(`${table.toString()}\n`);
  }
  const failed = failedChecksError(location, report.files);
  if (failed) throw failed;
  if (!options.json)
    process.stdout.write(`verified ${location}: all ${report.files.length} files match the manifest\n`);
}
