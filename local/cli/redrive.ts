/**
 * `npm run redrive`: lists or re-drives the effects dead letters, in order.
 *
 *   npm run redrive -- --list                    # what is dead-lettered (locally)
 *   npm run redrive                              # re-queue every dead letter, each operation in version order
 *   npm run redrive -- --name batches/123        # only this operation
 *   npm run redrive -- --skip batches/123#2      # drop this one (never to be delivered), re-queue the rest
 *   npm run redrive -- --stack Ratchet [--list]  # the same against a deployed stack (AWS credentials and region from the environment)
 *
 * Locally it asks the running `npm start` (RATCHET_URL, default
 * http://127.0.0.1:3000), which owns the data folder.
 */
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { GetQueueAttributesCommand, SendMessageCommand, SQSClient, StartMessageMoveTaskCommand } from '@aws-sdk/client-sqs';
import { networkFailureInWords } from '../../lambda/core/network.ts';
import type { DeadLetter } from '../../lambda/effects/dead-letters.ts';
import { DynamoDbDeadLetters } from '../../lambda/effects/dynamodb-dead-letters.ts';
import type { RedrivenBody } from '../../lambda/effects/process.ts';
import { REDRIVEN_ATTRIBUTE } from '../../lambda/effects/queue.ts';
import { type RedriveOptions, redrive } from '../../lambda/effects/redrive.ts';
import { createDocumentClient, createDynamoDbClient } from '../../lambda/store/dynamodb.ts';
import { effectsGroupOf } from '../../lambda/store/table.ts';
import { tokenForCommands } from '../access/api-token.ts';
import { failure, parseCommandLine } from './command-line.ts';
import { ratchetUrl } from './ratchet-url.ts';

const command = {
  name: 'ratchet redrive',
  usage: `usage: ratchet redrive [--list] [--name OPERATION] [--skip NAME#VERSION] [--stack NAME]
  --list               what is dead-lettered, nothing re-driven
  --name OPERATION     only this operation's dead letters
  --skip NAME#VERSION  drop this one (never to be delivered), re-queue the rest
  --stack NAME         a deployed stack (AWS credentials and region from the environment); without it the
                       running ratchet start (RATCHET_URL, default http://127.0.0.1:3000), with its API token
                       (RATCHET_API_TOKEN, else the token file of DATA_DIR, default ./.ratchet-data)`,
  options: { list: { type: 'boolean' }, name: { type: 'string' }, skip: { type: 'string' }, stack: { type: 'string' } },
} as const;
const { values } = parseCommandLine(command);
const options: RedriveOptions = { ...(values.name && { name: values.name }), ...(values.skip && { skip: values.skip }) };

function print(letters: DeadLetter[], undecodable: Array<{ sequence: string; name: string | null; reason: string }>): void {
  if (letters.length === 0 && undecodable.length === 0) console.log('no dead letters');
  for (const l of letters) {
    console.log(
      `${l.idempotencyKey}  ${l.transition.previousState ?? '∅'} -> ${l.transition.state}  ${l.reason}  ${l.status}  attempts ${l.attempts}  ${l.lastError}`,
    );
  }
  for (const u of undecodable) console.log(`undecodable  stream record ${u.sequence}  ${u.name ?? '?'}  ${u.reason}`);
}

async function local(): Promise<void> {
  const url = ratchetUrl(command);
  const token = tokenForCommands(process.env);
  const authorization: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  let response: Response;
  try {
    response = values.list
      ? await fetch(`${url}/effects/dead-letters`, { headers: authorization })
      : await fetch(`${url}/effects/redrive`, {
          method: 'POST',
          body: JSON.stringify(options),
          headers: { 'content-type': 'application/json', ...authorization },
        });
  } catch (error) {
    throw new Error(`cannot reach ${url}: ${networkFailureInWords(error)}; start it with ratchet start (or set RATCHET_URL)`);
  }
  if (response.status === 401)
    throw new Error(`${url} refused the API token: set RATCHET_API_TOKEN, or DATA_DIR to the data folder of the Ratchet there`);
  // biome-ignore lint/suspicious/noExplicitAny: the runtime's own JSON, shaped by the route
  const body = (await response.json()) as any;
  if (!response.ok) throw new Error(`${response.status}: ${JSON.stringify(body)}`);
  if (values.list) print(body.deadLetters, body.undecodable);
  else report(body);
}

function report({ redriven, skipped }: { redriven: string[]; skipped: string[] }): void {
  for (const key of skipped) console.log(`skipped ${key}`);
  for (const key of redriven) console.log(`re-queued ${key}`);
  console.log(`${redriven.length} re-queued, ${skipped.length} skipped`);
}

async function aws(stackName: string): Promise<void> {
  const { Stacks } = await new CloudFormationClient({}).send(new DescribeStacksCommand({ StackName: stackName }));
  const output = (key: string) => {
    const value = Stacks?.[0]?.Outputs?.find((o) => o.OutputKey === key)?.OutputValue;
    if (!value) throw new Error(`stack ${stackName} has no output ${key}`);
    return value;
  };
  const deadLetters = new DynamoDbDeadLetters(createDocumentClient(createDynamoDbClient()), output('EffectsDeadLetterTable'));
  if (values.list) return print(await deadLetters.list(), await deadLetters.listUndecodable());
  const sqs = new SQSClient({});
  const queueUrl = output('EffectsQueueUrl');
  report(
    await redrive(
      deadLetters,
      async (letter) => {
        await sqs.send(
          new SendMessageCommand({
            QueueUrl: queueUrl,
            // The transition itself (a letter of 0.1 still has the stream record it was sent from).
            MessageBody: letter.record ?? JSON.stringify({ redriven: letter.transition } satisfies RedrivenBody),
            MessageGroupId: effectsGroupOf(letter.name),
            // A new id: the queue may still remember the original within its 5-minute deduplication window.
            MessageDeduplicationId: `redrive-${effectsGroupOf(letter.idempotencyKey)}-${Date.now()}`,
            MessageAttributes: { [REDRIVEN_ATTRIBUTE]: { DataType: 'String', StringValue: 'true' } },
          }),
        );
      },
      options,
    ),
  );
  // What SQS itself dead-lettered (a handler that kept crashing) goes back with SQS's own redrive.
  const { Attributes } = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: output('EffectsDeadLetterQueueUrl'),
      AttributeNames: ['QueueArn', 'ApproximateNumberOfMessages'],
    }),
  );
  if (Number(Attributes?.ApproximateNumberOfMessages ?? 0) > 0) {
    await sqs.send(new StartMessageMoveTaskCommand({ SourceArn: Attributes?.QueueArn }));
    console.log(`moving ${Attributes?.ApproximateNumberOfMessages} message(s) from the SQS dead-letter queue back to the effects queue`);
  }
}

try {
  await (values.stack ? aws(values.stack) : local());
} catch (error) {
  failure(command, (error as Error).message);
}
