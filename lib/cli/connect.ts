/**
 * `npm run connect -- --stack NAME`: connects a deployed stack to Gemini (see
 * gemini-connect.ts for the steps). AWS credentials and region come from the
 * environment, as for `cdk deploy`; the Gemini API key from GEMINI_API_KEY or
 * a prompt that does not echo, never from the command line.
 */
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { GetSecretValueCommand, PutSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { GoogleGenAI } from '@google/genai';
import { failure, parseCommandLine, usageError } from '../../app/command-line.ts';
import { openDynamoDb, operationsTable } from '../../engines/dynamodb/index.ts';
import { DEFAULT_GEMINI_API_VERSION } from '../../providers/gemini/poller.ts';
import { CONNECT_OUTPUTS, ConnectError, connect, type GeminiWebhooks, type SecretStore, type StackOutputs } from './gemini-connect.ts';

async function hiddenPrompt(question: string): Promise<string> {
  const { stdin, stderr } = process;
  if (!stdin.isTTY) throw new ConnectError('GEMINI_API_KEY is not set and there is no terminal to ask for it');
  stderr.write(question);
  stdin.setRawMode(true);
  stdin.resume();
  stdin.setEncoding('utf8');
  let answer = '';
  try {
    return await new Promise<string>((resolve, reject) => {
      stdin.on('data', (chunk: string) => {
        for (const char of chunk) {
          if (char === '\r' || char === '\n') return resolve(answer);
          if (char === '\u0003') return reject(new ConnectError('cancelled'));
          answer = char === '\u007f' || char === '\b' ? answer.slice(0, -1) : answer + char;
        }
      });
    });
  } finally {
    stdin.setRawMode(false);
    stdin.pause();
    stderr.write('\n');
  }
}

async function stackOutputs(stack: string): Promise<StackOutputs> {
  let outputs: Array<{ OutputKey?: string; OutputValue?: string }>;
  try {
    const { Stacks } = await new CloudFormationClient({}).send(new DescribeStacksCommand({ StackName: stack }));
    outputs = Stacks?.[0]?.Outputs ?? [];
  } catch (error) {
    throw new ConnectError(`cannot read stack ${stack}: ${(error as Error).message}`);
  }
  const found = Object.fromEntries(outputs.map((o) => [o.OutputKey, o.OutputValue]));
  const missing = CONNECT_OUTPUTS.filter((key) => !found[key]);
  if (missing.length > 0)
    throw new ConnectError(`stack ${stack} has no output ${missing.join(', ')}: deploy this version first (npx cdk deploy)`);
  return found as StackOutputs;
}

function secretsManager(): SecretStore {
  const client = new SecretsManagerClient({});
  return {
    async get(arn) {
      const { SecretString, CreatedDate } = await client.send(new GetSecretValueCommand({ SecretId: arn }));
      return { value: SecretString ?? '', storedAt: CreatedDate ?? new Date(0) };
    },
    async put(arn, value) {
      await client.send(new PutSecretValueCommand({ SecretId: arn, SecretString: value }));
    },
  };
}

const command = {
  name: 'ratchet-aws connect',
  usage: `usage: ratchet-aws connect --stack NAME [options]

Registers the stack's webhook URL with Gemini (or finds and updates it), stores
Gemini's signing secret and your API key in the stack's secrets, then sends
Gemini's ping and waits until Ratchet has verified it. Safe to run again.

  --stack NAME          the deployed stack (required; the standalone stack is "Ratchet")
  --rotate              rotate the signing secret; the previous one stays accepted for 24 h
  --effects-url URL     turn the signed outbound webhook on at URL (off: turn it off);
                        its whsec_ secret is generated once and kept in EffectsSigningSecret
  --wait SECONDS        how long to wait for the ping (default 60)
  --dry-run             print what would change, change nothing (no ping)
  --help                this text

The Gemini API key comes from GEMINI_API_KEY, or a prompt that does not echo.
AWS credentials and region come from the environment (AWS_PROFILE, AWS_REGION).`,
  options: {
    stack: { type: 'string' },
    rotate: { type: 'boolean' },
    'effects-url': { type: 'string' },
    wait: { type: 'string' },
    'dry-run': { type: 'boolean' },
  },
} as const;

async function main(): Promise<void> {
  const { values } = parseCommandLine(command);
  if (!values.stack) usageError(command, '--stack NAME is required');
  const waitSeconds = values.wait === undefined ? 60 : Number(values.wait);
  if (!Number.isFinite(waitSeconds) || waitSeconds <= 0) usageError(command, '--wait takes a number of seconds');
  const outputs = await stackOutputs(values.stack);
  const apiKey = (process.env.GEMINI_API_KEY || (await hiddenPrompt('Gemini API key (not shown): '))).trim();
  if (!apiKey) throw new ConnectError('no Gemini API key given');
  // The webhooks API at the version reconcile polls (GEMINI_API_VERSION, v1beta), never the SDK's default.
  const ai = new GoogleGenAI({
    apiKey,
    httpOptions: {
      apiVersion: process.env.GEMINI_API_VERSION || DEFAULT_GEMINI_API_VERSION,
      ...(process.env.GEMINI_BASE_URL && { baseUrl: process.env.GEMINI_BASE_URL }),
    },
  });
  const { operations: receipts } = openDynamoDb({ tables: { operations: operationsTable(outputs.TableName) } });
  await connect(
    {
      stack: values.stack,
      dryRun: values['dry-run'] ?? false,
      rotate: values.rotate ?? false,
      waitSeconds,
      ...(values['effects-url'] !== undefined && { effectsUrl: values['effects-url'] }),
    },
    { outputs, apiKey, secrets: secretsManager(), gemini: ai.webhooks as unknown as GeminiWebhooks, receipts, log: console.log },
  );
}

try {
  await main();
} catch (error) {
  failure(command, error instanceof ConnectError ? error.message : String((error as Error).message ?? error));
}
