import fc from 'fast-check';
import { formatAwakeableId } from '../../../runtime/src/ids/awakeable-id.ts';
import { DeploymentId, SubscriptionId } from '../../../runtime/src/ids/deployment-id.ts';
import { InvocationId } from '../../../runtime/src/ids/invocation-id.ts';
import { mutatedString } from './arbitraries.ts';

/** Valid ids of every kind Restate clients send, and the same ids slightly damaged. */

export const invocationId: fc.Arbitrary<string> = fc
  .tuple(fc.string({ minLength: 1, maxLength: 8 }), fc.string({ maxLength: 8 }))
  .map(([service, key]) => InvocationId.forWorkflow(service, key));

export const awakeableId: fc.Arbitrary<string> = fc
  .tuple(fc.constantFrom<'signal' | 'legacy'>('signal', 'legacy'), invocationId, fc.nat())
  .map(([kind, id, index]) => formatAwakeableId(kind, id as InvocationId, index));

export const deploymentId: fc.Arbitrary<string> = fc
  .integer({ min: 0, max: 2 ** 47 })
  .map((ms) => DeploymentId.generate(ms));

export const subscriptionId: fc.Arbitrary<string> = fc
  .integer({ min: 0, max: 2 ** 47 })
  .map((ms) => SubscriptionId.generate(ms));

/** Any id, valid or damaged, or just the prefix of one. */
export const anyId: fc.Arbitrary<string> = mutatedString(
  fc.oneof(
    invocationId,
    awakeableId,
    deploymentId,
    subscriptionId,
    fc.constantFrom('inv_', 'inv_1', 'sign_1', 'prom_1', 'dp_', 'sub_1', 'inv_0', '_'),
  ),
);
