// A batchserve handler. Every hook sees the whole batch and is optional: delete the ones you
// do not change and the built-in tensor handler's run instead. `context.builtins` holds the
// built-in handlers so a hook can change one step and delegate the rest.

/**
 * requests[i].kind says what it carries: 'tensors' (KServe v2, gRPC: .inputs by input name, .rows),
 * 'body' (/predictions: .body raw bytes, .contentType) or 'texts' (/v1/embeddings: .texts).
 */
export async function preprocess(requests, context) {
  return context.builtins.tensor.preprocess(requests, context);
}

/** One forward pass over the whole batch on this instance's onnxruntime session. */
export async function inference(inputs, context) {
  return context.builtins.tensor.inference(inputs, context);
}

/** Must return exactly one response per request, in order. */
export async function postprocess(outputs, requests, context) {
  return context.builtins.tensor.postprocess(outputs, requests, context);
}
