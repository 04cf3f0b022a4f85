/**
 * A CDK app of your own with Ratchet in it: when a batch succeeds, run a
 * function; and let another function of the app track and read jobs.
 *
 *   cd examples/cdk-app && npx cdk synth      (or cdk deploy, then npm run connect -- --stack MyApp)
 */

import { Ratchet } from '@ratchet/cdk';
import { App, Stack } from 'aws-cdk-lib';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { Runtime } from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';

const app = new App();
const stack = new Stack(app, 'MyApp', { env: { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION } });

const ratchet = new Ratchet(stack, 'Ratchet');

// Reacts to each batch that succeeded: the event's detail is the change (name, state, result, userMetadata, …).
const onBatchDone = new NodejsFunction(stack, 'OnBatchDone', {
  entry: `${import.meta.dirname}/on-batch-done.ts`,
  runtime: Runtime.NODEJS_24_X,
});
ratchet.onStateChange('BatchSucceeded', new LambdaFunction(onBatchDone), { kinds: ['batch'], states: ['SUCCEEDED'] });

// Submits jobs and waits for them with ratchet/client (SigV4 with its own role).
const submitter = new NodejsFunction(stack, 'Submitter', {
  entry: `${import.meta.dirname}/submitter.ts`,
  runtime: Runtime.NODEJS_24_X,
  environment: { RATCHET_URL: ratchet.apiUrl },
});
ratchet.grantTrack(submitter);
ratchet.grantRead(submitter);
