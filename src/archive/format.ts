/** Archive naming rules, kept free of heavy imports so the CLI can parse flags cheaply. */
export const ARCHIVE_FORMATS = ['zip', 'zip-store', 'dir'] as const;
export type ArchiveFormat = (typeof ARCHIVE_FORMATS)[number];
