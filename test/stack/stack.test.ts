/** Assertions on the synthesized template (bundling skipped; see bundle.test.ts for the real bundle). */
import { App, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import { RatchetStack } from '../../lib/ratchet-stack.ts';

let template: Template;

function synthStack(app: App) {
  return new RatchetStack(app, 'Ratchet', { env: { account: '123456789012', region: 'eu-west-1' } });
}

beforeAll(() => {
  template = Template.fromStack(synthStack(new App({ context: { 'aws:cdk:bundling-stacks': [] } })));
});

describe('RatchetStack', () => {
  it('has the operations table keyed by name, with its stream as in the local runtime', () => {
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      KeySchema: [{ AttributeName: 'name', KeyType: 'HASH' }],
      BillingMode: 'PAY_PER_REQUEST',
      StreamSpecification: { StreamViewType: 'NEW_AND_OLD_IMAGES' },
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
    });
    template.hasResource('AWS::DynamoDB::Table', { DeletionPolicy: 'Retain' });
  });

  it('runs the API function on Node 22, arm64, with the table and the secret ARN in its environment', () => {
    template.hasResourceProperties('AWS::Lambda::Function', {
      Runtime: 'nodejs22.x',
      Architectures: ['arm64'],
      Timeout: 10,
      Environment: {
        Variables: Match.objectLike({
          TABLE_NAME: { Ref: Match.stringLikeRegexp('^Operations') },
          WEBHOOK_SIGNING_SECRETS_ARN: { Ref: Match.stringLikeRegexp('^WebhookSigningSecrets') },
        }),
      },
      LoggingConfig: Match.objectLike({ LogFormat: 'JSON' }),
    });
    template.hasResourceProperties('AWS::Logs::LogGroup', { RetentionInDays: 30 });
  });

  it('grants the function only GetItem and UpdateItem on the table and read on its secret', () => {
    const policies = template.findResources('AWS::IAM::Policy');
    const statements = Object.values(policies).flatMap((p) => p.Properties.PolicyDocument.Statement);
    const dynamo = statements.filter((s) => [s.Action].flat().some((a: string) => a.startsWith('dynamodb:')));
    expect(dynamo).toHaveLength(1);
    expect([dynamo[0].Action].flat().sort()).toEqual(['dynamodb:GetItem', 'dynamodb:UpdateItem']);
    const secrets = statements.filter((s) => [s.Action].flat().some((a: string) => a.startsWith('secretsmanager:')));
    expect(secrets.flatMap((s) => [s.Action].flat()).sort()).toEqual(['secretsmanager:DescribeSecret', 'secretsmanager:GetSecretValue']);
  });

  it('routes the webhook without authorizer (signature-checked) and the operations routes through IAM', () => {
    const routes = template.findResources('AWS::ApiGatewayV2::Route');
    const byKey = Object.fromEntries(Object.values(routes).map((r) => [r.Properties.RouteKey, r.Properties.AuthorizationType]));
    expect(byKey).toEqual({
      'POST /webhooks/gemini': 'NONE',
      'GET /healthz': 'NONE',
      'POST /operations': 'AWS_IAM',
      'GET /operations/{name+}': 'AWS_IAM',
    });
    template.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
      StageName: '$default',
      AutoDeploy: true,
      DefaultRouteSettings: { ThrottlingRateLimit: 200, ThrottlingBurstLimit: 400 },
      AccessLogSettings: Match.objectLike({ DestinationArn: Match.anyValue() }),
    });
  });

  it('passes the AWS Solutions checks (cdk-nag), with every exception explained', () => {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    synthStack(app);
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    expect(() => app.synth()).not.toThrow();
  });
});
