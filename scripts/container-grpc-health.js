// The gRPC health check a kubelet or KServe would make: grpc.health.v1.Health/Check on the
// given address, with grpc-js and grpc-health-check's .proto from node_modules. Prints the
// status and exits 0 only for SERVING. Usage: node scripts/container-grpc-health.js 127.0.0.1:PORT
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';
import { protoPath } from 'grpc-health-check';

const address = process.argv[2];
if (!address) throw new Error('usage: node scripts/container-grpc-health.js <host:port>');

const definition = protoLoader.loadSync(protoPath, { keepCase: true, enums: String });
const { Health } = grpc.loadPackageDefinition(definition).grpc.health.v1;
const client = new Health(address, grpc.credentials.createInsecure());
client.Check({ service: '' }, { deadline: Date.now() + 5000 }, (error, reply) => {
  client.close();
  if (error) {
    console.log(`error ${error.code} ${error.details}`);
    process.exit(1);
  }
  console.log(reply.status);
  process.exit(reply.status === 'SERVING' ? 0 : 1);
});
