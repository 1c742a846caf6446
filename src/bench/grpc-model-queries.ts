import { status, type Client, type ServiceError } from '@grpc/grpc-js';
import type protobuf from 'protobufjs';
import type { ClientTls } from '../core/client-tls.js';
import { ModelNotFoundError, UsageError } from '../core/errors.js';
import type { ModelStatsJson } from '../metrics/model-statistics.js';
import { inferenceProtocol } from '../protocol/grpc-messages.js';
import { grpcClient, grpcStatusKind } from './grpc-channel.js';
import { serverPointOf, someStatistics, type ModelQueries, type TritonBatchingConfig } from './model-queries.js';
import type { ModelMetadata } from './payload.js';
import type { ServerPoint } from './report-types.js';

/** grpc-js's own status for a call that never reached a server (its picker.js, load-balancer-pick-first.js). */
const NO_CONNECTION = /No connection established/;
/** Long enough for a busy server, short enough that a wrong address is reported soon. */
const QUERY_DEADLINE_MS = 10_000;

/**
 * The same questions over gRPC, for a `--url grpc://host:port`: ModelMetadata, ModelConfig and
 * ModelStatistics. Answers are read as plain objects in the protos' field names, which are the
 * REST answers' names too.
 */
export class GrpcModelQueries implements ModelQueries {
  readonly #client: Client;

  constructor(
    readonly url: string,
    readonly model: string,
    tls?: ClientTls,
  ) {
    this.#client = grpcClient(url, tls);
  }

  async metadata(): Promise<ModelMetadata> {
    return (await this.#call('ModelMetadata', 'ModelMetadataResponse')) as unknown as ModelMetadata;
  }

  async config(): Promise<ServerPoint> {
    const answer = (await this.#call('ModelConfig', 'ModelConfigResponse')) as { config: TritonBatchingConfig };
    return serverPointOf(answer.config);
  }

  async stats(): Promise<readonly ModelStatsJson[]> {
    const answer = (await this.#call('ModelStatistics', 'ModelStatisticsResponse')) as {
      model_stats: ModelStatsJson[];
    };
    return someStatistics(answer.model_stats, this.model);
  }

  close(): void {
    this.#client.close();
  }

  #call(method: string, answerType: string): Promise<Record<string, unknown>> {
    const { service, types } = inferenceProtocol();
    const rpc = service[method];
    if (!rpc) throw new TypeError(`the inference protos have no ${method}`);
    return new Promise((resolve, reject) => {
      this.#client.makeUnaryRequest(
        rpc.path,
        rpc.requestSerialize,
        rpc.responseDeserialize,
        { name: this.model },
        { deadline: Date.now() + QUERY_DEADLINE_MS },
        (error: ServiceError | null, answer?: object) => {
          if (error) reject(this.#failure(method, error));
          else {
            const type = types.lookupType(`inference.${answerType}`);
            resolve(type.toObject(answer as protobuf.Message, { longs: Number, enums: String, defaults: true }));
          }
        },
      );
    });
  }

  #failure(method: string, error: ServiceError): Error {
    if (error.code === status.NOT_FOUND) {
      return new ModelNotFoundError(`the server at ${this.url} has no model "${this.model}": ${error.details}`);
    }
    if (error.code === status.UNAVAILABLE && NO_CONNECTION.test(error.details)) {
      return new UsageError(`cannot reach ${this.url}: ${error.details}`, { cause: error });
    }
    return new UsageError(`${method} at ${this.url} answered ${grpcStatusKind(error.code)}: ${error.details}`, {
      cause: error,
    });
  }
}
