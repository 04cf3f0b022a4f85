#!/usr/bin/env node
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { RatchetStack } from '../lib/ratchet-stack.ts';

const app = new App();
const concurrency = app.node.tryGetContext('apiReservedConcurrency');
new RatchetStack(app, 'Ratchet', {
  env: { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION },
  // cdk deploy -c effectsWebhookUrl=https://… turns on the signed outbound webhook.
  effectsWebhookUrl: app.node.tryGetContext('effectsWebhookUrl'),
  // cdk deploy -c alarmEmail=ops@example.com subscribes an address to the alarms.
  alarmEmail: app.node.tryGetContext('alarmEmail'),
  ...(concurrency !== undefined && { apiReservedConcurrency: Number(concurrency) }),
});
// The AWS Solutions checks run on every synth: an unexplained finding fails it.
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
