import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  checkK8sOptions,
  checkKServeOptions,
  checkRuntimeOptions,
  type K8sOptions,
  type KServeOptions,
} from '../../src/deploy/deploy-options.js';

const KSERVE: KServeOptions = {
  name: 'resnet',
  storageUri: 's3://models/resnet.mar',
  deploymentMode: 'standard',
  minReplicas: 1,
  maxReplicas: 4,
  targetQueueDepth: 16,
  image: 'ghcr.io/batchserve/batchserve:0.1.0',
};
const K8S: K8sOptions = {
  name: 'resnet',
  image: 'registry.example.com/resnet:1.0',
  autoscaler: 'keda',
  minReplicas: 1,
  maxReplicas: 4,
  targetQueueDepth: 16,
};

function refused(check: () => void, message: RegExp): void {
  assert.throws(check, (error: Error & { code?: string }) => {
    assert.equal(error.code, 'BS_ERR_USAGE');
    assert.match(error.message, message);
    assert.ok(!error.message.includes('\n'), 'one line');
    return true;
  });
}

test('names: DNS-1035 labels, 47 characters for KServe (its revision name) and 63 for a Deployment', () => {
  checkKServeOptions({ ...KSERVE, name: 'a'.repeat(47) });
  refused(() => checkKServeOptions({ ...KSERVE, name: 'a'.repeat(48) }), /at most 47 characters/);
  checkK8sOptions({ ...K8S, name: 'a'.repeat(63) });
  refused(() => checkK8sOptions({ ...K8S, name: 'a'.repeat(64) }), /at most 63 characters/);
  for (const name of ['1resnet', 'resnet-', 'res_net', 'ResNet', '']) {
    refused(() => checkK8sOptions({ ...K8S, name }), /--name: expected a DNS-1035 label/);
  }
  checkK8sOptions({ ...K8S, namespace: '1-ml' });
  refused(() => checkK8sOptions({ ...K8S, namespace: 'a'.repeat(64) }), /--namespace/);
});

test('replicas, target and GPUs are checked whoever calls the library', () => {
  checkKServeOptions({ ...KSERVE, deploymentMode: 'knative', minReplicas: 0 });
  refused(() => checkKServeOptions({ ...KSERVE, minReplicas: 0 }), /--min-replicas: expected an integer ≥ 1, got 0/);
  refused(
    () => checkKServeOptions({ ...KSERVE, deploymentMode: 'knative', minReplicas: 0, maxReplicas: 0 }),
    /--max-replicas: expected at least --min-replicas \(0\) and at least 1/,
  );
  refused(() => checkKServeOptions({ ...KSERVE, targetQueueDepth: 0.5 }), /--target-queue-depth/);
  refused(() => checkK8sOptions({ ...K8S, targetQueueDepth: 0 }), /--target-queue-depth/);
  refused(() => checkKServeOptions({ ...KSERVE, gpu: 0 }), /--gpu: expected an integer ≥ 1/);
  refused(() => checkK8sOptions({ ...K8S, autoscaler: 'none', replicas: 0 }), /--replicas: expected an integer ≥ 1/);
  // Without an autoscaler the range flags do not apply.
  checkK8sOptions({ ...K8S, autoscaler: 'none', replicas: 2, minReplicas: 9, maxReplicas: 1 });
});

test('images, quantities and URLs', () => {
  checkRuntimeOptions({ image: 'localhost:5000/batchserve:1', cpu: '1.5', memory: '512Mi' });
  refused(() => checkRuntimeOptions({ image: 'Batchserve' }), /--image: "Batchserve" is not an image reference/);
  refused(() => checkRuntimeOptions({ image: 'batchserve:1', cpu: '-1' }), /--cpu: expected a Kubernetes quantity/);
  refused(() => checkKServeOptions({ ...KSERVE, gpu: 1, image: 'batchserve' }), /--gpu selects the -cuda tag/);
  refused(() => checkKServeOptions({ ...KSERVE, storageUri: 's3:/models' }), /--storage-uri/);
  checkKServeOptions({ ...KSERVE, storageUri: 'pvc://models/resnet.mar', prometheusUrl: 'https://p.example.com/' });
  refused(
    () => checkK8sOptions({ ...K8S, prometheusUrl: 'ftp://p:9090' }),
    /--prometheus-url: expected an http\(s\) URL/,
  );
});
