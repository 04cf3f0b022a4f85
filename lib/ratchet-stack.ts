/**
 * The Ratchet stack: the operations table (stream on) and the HTTP API whose
 * Lambda verifies Gemini webhooks and ingests them through the reducer.
 */
import { CfnOutput, Duration, RemovalPolicy, Stack, type StackProps, Validations } from 'aws-cdk-lib';
import { HttpApi, HttpMethod, HttpNoneAuthorizer, HttpStage, LogGroupLogDestination } from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpIamAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import { AttributeType, BillingMode, StreamViewType, Table, TableEncryption } from 'aws-cdk-lib/aws-dynamodb';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import type { Construct } from 'constructs';
import { PARTITION_KEY } from '../lambda/store/table.ts';
import { RatchetFunction } from './ratchet-function.ts';

export class RatchetStack extends Stack {
  readonly table: Table;
  readonly api: HttpApi;
  readonly apiFunction: RatchetFunction;

  constructor(scope: Construct, id: string, props?: StackProps) {
    super(scope, id, props);

    this.table = new Table(this, 'Operations', {
      partitionKey: { name: PARTITION_KEY, type: AttributeType.STRING },
      billingMode: BillingMode.PAY_PER_REQUEST,
      stream: StreamViewType.NEW_AND_OLD_IMAGES,
      encryption: TableEncryption.AWS_MANAGED,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      removalPolicy: RemovalPolicy.RETAIN,
    });

    // Holds the `whsec_…` secret(s) Gemini returned when the webhook was created; set its value after the first deploy.
    const signingSecrets = new Secret(this, 'WebhookSigningSecrets', {
      description: 'Gemini webhook signing secrets (whsec_..., space-separated during rotation)',
    });
    Validations.of(signingSecrets).acknowledge({
      id: 'AwsSolutions-SMG4',
      reason: 'Gemini issues and rotates this secret (webhooks rotate_signing_secret); the value is copied here, not generated.',
    });

    this.apiFunction = new RatchetFunction(this, 'Api', {
      entry: 'lambda/handlers/api.ts',
      description: 'Gemini webhook and operations API',
    })
      .bindTable(this.table, 'GetItem', 'UpdateItem')
      .bindSecret('WEBHOOK_SIGNING_SECRETS', signingSecrets);

    const accessLogs = new LogGroup(this, 'ApiAccessLogs', { retention: RetentionDays.ONE_MONTH, removalPolicy: RemovalPolicy.DESTROY });
    this.api = new HttpApi(this, 'HttpApi', { description: 'Ratchet', createDefaultStage: false });
    new HttpStage(this, 'ApiStage', {
      httpApi: this.api,
      stageName: '$default',
      autoDeploy: true,
      throttle: { rateLimit: 200, burstLimit: 400 },
      accessLogSettings: { destination: new LogGroupLogDestination(accessLogs) },
    });
    const integration = new HttpLambdaIntegration('ApiIntegration', this.apiFunction, { timeout: Duration.seconds(10) });
    const iam = new HttpIamAuthorizer();
    // The webhook is authenticated by its Standard Webhooks signature, checked in the function.
    const open = [
      ...this.api.addRoutes({ path: '/webhooks/gemini', methods: [HttpMethod.POST], integration, authorizer: new HttpNoneAuthorizer() }),
      ...this.api.addRoutes({ path: '/healthz', methods: [HttpMethod.GET], integration, authorizer: new HttpNoneAuthorizer() }),
    ];
    for (const route of open) {
      Validations.of(route).acknowledge({
        id: 'AwsSolutions-APIG4',
        reason:
          'Gemini cannot sign requests with IAM: the webhook is authenticated by its Standard Webhooks signature; healthz reveals nothing.',
      });
    }
    this.api.addRoutes({ path: '/operations', methods: [HttpMethod.POST], integration, authorizer: iam });
    this.api.addRoutes({ path: '/operations/{name+}', methods: [HttpMethod.GET], integration, authorizer: iam });

    new CfnOutput(this, 'ApiUrl', { value: this.api.apiEndpoint });
    new CfnOutput(this, 'WebhookUrl', { value: `${this.api.apiEndpoint}/webhooks/gemini` });
    new CfnOutput(this, 'WebhookSigningSecretArn', { value: signingSecrets.secretArn });
    new CfnOutput(this, 'TableName', { value: this.table.tableName });
  }
}
