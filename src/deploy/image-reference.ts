import { UsageError } from '../core/errors.js';

/** Where batchserve's own images are published; `-cuda` tags carry the CUDA execution provider. */
export const IMAGE_REPOSITORY = 'ghcr.io/batchserve/batchserve';
const CUDA_SUFFIX = '-cuda';

// A registry port is only a port when a path follows it, so `redis:7` keeps its tag.
const REFERENCE =
  /^(?<repository>[a-z0-9]+(?:[._-][a-z0-9]+)*(?::\d+(?=\/))?(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)(?::(?<tag>\w[\w.-]{0,127}))?(?:@(?<digest>sha256:[a-f0-9]{64}))?$/;

export interface ImageReference {
  readonly repository: string;
  readonly tag: string | undefined;
  readonly digest: string | undefined;
}

/** An image reference such as `registry.example.com:5000/team/resnet:1.2`; anything else is a usage error. */
export function parseImageReference(image: string, flag: string): ImageReference {
  const groups = REFERENCE.exec(image)?.groups;
  if (!groups?.repository) {
    throw new UsageError(`${flag}: "${image}" is not an image reference such as ${IMAGE_REPOSITORY}:1.0`);
  }
  return { repository: groups.repository, tag: groups.tag, digest: groups.digest };
}

/** The image batchserve publishes for a release. */
export function releaseImage(version: string): string {
  return `${IMAGE_REPOSITORY}:${version}`;
}

/**
 * The CUDA variant of an image: its tag with `-cuda` appended, as batchserve's images are
 * published. A digest names one build and cannot be varied, so it is refused, as is an
 * image without a tag.
 */
export function cudaImage(image: string, flag: string): string {
  const reference = parseImageReference(image, flag);
  if (reference.digest !== undefined || reference.tag === undefined) {
    throw new UsageError(
      `${flag}: --gpu selects the ${CUDA_SUFFIX} tag of the image, so give the image by tag (…:TAG), not "${image}"`,
    );
  }
  return reference.tag.endsWith(CUDA_SUFFIX) ? image : `${reference.repository}:${reference.tag}${CUDA_SUFFIX}`;
}

/** The tag of a CUDA image, which KServe's `runtimeVersion` puts in place of the runtime image's tag. */
export function cudaTag(image: string, flag: string): string {
  return parseImageReference(cudaImage(image, flag), flag).tag as string;
}
