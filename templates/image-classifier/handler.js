// A batchserve image-classifier handler: image bytes (PNG or JPEG) in, top-k
// `{label, score}` out. Resizing and normalization come from the `image_classifier` section of
// model-config.yaml; change a hook here only for what the config cannot express.

export async function preprocess(requests, context) {
  return context.builtins['image-classifier'].preprocess(requests, context);
}

export async function postprocess(outputs, requests, context) {
  return context.builtins['image-classifier'].postprocess(outputs, requests, context);
}
