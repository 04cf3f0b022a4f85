/**
 * The standalone app's stack (`bin/ratchet.ts`, `cdk deploy`): a stack
 * holding one Ratchet and nothing else. Its resources keep the logical ids
 * they had before the construct existed (the construct's id is `Default`,
 * which CDK leaves out of logical ids), so a deployed stack updates in place.
 */
import { Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { Ratchet, type RatchetProps } from './ratchet.ts';

export interface RatchetStackProps extends StackProps, RatchetProps {}

export class RatchetStack extends Stack {
  readonly ratchet: Ratchet;

  constructor(scope: Construct, id: string, props: RatchetStackProps = {}) {
    super(scope, id, props);
    this.ratchet = new Ratchet(this, 'Default', props);
  }
}
