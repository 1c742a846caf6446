import { parentPort, workerData } from 'node:worker_threads';
import { LocalInstance } from './local-instance.js';
import { openInstance, type InstanceSpec } from './open-instance.js';
import type { InstanceCommand } from './worker-instance.js';
import { handlerRequestFromWire, toWireError, wireFromHandlerResponse, type WireRequest } from './worker-protocol.js';

/**
 * One model instance in a worker thread of its own: the handler's JavaScript work and the
 * tensor stacking happen here, so they never stall the server's HTTP loop.
 */
const port = parentPort;
if (!port) throw new Error('worker-main must run in a worker thread');
const spec = workerData as InstanceSpec & { id: string };

try {
  // The server times the handler's import from these: a loop at import never posts again.
  const opened = await openInstance(spec, {
    started: () => port.postMessage({ type: 'importing-handler' }),
    finished: () => port.postMessage({ type: 'imported-handler' }),
  });
  const instance = new LocalInstance(
    spec.id,
    opened.device,
    opened.session,
    opened.handler,
    opened.context,
    opened.generation,
  );
  // One message a step, whatever the number of sequences in it.
  if (opened.generation) {
    instance.listenGeneration({
      events: (events) => port.postMessage({ type: 'generation', events }),
      stopped: () => undefined,
    });
  }
  const runAndAnswer = (id: number, requests: WireRequest[]): Promise<void> =>
    instance.runHandler(requests.map(handlerRequestFromWire)).then(
      ({ responses, timings }) => {
        try {
          port.postMessage({ type: 'result', id, responses: responses.map(wireFromHandlerResponse), timings });
        } catch (error) {
          port.postMessage({ type: 'result', id, error: toWireError(error) });
        }
      },
      (error: unknown) => port.postMessage({ type: 'result', id, error: toWireError(error) }),
    );
  // Batches run one at a time, in the order they came: the batcher may send the next one while
  // one runs (WorkerInstance.queuesBatches), and it starts here the moment the last one ends.
  let previous: Promise<void> = Promise.resolve();
  port.on('message', (message: InstanceCommand) => {
    switch (message.type) {
      case 'close':
        void previous.then(() => instance.release()).finally(() => port.close());
        return;
      case 'generate':
        instance.submitGeneration(message.submission);
        return;
      case 'cancel':
        instance.cancelGeneration(message.id);
        return;
      case 'run':
        previous = previous.then(() => runAndAnswer(message.id, message.requests));
    }
  });
  port.postMessage({
    type: 'ready',
    config: opened.config,
    device: opened.device,
    deviceNote: opened.deviceNote,
    decoder: opened.generation?.decoder,
  });
} catch (error) {
  port.postMessage({ type: 'failed', error: toWireError(error) });
}
