import type { ModelConfig } from './model-config.js';
import { functionReference, isModelStep } from './pipeline-config.js';

export interface FileReference {
  /** The config key that names the file, as errors show it. */
  readonly key: string;
  /** '/'-separated, relative to the archive root. */
  readonly path: string;
}

/**
 * Every archive file a config names: what a loader will open beside the model. Readers
 * check each one (a safe name of an entry the archive holds) before anything opens it.
 */
export function configFileReferences(config: ModelConfig): FileReference[] {
  const references: FileReference[] = [];
  if (config.labels_file !== undefined) references.push({ key: 'labels_file', path: config.labels_file });
  if (config.text?.tokenizer_file !== undefined) {
    references.push({ key: 'text.tokenizer_file', path: config.text.tokenizer_file });
  }
  if (config.text?.chat_template_file !== undefined) {
    references.push({ key: 'text.chat_template_file', path: config.text.chat_template_file });
  }
  config.pipeline?.steps.forEach((step, index) => {
    if (!isModelStep(step)) {
      references.push({ key: `pipeline.steps[${index}].function`, path: functionReference(step.function).file });
    }
  });
  return references;
}
