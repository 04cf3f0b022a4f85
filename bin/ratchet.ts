#!/usr/bin/env node
import { App } from 'aws-cdk-lib';
import { RatchetStack } from '../lib/ratchet-stack.ts';

const app = new App();
new RatchetStack(app, 'Ratchet', {
  env: { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION },
  // cdk deploy -c effectsWebhookUrl=https://… turns on the signed outbound webhook.
  effectsWebhookUrl: app.node.tryGetContext('effectsWebhookUrl'),
});
